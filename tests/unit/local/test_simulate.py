"""``simulate --fleet``'s plain parts: the manager's stack arguments found from the running fleet, and
the command's refusals before anything is read. A replay across a real fleet is the cluster tier's
(tests/cluster/test_multikueue.py)."""

from __future__ import annotations

import json

from eks_gpu_training.local.__main__ import main
from eks_gpu_training.local.local_fleet import fleet_members
from eks_gpu_training.local.simulate import described_workload, manager_args
from eks_gpu_training.platform.stack_files import locate_stack

from tests.support.harness import PROJECT_ROOT

TRACE = PROJECT_ROOT / "examples" / "traces" / "dev.yaml"


def test_the_managers_arguments_come_from_the_stack_file_its_cluster_was_started_with(tmp_path):
    members = fleet_members("dev", tmp_path, {"east": 1, "west": 2})
    members.manager.state.mkdir(parents=True)
    stack_file = locate_stack("dev").path
    (members.manager.state / "stack.json").write_text(json.dumps({"stack": "dev", "stackFile": str(stack_file), "scale": None}))
    assert manager_args(members) == locate_stack(stack_file).platform_args()


def test_fleet_refuses_scale_and_keep(tmp_path, capsys):
    assert main(["simulate", "dev", "--jobs", str(TRACE), "--fleet", "--scale", "4", "--state-dir", str(tmp_path)]) == 1
    assert "--fleet: a fleet's sizes are `fleet up --worker`'s and it keeps running: leave out --scale and --keep" in capsys.readouterr().err


def test_fleet_without_a_running_fleet_says_how_to_start_one(tmp_path, capsys):
    assert main(["simulate", "dev", "--jobs", str(TRACE), "--fleet", "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"no local fleet of dev in {tmp_path}" in err
    assert "fleet up dev" in err


def test_a_workload_left_behind_is_named_with_its_owner_finalizers_and_conditions():
    workload = {"metadata": {"namespace": "training", "name": "job-rl-training-1a2b3", "finalizers": ["kueue.x-k8s.io/resource-in-use"],
                             "ownerReferences": [{"kind": "Job", "name": "rl-training"}], "deletionTimestamp": "2026-12-07T04:00:00Z"},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Finished", "status": "False"}]}}
    assert described_workload(workload) == ("Workload training/job-rl-training-1a2b3 of Job rl-training, finalizers "
                                     "['kueue.x-k8s.io/resource-in-use'], conditions ['QuotaReserved'], being deleted")
    assert "of no owner" in described_workload({"metadata": {"namespace": "training", "name": "copy"}})
