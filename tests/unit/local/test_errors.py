"""Every failure of ``eks-gpu-training-local`` is a ``LocalError``: one line, what failed and how
to fix it, with the details (a log's tail, a configuration's problems) under it."""

from __future__ import annotations

import pytest
import yaml

from tests.support.harness import REFERENCE, stack_config

from eks_gpu_training.local import build as builds
from eks_gpu_training.local.__main__ import main
from eks_gpu_training.local.cluster import LocalClusterError
from eks_gpu_training.local.errors import LocalError
from eks_gpu_training.local.instance_types import UnknownInstanceType, instance_type
from eks_gpu_training.local.platform import ApplyError
from eks_gpu_training.local.processes import ProcessFailed, ProcessOrderError
from eks_gpu_training.platform.stack_files import stack_file_name


def test_a_failure_is_one_line_of_what_failed_and_its_fix_and_its_details_under_it():
    error = LocalError("3 problems:\n  - a\n  - b", "fix the stack", details="more")
    assert error.line() == "3 problems — fix the stack"
    assert error.details == "  - a\n  - b\nmore"
    assert str(error) == "3 problems:\n  - a\n  - b\nmore"


@pytest.mark.parametrize("kind", [ProcessFailed, ProcessOrderError, LocalClusterError, ApplyError, builds.BuildError,
                                  UnknownInstanceType], ids=lambda kind: kind.__name__)
def test_each_kind_of_failure_is_a_local_error_with_advice_of_its_own(kind):
    assert issubclass(kind, LocalError)
    if kind not in (ProcessFailed, LocalClusterError):  # these give their fix where they are raised
        assert kind.fix != LocalError.fix


def test_an_unknown_instance_type_says_where_the_known_ones_come_from():
    with pytest.raises(UnknownInstanceType) as refused:
        instance_type("x9.nothing")
    assert refused.value.line() == ("x9.nothing is not among the instance types the package knows (instance-types.json) — "
                                    "name an instance type the table lists, or regenerate it (scripts/generate_package_data.py)")


def test_a_stack_file_that_is_not_there_fails_up_with_one_line_and_its_fix(tmp_path, capsys):
    assert main(["up", str(tmp_path / stack_file_name("absent")), "--dry-run"]) == 1
    err = capsys.readouterr().err.splitlines()
    failed = next(index for index, line in enumerate(err) if line.startswith("local up failed: "))
    assert err[failed:] == [
        "local up failed: invalid configuration (1 problem), rejected before registering any resource — "
        "fix the stack file as the problems below say (`eks-gpu-training-render STACK` shows the same)",
        f"  - {tmp_path / stack_file_name('absent')}: no such stack file",
    ]


@pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"the dry run renders the stack's charts, served from {REFERENCE}")
def test_a_minor_the_local_control_plane_cannot_run_fails_the_dry_run_too_saying_which_it_can(tmp_path, capsys):
    config = stack_config("dev")
    config["eks-gpu-training:cluster"] = {**config["eks-gpu-training:cluster"], "kubernetesVersion": "1.33"}
    stack_path = tmp_path / stack_file_name("old")
    stack_path.write_text(yaml.safe_dump({"config": config}))
    assert main(["up", str(stack_path), "--dry-run", "--state-dir", str(tmp_path / "state")]) == 1
    failure = capsys.readouterr().err.splitlines()[-1]
    assert failure.startswith("local up failed: the local control plane cannot run Kubernetes 1.33: it is built at 1.34 (v1.34.")
    assert failure.endswith(" — set cluster.kubernetesVersion to one of them for the try-out")
    assert not (tmp_path / "state").exists()
