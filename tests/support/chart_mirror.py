"""A Helm chart repository on loopback, serving the reference folder's pinned charts (and JobSet's
and Trainer's, from their Go modules: ``module_charts``), as a company
mirror (Artifactory, Harbor, an ECR pull-through cache) serves them to a user: each chart packaged
by Helm's own ``package`` and indexed by its ``repo index``, over plain HTTP.

``OciChartMirror`` is the same charts in an OCI registry on loopback (the CNCF Distribution
registry, built from its Go module), pushed by Helm's own ``push``: the ``oci://`` prefix a mirror
such as Harbor or an ECR pull-through cache is. The cluster tier uses it
(``tests/cluster/test_oci_chart_mirror.py``).

The tests use it through ``tests/conftest.py`` (``charts_mirror``); ``.ci/run`` runs it for the
render, check and scan of the stacks:

    python -m tests.support.chart_mirror --reference ../shared/reference --url-file URL_FILE

serves until it is stopped (SIGTERM or SIGINT), after writing its URL to URL_FILE.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from eks_gpu_training.platform.stack_files import stack_file_name


def package_charts(reference: Path, folder: Path) -> list[Path]:
    """Package every chart of ``reference/charts/`` into ``folder``, and the JobSet and Trainer
    charts from their Go modules (``module_charts``), and index them there."""
    import helm_python

    from tests.support.module_charts import package_module_charts

    folder.mkdir(parents=True, exist_ok=True)
    archives = [Path(helm_python.package(chart, destination=folder))
                for chart in sorted((reference / "charts").iterdir()) if (chart / "Chart.yaml").is_file()]
    archives += package_module_charts(folder)
    helm_python.repo_index_generate(folder)
    return archives


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # `format`: the base class's parameter name
        pass


class ChartMirror:
    """``folder`` served on 127.0.0.1 on a free port, in a thread of this process."""

    def __init__(self, folder: Path):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


REGISTRY_READY_SECONDS = 60
"""How long the registry has to answer ``/v2/`` after it starts (it does within a second)."""


def registry_config(storage: Path, port: int) -> dict:
    """The registry's configuration: its blobs and manifests in ``storage``, plain HTTP on
    127.0.0.1:``port``, no debug server, no authentication (a pull needs none from a mirror on
    loopback, as ``ChartSources`` asks it with ``plain_http``)."""
    return {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(storage)}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }


class OciChartMirror:
    """The registry binary ``registry`` serving on 127.0.0.1 on a free port, its configuration,
    storage and log in ``folder``; ``push`` puts chart archives under ``url``. ``stop`` stops it by
    its pid (it is started attached: it also ends when this process does)."""

    def __init__(self, registry: Path, folder: Path):
        import yaml

        from eks_gpu_training.local.processes import Process, Ready, Supervisor, free_port

        self.port = free_port()
        config = folder / "config.yml"
        folder.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump(registry_config(folder / "storage", self.port), sort_keys=False))
        self.supervisor = Supervisor(folder, attached=True)
        try:
            self.supervisor.start_all([Process(
                "registry", registry, ("serve", str(config)),
                ready=Ready(f"http://127.0.0.1:{self.port}/v2/", timeout=REGISTRY_READY_SECONDS),
            )], log=lambda line: None)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The ``oci://`` prefix each pushed chart is under (``<url>/<chart>:<version>``)."""
        return f"oci://127.0.0.1:{self.port}/charts"

    def push(self, archives: list[Path]) -> None:
        import helm_python

        for archive in archives:
            helm_python.push(archive, self.url, plain_http=True)

    def stop(self) -> None:
        self.supervisor.stop_all()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--url-file", type=Path, required=True)
    options = parser.parse_args()
    # Stopped by its pid, it still removes its folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with tempfile.TemporaryDirectory(prefix="chart-mirror-") as folder:
        package_charts(options.reference, Path(folder))
        mirror = ChartMirror(Path(folder))
        written = options.url_file.with_name(options.url_file.name + ".tmp")
        written.write_text(mirror.url + "\n")
        os.replace(written, options.url_file)
        try:
            mirror.thread.join()
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            mirror.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def render_with_stack_mirror(url: str, folder: Path, monkeypatch, stack: str = "prod"):
    """``stack`` rendered into ``folder / "out"`` with ``charts.mirror: url`` as its only source: no
    mirror set for the run and an empty chart cache (``folder / "cache"``). Returns the sources
    (what they pulled) and the render's summary, every chart checked rendered from that cache."""
    import yaml

    from eks_gpu_training.offline.chart_sources import CACHE_ENV, MIRROR_ENV, ChartSources
    from eks_gpu_training.offline.engine import stack_config
    from eks_gpu_training.offline.render import render

    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(folder / "cache"))
    config = stack_config(stack)
    config["eks-gpu-training:charts"] = {"mirror": url}
    stack_path = folder / stack_file_name("mirrored")
    stack_path.write_text(yaml.safe_dump({"config": config}))
    sources = ChartSources.configured()
    assert sources.mirror is None
    summary = render("mirrored", folder / "out", stack_path=stack_path, picture=False, sources=sources)
    assert summary.charts
    assert all(c.objects and not c.skipped and not c.error for c in summary.charts), summary.charts
    assert all(c.source.parent == folder / "cache" for c in summary.charts)
    return sources, summary
