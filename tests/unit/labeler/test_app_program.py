"""The labeler as a program: settings, heartbeat and liveness check, JSON logs, and the image
(it runs as the top-level package ``labeler`` from its build context alone, without Pulumi)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eks_gpu_training.aws import labeler_image
from eks_gpu_training.addons import topology_labeler as tl
from eks_gpu_training.labeler import app, healthcheck
from eks_gpu_training.labeler.logs import JsonFormatter, configure_logging
from eks_gpu_training.labeler.loop import Heartbeat, Idler, heartbeat_at
from eks_gpu_training.labeler.settings import MAX_HEARTBEAT_AGE_SECONDS, Settings, SettingsError
from tests.support.harness import PROJECT_ROOT
from tests.support.labeler_fakes import INSTANCE_ID, NODE_NAME, FakeApiServer, node_object


def test_settings_come_from_the_environment():
    settings = Settings.from_env({"NODE_NAME": "ip-10-0-1-23", "LABELER_INTERVAL_SECONDS": "900", "LABELER_HEARTBEAT_FILE": "/tmp/hb"})
    assert settings == Settings("ip-10-0-1-23", 900.0, "/tmp/hb")
    assert Settings.from_env({"NODE_NAME": "n"}) == Settings("n", 600.0, "/run/labeler/heartbeat")


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, "NODE_NAME is not set"),
        ({"NODE_NAME": "  "}, "NODE_NAME is not set"),
        ({"NODE_NAME": "n", "LABELER_INTERVAL_SECONDS": "ten"}, "is not a number"),
        ({"NODE_NAME": "n", "LABELER_INTERVAL_SECONDS": "0"}, "must be a positive, finite number"),
        ({"NODE_NAME": "n", "LABELER_INTERVAL_SECONDS": "nan"}, "must be a positive, finite number"),
        ({"NODE_NAME": "n", "LABELER_INTERVAL_SECONDS": "inf"}, "must be a positive, finite number"),
    ],
)
def test_settings_errors_say_what_is_missing(environ, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(environ)


def test_main_without_node_name_exits_2_with_a_json_error(capsys):
    try:
        assert app.main({}) == 2
    finally:
        logging.getLogger().handlers.clear()
    (line,) = capsys.readouterr().out.splitlines()
    entry = json.loads(line)
    assert entry["event"] == "cannot_start"
    assert entry["level"] == "error"
    assert "NODE_NAME" in entry["error"]


def test_main_outside_a_cluster_exits_2_with_a_json_error(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    try:
        assert app.main({"NODE_NAME": "n", "LABELER_HEARTBEAT_FILE": str(tmp_path / "hb")}) == 2
    finally:
        logging.getLogger().handlers.clear()
    entry = json.loads(capsys.readouterr().out.strip())
    assert entry["event"] == "cannot_start"
    assert "ConfigException" in entry["error"]


def test_library_warnings_are_json_too_and_info_chatter_is_dropped():
    stream = io.StringIO()
    try:
        configure_logging(stream)
        logging.getLogger("botocore.credentials").info("Found credentials in container provider")
        logging.getLogger("urllib3.connectionpool").warning("Retrying after connection broken")
    finally:
        logging.getLogger().handlers.clear()
    (line,) = stream.getvalue().splitlines()
    assert json.loads(line)["logger"] == "urllib3.connectionpool"


def test_an_exception_is_logged_on_the_same_line():
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "check_failed", None, None)
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert "boom" in json.loads(line)["exception"]


def test_idler_sleeps_in_heartbeat_steps_and_touches_the_heartbeat(tmp_path):
    heartbeat = heartbeat_at(str(tmp_path / "run" / "heartbeat"))
    beats = []
    sleeps = []

    class Counting(Heartbeat):
        def beat(self):
            beats.append(1)
            super().beat()

    idler = Idler(Counting(heartbeat.path), sleeps.append, period=15.0)
    idler.idle(40)
    assert sleeps == [15.0, 15.0, 10.0]
    assert len(beats) == 4
    assert heartbeat.path.exists()


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0, 0.0])
def test_idler_never_returns_at_once_on_a_non_finite_or_non_positive_wait(tmp_path, seconds):
    sleeps = []
    Idler(heartbeat_at(str(tmp_path / "hb")), sleeps.append, period=15.0).idle(seconds)
    assert sleeps == [15.0]


def test_a_heartbeat_that_cannot_be_touched_is_reported_and_the_wait_goes_on(tmp_path):
    errors, sleeps = [], []

    class Broken(Heartbeat):
        def beat(self):
            raise OSError(28, "No space left on device")

    Idler(Broken(tmp_path / "hb"), sleeps.append, period=15.0, on_error=errors.append).idle(30)
    assert sleeps == [15.0, 15.0]
    assert len(errors) == 3
    assert all(isinstance(e, OSError) for e in errors)


def test_idler_returns_early_once_stopped(tmp_path):
    sleeps = []
    idler = Idler(heartbeat_at(str(tmp_path / "hb")), sleeps.append, period=15.0, stopped=lambda: len(sleeps) >= 2)
    idler.idle(600)
    assert sleeps == [15.0, 15.0]


def test_liveness_check_passes_on_a_fresh_heartbeat_and_fails_on_a_stale_or_missing_one(tmp_path, capsys):
    path = tmp_path / "heartbeat"
    assert healthcheck.main(["--file", str(path)]) == 1
    assert "no heartbeat file" in capsys.readouterr().err
    path.touch()
    mtime = path.stat().st_mtime
    assert healthcheck.main(["--file", str(path)], now=lambda: mtime + 60) == 0
    assert healthcheck.main(["--file", str(path)], now=lambda: mtime + MAX_HEARTBEAT_AGE_SECONDS + 1) == 1
    assert "old" in capsys.readouterr().err


# --- the image ----------------------------------------------------------------------------------

BLOCK_PULUMI = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pulumi", "pulumi_aws", "pulumi_kubernetes", "pulumi_docker_build", "components"):
            raise ImportError(f"{name} is not in the labeler image")
sys.meta_path.insert(0, Block())
"""


@pytest.fixture
def image_root(tmp_path) -> Path:
    """The image's /app: the build context's files copied to ``labeler/``, as the Dockerfile does."""
    package = tmp_path / "app" / "labeler"
    package.mkdir(parents=True)
    for relative in labeler_image.build_context_files():
        if relative.endswith(".py"):
            shutil.copy(labeler_image.LABELER_DIR / relative, package / relative)
    return tmp_path / "app"


def run_in_image(image_root: Path, code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_PULUMI + code],
        cwd=image_root,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(image_root), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_program_runs_as_top_level_labeler_without_pulumi(image_root):
    result = run_in_image(
        image_root,
        "import labeler.app, labeler.loop, labeler.aws, labeler.kube\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'labeler'))\n",
    )
    assert result.returncode == 0, result.stderr
    assert "labeler.app" in result.stdout


def test_python_dash_m_labeler_starts_and_reports_a_missing_setting_as_json(image_root):
    result = run_in_image(image_root, "import runpy\nrunpy.run_module('labeler', run_name='__main__')\n")
    assert result.returncode == 2, result.stderr
    assert json.loads(result.stdout.strip())["event"] == "cannot_start"


def test_the_liveness_probe_command_runs_in_the_image(image_root, tmp_path):
    heartbeat = tmp_path / "heartbeat"
    probe = "import runpy, sys\nsys.argv = ['healthcheck', '--file', {!r}]\nrunpy.run_module('labeler.healthcheck', run_name='__main__')\n"
    assert run_in_image(image_root, probe.format(str(heartbeat))).returncode == 1
    heartbeat.touch()
    assert run_in_image(image_root, probe.format(str(heartbeat))).returncode == 0


def test_dockerfile_builds_a_slim_non_root_image_from_the_context_alone():
    dockerfile = (labeler_image.LABELER_DIR / "Dockerfile").read_text()
    instructions = [line for line in dockerfile.splitlines() if line and not line.startswith("#")]
    # By tag: no digest nobody resolved; images.lock pins it through the PYTHON_IMAGE build argument.
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.\d+-slim$", dockerfile, re.M)
    (install,) = [line for line in instructions if line.startswith("RUN pip install")]
    assert "--require-hashes" in install
    assert "--only-binary=:all:" in install
    copies = [line.split()[1:-1] for line in instructions if line.startswith("COPY")]
    assert copies == [["requirements.txt"], ["*.py"]]
    (user,) = [line for line in instructions if line.startswith("USER")]
    uid, gid = user.split()[1].split(":")
    assert int(uid) == tl.RUN_AS_USER
    assert int(gid) == tl.RUN_AS_USER
    assert instructions[-1] == 'ENTRYPOINT ["python", "-m", "labeler"]'


def test_image_requirements_are_exact_pins_with_hashes_and_match_the_tested_kubernetes_client():
    pins = {}
    text = (labeler_image.LABELER_DIR / "requirements.txt").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.+-]*)((?:\s+--hash=sha256:[0-9a-f]{64})+)\s*", line)
            assert match, f"not an exact pin with hashes: {line[:120]}"
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    assert {"boto3", "botocore", "kubernetes"} <= set(pins)
    assert pins["boto3"] == pins["botocore"]
    assert f'"kubernetes=={pins["kubernetes"]}",' in (PROJECT_ROOT / "pyproject.toml").read_text()


DRIVER = """
import os, sys
import boto3
from botocore.stub import Stubber
from kubernetes import client
import labeler.app, labeler.aws, labeler.kube

# The in-cluster client and the EC2 client are the only pieces swapped: the API server is the
# test's fake on 127.0.0.1, EC2 a Stubber (no credentials, no network).
labeler.kube.in_cluster_api = lambda: client.CoreV1Api(
    client.ApiClient(client.Configuration(host=os.environ["FAKE_API"], no_proxy="*"))
)
ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
stubber = Stubber(ec2)
stubber.add_response(
    "describe_instance_topology",
    {"Instances": [{"InstanceId": os.environ["INSTANCE_ID"], "InstanceType": "p5.48xlarge",
                    "NetworkNodes": ["nn-1", "nn-2", "nn-3"]}]},
    {"InstanceIds": [os.environ["INSTANCE_ID"]]},
)
stubber.activate()
labeler.aws.ec2_client = lambda region: ec2
sys.exit(labeler.app.main())
"""


HANG_GUARD_SECONDS = 60
"""How long a test waits for the program before calling it hung: a bound on a broken program only,
never on a working one, however loaded the machine."""


def test_the_program_labels_its_node_beats_its_heart_and_stops_on_sigterm(image_root, tmp_path):
    heartbeat = tmp_path / "run" / "heartbeat"
    with FakeApiServer(node_object()) as server:
        process = subprocess.Popen(
            [sys.executable, "-c", BLOCK_PULUMI + DRIVER],
            cwd=image_root,
            env={
                "PATH": os.environ.get("PATH", ""),
                "PYTHONPATH": str(image_root),
                "FAKE_API": server.url,
                "INSTANCE_ID": INSTANCE_ID,
                "NODE_NAME": NODE_NAME,
                "LABELER_HEARTBEAT_FILE": str(heartbeat),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + HANG_GUARD_SECONDS
            while not server.patches() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.patches(), "the labeler sent no patch"
            assert healthcheck.main(["--file", str(heartbeat)]) == 0
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=HANG_GUARD_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, err
    events = [json.loads(line)["event"] for line in out.splitlines()]
    assert events == ["started", "labels_added", "stopped"]
    labels = server.nodes[NODE_NAME]["metadata"]["labels"]
    assert [labels[f"topology.k8s.aws/network-node-layer-{n}"] for n in (1, 2, 3)] == ["nn-1", "nn-2", "nn-3"]


BLOCKED_EC2_DRIVER = DRIVER.replace(
    "labeler.aws.ec2_client = lambda region: ec2",
    """import time
class BlockedEc2:
    def describe_instance_topology(self, **kwargs):
        print('{"event": "ec2_call_started"}', flush=True)
        time.sleep(3600)  # an EC2 call that does not return while the test runs
        print('{"event": "ec2_call_returned"}', flush=True)
        return ec2.describe_instance_topology(**kwargs)
labeler.aws.ec2_client = lambda region: BlockedEc2()""",
)
"""The labeler's EC2 call blocks for an hour, far past any read timeout: a program that waited for it
would never stop within the test."""


def test_sigterm_during_a_blocked_api_call_stops_at_once_and_sends_no_patch(image_root, tmp_path):
    with FakeApiServer(node_object()) as server:
        process = subprocess.Popen(
            [sys.executable, "-u", "-c", BLOCK_PULUMI + BLOCKED_EC2_DRIVER],
            cwd=image_root,
            env={
                "PATH": os.environ.get("PATH", ""),
                "PYTHONPATH": str(image_root),
                "FAKE_API": server.url,
                "INSTANCE_ID": INSTANCE_ID,
                "NODE_NAME": NODE_NAME,
                "LABELER_HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            before = process.stdout.readline() + process.stdout.readline()
            assert "ec2_call_started" in before
            process.send_signal(signal.SIGTERM)
            try:
                out, err = process.communicate(timeout=HANG_GUARD_SECONDS)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the labeler did not stop within {HANG_GUARD_SECONDS} s of SIGTERM: it waits for the blocked call")
        finally:
            if process.poll() is None:
                process.kill()
    # Stopped at once: the program exited while the EC2 call was still blocked (it never returned,
    # and the loop had not finished), so SIGTERM did not wait for it; and no half-done patch went out.
    assert process.returncode == 0, err
    events = [json.loads(line) for line in (before + out).splitlines()]
    assert [event["event"] for event in events] == ["started", "ec2_call_started", "stopped"]
    assert events[-1]["loopFinished"] is False
    assert server.patches() == []
