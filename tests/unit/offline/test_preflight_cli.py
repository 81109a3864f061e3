"""``eks-gpu-training-preflight``: the same objects `pulumi up` creates, printed for an existing cluster,
and the judge of a log."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from eks_gpu_training.offline.preflight import main
from eks_gpu_training.workloads.preflight_jobs import dcgm_diag_job


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_dcgm_prints_the_template_pulumi_up_creates(capsys):
    status, out, _ = run(capsys, "dcgm", "--pool", "p5-training", "--instance-type", "p5.48xlarge", "--nodes", "2")
    assert status == 0
    (job,) = yaml.safe_load_all(out)
    assert job == dcgm_diag_job(
        "p5-training", ("eks-gpu-training/pool", "p5-training"), 2, 8, 2, "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04", "training", 3600
    )


def test_dcgm_selects_a_karpenter_pool_by_its_label(capsys):
    _, out, _ = run(capsys, "dcgm", "--pool", "gpu-training", "--pool-label", "karpenter.sh/nodepool=gpu-training", "--instance-type", "g6e.xlarge", "--nodes", "1", "--level", "1")
    (job,) = yaml.safe_load_all(out)
    expressions = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu-training"]} in expressions
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_dcgm_refuses_a_level_dcgmi_does_not_have(capsys):
    status, _, err = run(capsys, "dcgm", "--pool", "p", "--instance-type", "p5.48xlarge", "--nodes", "1", "--level", "7")
    assert status == 2
    assert err.strip() == "--level: Input should be less than or equal to 4"


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen makes the NCCL pods' key and is not installed here")
def test_nccl_prints_secret_config_map_service_and_job_with_a_fresh_key(capsys):
    status, out, _ = run(capsys, "nccl", "--pool", "p5-training", "--instance-type", "p5.48xlarge", "--nodes", "2", "--image", "444455556666.dkr.ecr.us-west-2.amazonaws.com/nccl-tests:1")
    assert status == 0
    secret, config_map, service, job = yaml.safe_load_all(out)
    assert [o["kind"] for o in (secret, config_map, service, job)] == ["Secret", "ConfigMap", "Service", "Job"]
    assert secret["stringData"]["id_ed25519"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert secret["stringData"]["id_ed25519.pub"].startswith("ssh-ed25519 ")
    assert "--min-bus-bandwidth 394.011" in job["spec"]["template"]["spec"]["containers"][0]["command"][2]


def test_nccl_refuses_a_single_node_and_an_instance_without_efa(capsys):
    with pytest.raises(SystemExit, match="at least 2"):
        main(["nccl", "--pool", "p", "--instance-type", "p5.48xlarge", "--nodes", "1", "--image", "a.b/c:1"])
    with pytest.raises(SystemExit, match="g6e.xlarge has no EFA"):
        main(["nccl", "--pool", "p", "--instance-type", "g6e.xlarge", "--nodes", "2", "--image", "a.b/c:1"])


def test_judge_passes_the_published_eks_log_and_names_the_baseline(capsys, reference_dir, tmp_path):
    readme = (reference_dir / "nccl-tests" / "README-awsome-distributed-training.md").read_text()
    eks_log = [b for b in re.findall(r"```(?:txt|log)\n(.*?)```", readme, flags=re.S) if "busbw" in b][2]
    log = tmp_path / "nccl.log"
    log.write_text(eks_log)
    status, out, _ = run(capsys, "judge", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2")
    assert status == 0
    first, second = out.splitlines()
    assert first == "PASS: bus bandwidth 437.79 GB/s"
    assert second.startswith("2 x p5.48xlarge, baseline 437.79 GB/s at 2147483648 bytes: aws-samples/awsome-distributed-training")
    assert second.endswith("required 394.01 GB/s (90%)")
    status, out, _ = run(capsys, "judge", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2", "--baseline-gbps", "500")
    assert status == 1
    assert out.startswith("FAIL: bus bandwidth 437.79 GB/s at 2147483648 bytes is below the required 450.00 GB/s")


def test_judge_without_a_baseline_checks_correctness_only(capsys, tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text("  2147483648  536870912  float  sum  -1  9197.5  233.49  100.00  0  9195.2  233.54  100.00  0\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 100\n")
    status, out, _ = run(capsys, "judge", str(log), "--instance-type", "p5.48xlarge", "--nodes", "4")
    assert status == 0
    assert out.splitlines()[1] == "4 x p5.48xlarge, no published baseline: judged on correctness only"


def test_judge_refuses_a_fraction_above_one(capsys):
    status, _, err = run(capsys, "judge", "-", "--instance-type", "p5.48xlarge", "--nodes", "2", "--fraction", "1.5")
    assert status == 2
    assert err.strip() == "--fraction: Input should be less than or equal to 1"
