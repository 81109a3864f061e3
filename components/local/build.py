"""Build the local control plane's upstream Go components, once per machine.

The components themselves (each a wrapper module pinning an upstream one) are records in
``go_components``, re-exported here. The binaries go to a cache folder outside the repository,
keyed by component and version, and a second run finds them there; ``main`` builds a group of the
package's catalogue or of a test catalogue.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Callable, Iterable, Optional

if __package__:
    from .go_components import (
        CONTROL_PLANE, ETCD, JOBSET, KARPENTER_KWOK, KUBEFLOW_TRAINER, KUBERNETES, KUBERNETES_BY_MINOR, KUEUE, KWOK,
        PULUMI, PULUMI_KUBERNETES, PULUMI_LANGUAGE_PYTHON, TOOLS, WRAPPERS, BuildError, GoComponent, control_plane_for,
        kubernetes_for, load_catalogue, required_version,
    )
else:  # run as a script (CI builds before the package is installed), its folder first on sys.path
    from go_components import (  # type: ignore[import-not-found,no-redef]  # the script's own folder, not the package, is on sys.path
        CONTROL_PLANE, ETCD, JOBSET, KARPENTER_KWOK, KUBEFLOW_TRAINER, KUBERNETES, KUBERNETES_BY_MINOR, KUEUE, KWOK,
        PULUMI, PULUMI_KUBERNETES, PULUMI_LANGUAGE_PYTHON, TOOLS, WRAPPERS, BuildError, GoComponent, control_plane_for,
        kubernetes_for, load_catalogue, required_version,
    )

__all__ = [
    "CONTROL_PLANE", "ETCD", "JOBSET", "KARPENTER_KWOK", "KUBEFLOW_TRAINER", "KUBERNETES", "KUBERNETES_BY_MINOR", "KUEUE",
    "KWOK", "PULUMI", "PULUMI_KUBERNETES", "PULUMI_LANGUAGE_PYTHON", "TOOLS", "WRAPPERS", "BuildError", "GoComponent",
    "control_plane_for", "kubernetes_for", "load_catalogue", "required_version",
    "CACHE_ENV", "GCFLAGS", "GROUPS", "PREBUILT_ENV", "adopt", "bin_dir", "build", "build_all", "cache_root", "is_built",
    "main", "missing_toolchain", "prebuilt_dir", "reported_version", "tools_dir",
]

CACHE_ENV = "EKS_GPU_TRAINING_CACHE"
"""Overrides the cache folder (default ``$XDG_CACHE_HOME/eks-gpu-training``, else ``~/.cache/...``)."""


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


GCFLAGS = "-gcflags=all=-dwarf=false"
"""No DWARF from the compiler: the linker strips it anyway (``-ldflags -w``), and not making it
shortens a cold build and shrinks the Go build cache. The binaries are the same but for the debug
information they never carried."""


def _go_env(component: GoComponent) -> dict[str, str]:
    # GOFLAGS applies each flag to the commands that know it (go build, go run), not to go mod.
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": f"-mod=readonly -buildvcs=false {GCFLAGS}",
            "GOTOOLCHAIN": component.toolchain or "local"}


def _copy_data(component: GoComponent, work: Path, folder: Path) -> None:
    """Copy the component's data files from the module the wrapper pins (``go mod download``
    puts it in the module cache and says where)."""
    if not component.data:
        return
    module_dir = _module_dir(component, work)
    for name in component.data:
        shutil.copy(module_dir / name, folder / Path(name).name)


def _module_dir(component: GoComponent, work: Path) -> Path:
    """The pinned upstream module in the module cache (``go mod download`` checks it against the
    wrapper's go.sum and says where it is)."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{component.module}@{component.version}"],
        cwd=work, env=_go_env(component), capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise BuildError(f"go mod download of {component.module} {component.version} failed",
                         details=result.stderr.strip())
    return Path(json.loads(result.stdout)["Dir"])


def _generate(component: GoComponent, work: Path) -> None:
    """Run the component's ``go generate`` steps in a writable copy of the module under ``work``
    and point the work copy of the wrapper at it.

    The copy's replaces of sibling folders are dropped (the module zip has no siblings, and a
    non-main module's replaces never applied to the wrapper's build anyway)."""
    copy = work / "module"
    shutil.copytree(_module_dir(component, work), copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    env = _go_env(component)
    edit = subprocess.run(["go", "mod", "edit", "-json"], cwd=copy, env=env, capture_output=True, text=True, check=True)
    for replace in json.loads(edit.stdout).get("Replace") or []:
        if "Version" not in replace["New"]:
            subprocess.run(["go", "mod", "edit", f"-dropreplace={replace['Old']['Path']}"], cwd=copy, env=env, check=True)
    # The generator is a `go run` in the module copy, whose go.sum is the module's own: let it
    # record what it resolves there (the build itself stays -mod=readonly on the wrapper's go.sum).
    generate_env = {**env, "GOFLAGS": f"-mod=mod -buildvcs=false {GCFLAGS}", "VERSION": component.stamp}
    for package in component.generate:
        result = subprocess.run(["go", "generate", "./" + package], cwd=copy, env=generate_env, capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
            raise BuildError(f"go generate of {component.module} {component.version} ./{package} failed", details=tail)
    subprocess.run(["go", "mod", "edit", f"-replace={component.module}=./module"], cwd=work, env=env, check=True)


def missing_toolchain() -> Optional[str]:
    """Why nothing can be built here, or None."""
    if shutil.which("go") is None:
        return "the Go toolchain (`go`, 1.26 or newer) is not on PATH"
    return None


@contextlib.contextmanager
def _cache_lock(cache: Path, component: GoComponent):
    """One build of a component at a time per cache: two test workers, two ``up`` runs, or CI's
    background build and the cluster tier's own ``build`` wait for each other instead of building
    the same component twice into the same folder; different components build side by side."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".build-{component.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


PREBUILT_ENV = "EKS_GPU_TRAINING_BIN_DIR"
"""A folder of binaries a user already has (kwokctl's, envtest's, a release download), used where
each is the pinned version (``--bin-dir``)."""


def prebuilt_dir(given: Optional[Path] = None) -> Optional[Path]:
    """``given``, else ``$EKS_GPU_TRAINING_BIN_DIR``, else None."""
    if given is not None:
        return given
    return Path(os.environ[PREBUILT_ENV]) if os.environ.get(PREBUILT_ENV) else None


def reported_version(binary: Path, component: GoComponent) -> Optional[str]:
    """The version ``binary`` reports, by ``component``'s way of asking, or None."""
    if component.reports_version is None:
        return None
    arguments, pattern = component.reports_version
    try:
        result = subprocess.run([str(binary), *arguments], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (result.stdout + result.stderr).splitlines():
        match = re.match(pattern, line.strip())
        if match:
            return match["version"]
    return None


def _same_version(reported: str, pinned: str) -> bool:
    return reported.lstrip("v") == pinned.lstrip("v")


def adopt(component: GoComponent, directory: Path, *, root: Optional[Path] = None,
          log: Callable[[str], None] = print) -> bool:
    """Take ``component``'s binaries from ``directory`` into its cache folder when every one is
    there at the pinned version; False when the folder does not hold them all, or the component's
    binaries report no version (it is built instead). A binary at another version is refused,
    named, rather than built past: the user said to use that folder."""
    present = [binary for binary in component.binaries if (directory / binary).is_file()]
    if not present:
        return False
    if component.reports_version is None:
        log(f"{component.name}: building it; its binaries report no version to compare with {component.stamp}")
        return False
    if len(present) != len(component.binaries):
        missing = sorted(set(component.binaries) - set(present))
        log(f"{component.name}: building it; {directory} lacks {', '.join(missing)}")
        return False
    for binary in present:
        reported = reported_version(directory / binary, component)
        if reported is None or not _same_version(reported, component.stamp):
            raise BuildError(
                f"{directory / binary} is {binary} {reported or '(no version reported)'}, not the pinned {component.stamp}",
                f"give a folder with {binary} {component.stamp}, or remove it there to build it",
            )
    folder = bin_dir(component, root)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{component.name}-", dir=folder.parent))
    for binary in present:
        shutil.copy2(directory / binary, staging / binary)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    if component.data:
        # The data files come from the pinned module, which only Go can fetch and check.
        _build(component, root=root, log=log)
    log(f"{component.name} {component.stamp}: {', '.join(present)} taken from {directory}")
    return True


def build(
    component: GoComponent, *, root: Optional[Path] = None, log: Callable[[str], None] = print,
    prebuilt: Optional[Path] = None,
) -> Path:
    """Build ``component`` into its cache folder unless it is there, or take it from ``prebuilt``
    (see ``adopt``); return the folder."""
    if is_built(component, root):
        return bin_dir(component, root)
    with _cache_lock(root or cache_root(), component):
        if not is_built(component, root) and prebuilt is not None and adopt(component, prebuilt, root=root, log=log):
            return bin_dir(component, root)
        return _build(component, root=root, log=log)


def _build(component: GoComponent, *, root: Optional[Path], log: Callable[[str], None]) -> Path:
    folder = bin_dir(component, root)
    if is_built(component, root):
        return folder
    for stale in folder.parent.glob(f".{component.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    problem = missing_toolchain()
    if problem:
        raise BuildError(f"cannot build {component.name} {component.version}: {problem}",
                         "install Go 1.26 or newer, or give the binaries with --bin-dir")
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
        ldflags += f" -X {component.version_variable}={component.stamp}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{component.name}-", dir=folder.parent))
    env = _go_env(component)
    log(f"building {component.name} {component.version} ({', '.join(component.binaries)}) into {folder}")
    started = time.monotonic()
    if component.generate:
        _generate(component, work)
    command = ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(staging) + "/", *component.binaries.values()]
    outputs = _built_names(component)
    result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise BuildError(f"go build of {component.name} {component.version} failed", details=tail)
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
    log: Callable[[str], None] = print, prebuilt: Optional[Path] = None,
) -> dict[str, Path]:
    """Build every missing component (or take it from ``prebuilt``); return binary name -> path."""
    paths: dict[str, Path] = {}
    for component in components:
        folder = build(component, root=root, log=log, prebuilt=prebuilt)
        paths.update({binary: folder / binary for binary in component.binaries})
    return paths


def tools_dir(
    components: Iterable[GoComponent] = TOOLS, *, root: Optional[Path] = None,
    log: Callable[[str], None] = print, prebuilt: Optional[Path] = None,
) -> Path:
    """Build the missing tools and return one folder holding all their binaries (links into the
    per-version folders), the folder to put on ``PATH``. It is ``<cache>/tools/bin``: an
    installation root as the Automation API's ``PulumiCommand(root=...)`` expects one."""
    paths = build_all(components, root=root, log=log, prebuilt=prebuilt)
    folder = (root or cache_root()) / "tools" / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    for binary, path in paths.items():
        link = folder / binary
        if link.is_symlink() and os.readlink(link) == str(path):
            continue
        # A new link under a name of its own, then renamed over the old one: two test workers
        # asking at once never see the name missing or taken.
        staged = folder / f".{binary}.{os.getpid()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(path)
        os.replace(staged, link)
    return folder


GROUPS = {"control-plane": CONTROL_PLANE, "tools": TOOLS}
"""What ``main`` builds, by the name given on its command line (default: the control plane)."""


def main(argv: Optional[list[str]] = None) -> int:
    """Build a group of components. The module needs nothing beyond the standard library, so CI
    runs it as a script (``python3 components/local/build.py tools``) before the package is
    installed, to overlap the cold builds with the Python install and the unit tier."""
    parser = argparse.ArgumentParser(prog="build.py", description="Build a group of the local control plane's components.")
    parser.add_argument("group", nargs="?", default="control-plane",
                        help=f"a group of the catalogue (the package's: {', '.join(GROUPS)}; default: control-plane)")
    parser.add_argument("--catalogue", type=Path, default=None, metavar="FILE",
                        help="a catalogue.json whose groups to build instead of the package's (the tests' own tools)")
    parser.add_argument("--bin-dir", type=Path, default=None, help=f"prebuilt binaries to use (default: ${PREBUILT_ENV})")
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    group, given = options.group, options.bin_dir
    prebuilt = prebuilt_dir(given)
    if prebuilt is not None and not prebuilt.is_dir():
        print(f"the binaries folder {prebuilt} is not a folder", file=sys.stderr)
        return 2
    try:
        groups = load_catalogue(options.catalogue) if options.catalogue else GROUPS
        if group not in groups:
            raise BuildError(f"no group {group} in {options.catalogue or 'the package'}", f"name one of {', '.join(groups)}")
        for binary, path in build_all(groups[group], log=lambda line: print(line, file=sys.stderr), prebuilt=prebuilt).items():
            print(f"{binary}: {path}")
    except BuildError as error:
        print(f"build failed: {error.line()}" + (f"\n{error.details}" if error.details else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
