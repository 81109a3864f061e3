"""The Go components the local control plane and the engine tests are built from: one record each.

Each component is a small wrapper module in ``go/<component>/`` (a ``go.mod`` that pins the
upstream module and a ``go.sum`` that pins every dependency's hash; no Go source): the upstream
module's own ``replace`` directives keep ``go install`` from building it, a wrapper's requirement
does not. The package's catalogue is what its commands run: the control plane (``up``, ``build``)
and the engine's tools (``tools``). Components only the tests run are catalogued beside them, in
a ``catalogue.json`` whose wrappers sit in the same folder (``load_catalogue``).

The standard library only, like ``build.py``, which CI runs as a script before the package is
installed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Optional

if __package__:
    from .errors import LocalError
else:  # imported by build.py run as a script, its folder first on sys.path
    from errors import LocalError  # type: ignore[import-not-found,no-redef]  # the script's own folder, not the package, is on sys.path

WRAPPERS = Path(__file__).parent / "go"
"""The package's wrapper modules, one folder each."""


class BuildError(LocalError):
    """A component could not be built; the message says which, the details what Go printed last."""

    fix = ("check that the Go module proxy is reachable (GOPROXY) and the wrapper's go.mod and go.sum are as "
           "committed, then build again")


@dataclass(frozen=True)
class GoComponent:
    """One wrapper module and the main packages built from it."""

    name: str
    """The wrapper's folder under ``go/``, and the cache key's first half."""
    module: str
    """The upstream module the wrapper requires; its required version is the cache key's second half."""
    binaries: dict[str, str]
    """Binary name -> main package path."""
    version_variable: Optional[str] = None
    """A ``-X`` linker variable set to the module's version, so version checks see a real one."""
    data: tuple[str, ...] = ()
    """Files of the upstream module copied beside the binaries (stage definitions, CRDs), by
    their path inside the module; they are read from the module exactly as it was built."""
    generate: tuple[str, ...] = ()
    """Packages of the upstream module, by their path inside it, whose ``go:generate`` steps make
    files the build embeds but the module zip does not carry. The build runs them in a copy of the
    module in the cache and builds from that copy (the wrapper's pin and hashes still choose it)."""
    release: Optional[str] = None
    """The release a pseudo-version pin is, stamped as the binary's version (and given to the
    generate steps as ``VERSION``); default: the pinned version itself."""
    reports_version: Optional[tuple[tuple[str, ...], str]] = None
    """How each binary says its version: the arguments, and a pattern whose group ``version`` is
    it (e.g. ``Kubernetes v1.35.4``), so a prebuilt copy (``--bin-dir``) is used only at the pin.
    None: the binary reports none, and is always built."""
    toolchain: Optional[str] = None
    """The Go toolchain to build with (``GOTOOLCHAIN``, e.g. ``go1.27.3``) when the pinned module
    needs a newer Go than the one on ``PATH``; the ``go`` command fetches that toolchain from the
    module proxy and checks it against the checksum database. Default: the local Go only."""
    wrappers: Path = WRAPPERS
    """The folder holding the wrapper (default: the package's own)."""

    @property
    def wrapper(self) -> Path:
        return self.wrappers / self.name

    @property
    def version(self) -> str:
        return required_version(self.wrapper / "go.mod", self.module)

    @property
    def stamp(self) -> str:
        return self.release or self.version


def _kubernetes(name: str) -> GoComponent:
    """kube-apiserver, kube-controller-manager and kube-scheduler of one Kubernetes minor, from the
    wrapper ``go/<name>/``."""
    return GoComponent(
        name,
        "k8s.io/kubernetes",
        {
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        },
        version_variable="k8s.io/component-base/version.gitVersion",
        reports_version=(("--version",), r"^Kubernetes (?P<version>v\S+)"),
    )


KUBERNETES = _kubernetes("kubernetes")
"""The minor the shipped stacks name (1.35), which ``build`` and CI build."""
KUBERNETES_BY_MINOR = {"1.34": _kubernetes("kubernetes-1.34"), "1.35": KUBERNETES, "1.36": _kubernetes("kubernetes-1.36")}
"""Each Kubernetes minor the local control plane can run: those the library supports that the Go
module proxy serves a release of (1.32 and 1.33 releases are there too, but EKS's standard
support of them ends first; the wrappers pin the newest patch the proxy serves)."""


ETCD = GoComponent("etcd", "go.etcd.io/etcd/server/v3", {"etcd": "go.etcd.io/etcd/server/v3"},
                   reports_version=(("--version",), r"^etcd Version: (?P<version>\S+)"))
KWOK = GoComponent(
    "kwok", "sigs.k8s.io/kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    reports_version=(("--version",), r"^kwok version (?P<version>v\S+)"),
    # KWOK's own stages for the simulated kubelets: nodes become Ready and keep their leases, bound
    # pods become Running and Ready, deleted pods go. KWOK's default set also has pod-complete,
    # which finishes every Job's pods at once; a training job runs until it is stopped, so the
    # local control plane narrows it to the one-shot Jobs of Helm charts (``control_plane.kwok_stages``).
    data=(
        "kustomize/stage/node/fast/node-initialize.yaml",
        "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
        "kustomize/stage/pod/fast/pod-ready.yaml",
        "kustomize/stage/pod/fast/pod-delete.yaml",
        "kustomize/stage/pod/fast/pod-complete.yaml",
    ),
)
KUEUE = GoComponent(
    "kueue", "sigs.k8s.io/kueue", {"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
    version_variable="sigs.k8s.io/kueue/pkg/version.GitVersion",
)
KARPENTER_KWOK = GoComponent(
    "karpenter-kwok", "sigs.k8s.io/karpenter", {"karpenter-kwok": "sigs.k8s.io/karpenter/kwok"},
    version_variable="sigs.k8s.io/karpenter/pkg/operator.Version",
    data=(
        "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
        "kwok/charts/crds/karpenter.sh_nodepools.yaml",
        "kwok/charts/crds/karpenter.sh_nodeclaims.yaml",
    ),
    # Core v1.14.3 (the version karpenter-provider-aws v1.14.3 requires) says `go 1.26.10`: newer
    # than the Go 1.26.8 the rest builds with, so this build alone takes the approved 1.27 toolchain.
    toolchain="go1.27.3",
)
JOBSET = GoComponent(
    "jobset", "sigs.k8s.io/jobset", {"jobset": "sigs.k8s.io/jobset"},
    version_variable="sigs.k8s.io/jobset/pkg/version.GitVersion",
)
"""The JobSet controller manager (its webhooks and the JobSet controller), at the pinned chart's version."""
KUBEFLOW_TRAINER = GoComponent(
    "kubeflow-trainer", "github.com/kubeflow/trainer/v2",
    {"trainer-controller-manager": "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"},
)
"""Kubeflow Trainer's controller manager (TrainJob over a TrainingRuntime, run as a JobSet)."""
PULUMI = GoComponent(
    "pulumi", "github.com/pulumi/pulumi/pkg/v3", {"pulumi": "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"},
    version_variable="github.com/pulumi/pulumi/sdk/v3/go/common/version.Version",
    reports_version=(("version",), r"^(?P<version>v\S+)"),
)
PULUMI_KUBERNETES = GoComponent(
    "pulumi-kubernetes", "github.com/pulumi/pulumi-kubernetes/provider/v4",
    {"pulumi-resource-kubernetes": "github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes"},
    version_variable="github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version",
    # main.go embeds schema-embed.json, which its go:generate step makes from schema.json.
    generate=("cmd/pulumi-resource-kubernetes",),
    # The release tag v4.25.0 is commit f47bc2d6f199, the pinned pseudo-version.
    release="4.25.0",
)
PULUMI_LANGUAGE_PYTHON = GoComponent(
    "pulumi-language-python", "github.com/pulumi/pulumi/sdk/v3",
    {"pulumi-language-python": "github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"},
    version_variable="github.com/pulumi/pulumi/sdk/v3/go/common/version.Version",
    # The host runs programs through this script, which it looks for beside its own binary.
    data=("python/cmd/pulumi-language-python-exec",),
)
"""Pulumi's Python language host, from sdk/v3 (the wrapper's go.mod says why not its own module).
It predates the ``virtualenv`` runtime option, so it runs the ``python`` first on ``PATH``."""
TOOLS = (PULUMI, PULUMI_KUBERNETES, PULUMI_LANGUAGE_PYTHON)
"""What the engine tests run: the Pulumi CLI, the Kubernetes provider plugin and the Python
language host."""
CONTROL_PLANE = (ETCD, KUBERNETES, KWOK, KUEUE, KARPENTER_KWOK, JOBSET, KUBEFLOW_TRAINER)
"""What ``eks-gpu-training-local up`` runs for a stack of the default minor, in build order
(smallest first, so a missing toolchain or proxy shows within seconds)."""


def kubernetes_for(minor: str) -> GoComponent:
    """The Kubernetes component of ``minor`` (``cluster.kubernetesVersion``); ``BuildError`` naming
    the minors there are when it is none of them."""
    if minor not in KUBERNETES_BY_MINOR:
        available = ", ".join(f"{m} ({c.version})" for m, c in KUBERNETES_BY_MINOR.items())
        raise BuildError(f"the local control plane cannot run Kubernetes {minor}: it is built at {available}",
                         "set cluster.kubernetesVersion to one of them for the try-out")
    return KUBERNETES_BY_MINOR[minor]


def control_plane_for(minor: str) -> tuple[GoComponent, ...]:
    """``CONTROL_PLANE`` with the Kubernetes component of ``minor``."""
    return tuple(kubernetes_for(minor) if c is KUBERNETES else c for c in CONTROL_PLANE)


def load_catalogue(path: Path) -> dict[str, tuple[GoComponent, ...]]:
    """Groups of components from a JSON catalogue: ``{"groups": {NAME: [COMPONENT, ...]}}``, each
    component with ``GoComponent``'s fields by name (an ``about`` says why it is there), its
    wrapper in the catalogue's folder."""
    document = json.loads(path.read_text())
    names = {f.name for f in fields(GoComponent)} - {"wrappers"}
    groups = {}
    for group, entries in document["groups"].items():
        components = []
        for entry in entries:
            entry = {key: value for key, value in entry.items() if key != "about"}
            unknown = sorted(set(entry) - names)
            if unknown:
                raise BuildError(f"{path}: {entry.get('name')} has no field {', '.join(unknown)}",
                                 f"use GoComponent's fields: {', '.join(sorted(names))}")
            for key in ("data", "generate"):
                entry[key] = tuple(entry.get(key, ()))
            if entry.get("reports_version"):
                arguments, pattern = entry["reports_version"]
                entry["reports_version"] = (tuple(arguments), pattern)
            components.append(GoComponent(**entry, wrappers=path.parent))
        groups[group] = tuple(components)
    return groups


_REQUIRE = re.compile(r"^\s*(?:require\s+)?(?P<module>\S+)\s+(?P<version>v\S+)\s*(?://.*)?$")


def required_version(go_mod: Path, module: str) -> str:
    """The version ``go_mod`` requires of ``module`` (its pin is the wrapper's one source of truth)."""
    for line in go_mod.read_text().splitlines():
        match = _REQUIRE.match(line)
        if match and match["module"] == module and "=>" not in line:
            return match["version"]
    raise BuildError(f"{go_mod} requires no version of {module}", "pin the module in the wrapper's go.mod")
