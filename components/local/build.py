"""Build the local control plane's upstream Go components, once per machine.

Each component is a small wrapper module in ``go/<component>/`` (a ``go.mod`` that pins the
upstream module and a ``go.sum`` that pins every dependency's hash; no Go source): the upstream
module's own ``replace`` directives keep ``go install`` from building it, a wrapper's requirement
does not. The binaries go to a cache folder outside the repository, keyed by component and
version, and a second run finds them there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

WRAPPERS = Path(__file__).parent / "go"
CACHE_ENV = "EKS_GPU_TRAINING_CACHE"
"""Overrides the cache folder (default ``$XDG_CACHE_HOME/eks-gpu-training``, else ``~/.cache/...``)."""


class BuildError(RuntimeError):
    """A component could not be built; the message says which, and what Go printed last."""


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

    @property
    def wrapper(self) -> Path:
        return WRAPPERS / self.name

    @property
    def version(self) -> str:
        return required_version(self.wrapper / "go.mod", self.module)


KUBERNETES = GoComponent(
    "kubernetes",
    "k8s.io/kubernetes",
    {
        "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
        "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    },
    version_variable="k8s.io/component-base/version.gitVersion",
)
ETCD = GoComponent("etcd", "go.etcd.io/etcd/server/v3", {"etcd": "go.etcd.io/etcd/server/v3"})
KWOK = GoComponent(
    "kwok", "sigs.k8s.io/kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    # KWOK's own stages for the simulated kubelets: nodes become Ready and keep their leases, bound
    # pods become Running and Ready, deleted pods go. KWOK's default set also has pod-complete,
    # which finishes every Job's pods at once; a training job runs until it is stopped, so it is
    # left out and Job pods keep running.
    data=(
        "kustomize/stage/node/fast/node-initialize.yaml",
        "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
        "kustomize/stage/pod/fast/pod-ready.yaml",
        "kustomize/stage/pod/fast/pod-delete.yaml",
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
)
CONTROL_PLANE = (ETCD, KUBERNETES, KWOK, KUEUE, KARPENTER_KWOK)
"""What ``eks-gpu-training-local up`` runs, in build order (smallest first, so a missing toolchain
or proxy shows within seconds)."""

_REQUIRE = re.compile(r"^\s*(?:require\s+)?(?P<module>\S+)\s+(?P<version>v\S+)\s*(?://.*)?$")


def required_version(go_mod: Path, module: str) -> str:
    """The version ``go_mod`` requires of ``module`` (its pin is the wrapper's one source of truth)."""
    for line in go_mod.read_text().splitlines():
        match = _REQUIRE.match(line)
        if match and match["module"] == module and "=>" not in line:
            return match["version"]
    raise BuildError(f"{go_mod} requires no version of {module}")


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "eks-gpu-training"


def bin_dir(component: GoComponent, root: Optional[Path] = None) -> Path:
    return (root or cache_root()) / "bin" / f"{component.name}-{component.version}"


def _has_binaries(component: GoComponent, folder: Path) -> bool:
    return all((folder / binary).is_file() for binary in component.binaries)


def _has_data(component: GoComponent, folder: Path) -> bool:
    return all((folder / Path(name).name).is_file() for name in component.data)


def is_built(component: GoComponent, root: Optional[Path] = None) -> bool:
    folder = bin_dir(component, root)
    return _has_binaries(component, folder) and _has_data(component, folder)


def _go_env(component: GoComponent) -> dict[str, str]:
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false", "GOTOOLCHAIN": "local"}


def _copy_data(component: GoComponent, work: Path, folder: Path) -> None:
    """Copy the component's data files from the module the wrapper pins (``go mod download``
    puts it in the module cache and says where)."""
    if not component.data:
        return
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{component.module}@{component.version}"],
        cwd=work, env=_go_env(component), capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise BuildError(f"go mod download of {component.module} {component.version} failed: {result.stderr.strip()}")
    module_dir = Path(json.loads(result.stdout)["Dir"])
    for name in component.data:
        shutil.copy(module_dir / name, folder / Path(name).name)


def missing_toolchain() -> Optional[str]:
    """Why nothing can be built here, or None."""
    if shutil.which("go") is None:
        return "the Go toolchain (`go`, 1.26 or newer) is not on PATH"
    return None


@contextlib.contextmanager
def _cache_lock(cache: Path):
    """One build at a time per cache: two test workers or two ``up`` runs wait for each other
    instead of building the same component twice into the same folder."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build(
    component: GoComponent, *, root: Optional[Path] = None, log: Callable[[str], None] = print
) -> Path:
    """Build ``component`` into its cache folder unless it is there; return the folder."""
    if is_built(component, root):
        return bin_dir(component, root)
    with _cache_lock(root or cache_root()):
        return _build(component, root=root, log=log)


def _build(component: GoComponent, *, root: Optional[Path], log: Callable[[str], None]) -> Path:
    folder = bin_dir(component, root)
    if is_built(component, root):
        return folder
    for stale in folder.parent.glob(f".{component.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    problem = missing_toolchain()
    if problem:
        raise BuildError(f"cannot build {component.name} {component.version}: {problem}")
    cache = root or cache_root()
    work = cache / "src" / component.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in ("go.mod", "go.sum"):
        shutil.copy(component.wrapper / name, work / name)
    if _has_binaries(component, folder):
        _copy_data(component, work, folder)
        return folder
    ldflags = "-s -w"
    if component.version_variable:
        ldflags += f" -X {component.version_variable}={component.version}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{component.name}-", dir=folder.parent))
    env = _go_env(component)
    log(f"building {component.name} {component.version} ({', '.join(component.binaries)}) into {folder}")
    started = time.monotonic()
    command = ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(staging) + "/", *component.binaries.values()]
    outputs = _built_names(component)
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise BuildError(f"go build of {component.name} {component.version} failed:\n{tail}")
    for binary, built_as in outputs.items():
        if built_as != binary:
            (staging / built_as).rename(staging / binary)
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    _copy_data(component, work, folder)
    log(f"built {component.name} {component.version} in {time.monotonic() - started:.0f} s")
    return folder


def _built_names(component: GoComponent) -> dict[str, str]:
    """What ``go build -o DIR/`` names each binary: the package path's last element (its major
    version suffix dropped, as for ``go.etcd.io/etcd/server/v3`` -> ``server``)."""
    names = {}
    for binary, package in component.binaries.items():
        parts = package.split("/")
        last = parts[-1]
        if re.fullmatch(r"v\d+", last):
            last = parts[-2]
        names[binary] = last
    return names


def build_all(
    components: Iterable[GoComponent] = CONTROL_PLANE, *, root: Optional[Path] = None,
    log: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Build every missing component; return binary name -> path."""
    paths: dict[str, Path] = {}
    for component in components:
        folder = build(component, root=root, log=log)
        paths.update({binary: folder / binary for binary in component.binaries})
    return paths


def main(argv: Optional[list[str]] = None) -> int:
    try:
        for binary, path in build_all(log=lambda line: print(line, file=sys.stderr)).items():
            print(f"{binary}: {path}")
    except BuildError as error:
        print(f"build failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
