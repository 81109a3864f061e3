"""The package's provider process: Pulumi's Python language host runs this folder
(``PulumiPlugin.yaml`` beside it) for ``pulumi package add``/``get-schema`` and for every program
that uses the generated SDK; it serves the components of ``package_provider.OFFERED``."""

import importlib
import sys

import pulumi.provider


def main() -> None:
    """Serve the provider on the engine address the host passes (``sys.argv``)."""
    # By its package name: the host runs this folder as a script, where a relative import has no package.
    provider = importlib.import_module("eks_gpu_training.plugin.package_provider")
    pulumi.provider.main(provider.PackageProvider(), sys.argv[1:])


if __name__ == "__main__":
    main()
