"""Pre-flight checks: DCGM diagnostics and the NCCL all-reduce test, as templates and as Jobs `pulumi up`
waits for; the stack's rules about them; and their objects rendered and checked like any other."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from eks_gpu_training.config import ConfigError
from eks_gpu_training.offline.check import check_render
from eks_gpu_training.offline.engine import run_main, stack_config
from eks_gpu_training.offline.render import render
from eks_gpu_training.platform import platform_args_from_settings
from eks_gpu_training.facts.gpu_nodes import gpu_toleration
from eks_gpu_training.platform.validation import validate_stack
from eks_gpu_training.workloads.preflight_jobs import NcclTestSpec, dcgm_diag_job, nccl_test_objects, nccl_test_script
from tests.support.builders import HEALTH_NCCL_IMAGE as NCCL_IMAGE, health_config, scheduling_without_teams, without_teams
from eks_gpu_training.platform.stack_files import stack_file_name

NS = "eks-gpu-training:"
JOB = "kubernetes:batch/v1:Job"


def prod_with(**sections) -> dict:
    """prod without its teams (which refuse the checks: Kueue would hold their Jobs), with ``sections``."""
    config = without_teams(stack_config("prod"))
    for key, value in sections.items():
        config[f"{NS}{key}"] = value
    return config


def nccl_spec(**overrides) -> NcclTestSpec:
    fields = dict(
        pool="p5-training",
        pool_label=("eks.amazonaws.com/nodegroup", "p5-training"),
        instance_types=("p5.48xlarge",),
        nodes=2,
        image=NCCL_IMAGE,
        namespace="training",
        priority_class="training-critical",
        min_bus_bandwidth_fraction=0.9,
        active_deadline_seconds=3600,
    )
    return NcclTestSpec(**{**fields, **overrides})


def containers(job: dict) -> list[dict]:
    return job["spec"]["template"]["spec"]["containers"]


# --- templates -------------------------------------------------------------------------------------


def test_dcgm_diag_runs_the_configured_level_once_per_node_with_every_gpu():
    job = dcgm_diag_job("p5-training", ("eks.amazonaws.com/nodegroup", "p5-training"), 2, 8, 3, "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04", "training", 3600)
    (container,) = containers(job)
    assert "dcgmi diag -r 3 " in container["command"][2]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (2, 2, 0)
    pod = spec["template"]["spec"]
    assert gpu_toleration() in pod["tolerations"]
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    expressions = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["p5-training"]} in expressions


def test_dcgm_diag_script_is_valid_bash_and_fails_on_a_failed_test():
    script = dcgm_diag_job("a", ("k", "v"), 1, 1, 2, "i:1", "ns", 60)["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    assert "grep -Eq '[|] *Fail' \"$report\"" in script


@pytest.mark.parametrize(
    ("table", "exit_code", "expected"),
    [("| Memory | Pass |", 0, 0), ("| Memory | Fail |", 0, 1), ("| Memory | Pass |", 226, 226)],
)
def test_dcgm_diag_script_fails_on_a_failed_test_even_when_dcgmi_exits_zero(tmp_path, table, exit_code, expected):
    """The script run by bash against stand-ins for nv-hostengine and dcgmi."""
    for name, body in (("nv-hostengine", "exit 0"), ("dcgmi", f'[ "$1" = diag ] && echo "{table}" && exit {exit_code}; exit 0')):
        tool = tmp_path / name
        tool.write_text(f"#!/bin/bash\n{body}\n")
        tool.chmod(0o755)
    script = dcgm_diag_job("a", ("k", "v"), 1, 1, 2, "i:1", "ns", 60)["spec"]["template"]["spec"]["containers"][0]["command"][2]
    result = subprocess.run(["bash", "-c", script], env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True, text=True)
    assert result.returncode == expected


def test_nccl_test_is_an_indexed_job_with_every_gpu_and_efa_device_of_each_node():
    secret, config_map, service, job = nccl_test_objects(nccl_spec(), "PRIVATE", "PUBLIC")
    assert job["spec"]["completionMode"] == "Indexed"
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["backoffLimit"]) == (2, 2, 0)
    (container,) = containers(job)
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5120Mi"}
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == "nccl-test-p5-training"
    assert pod["priorityClassName"] == "training-critical"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert {v["name"]: v for v in pod["volumes"]}["ssh-key"]["secret"]["secretName"] == secret["metadata"]["name"]
    assert {v["name"]: v for v in pod["volumes"]}["judge"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert secret["stringData"] == {"id_ed25519": "PRIVATE", "id_ed25519.pub": "PUBLIC"}
    expressions = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["p5-training"]} in expressions


def test_nccl_launcher_runs_one_rank_per_gpu_and_judges_against_90_percent_of_the_baseline():
    script = nccl_test_script(nccl_spec())
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    assert "-np 16 -N 8 --hostfile /tmp/hostfile" in script
    assert "all_reduce_perf -b 8 -e 2147483648 -f 2 -g 1 -c 1 -n 100" in script
    assert "-x FI_PROVIDER=efa" in script
    # 0.9 x 437.79 GB/s, AWS's published 2 x p5.48xlarge figure.
    assert "--at-bytes 2147483648 --min-bus-bandwidth 394.011 || status=1" in script


def test_without_a_published_baseline_the_run_is_judged_on_correctness_only():
    spec = nccl_spec(nodes=4)
    assert spec.min_bus_bandwidth_gbps is None
    assert "--min-bus-bandwidth" not in nccl_test_script(spec)
    assert nccl_spec(instance_types=("p5.48xlarge", "p5e.48xlarge")).min_bus_bandwidth_gbps is None


def test_the_judge_config_map_carries_the_parser_itself():
    from eks_gpu_training.workloads import nccl_results

    config_map = nccl_test_objects(nccl_spec(), "k", "p")[1]
    assert config_map["data"]["nccl_results.py"] == Path(nccl_results.__file__).read_text()


# --- the stack -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def preflight_graph(health_graph):
    return health_graph


def test_prod_with_preflight_checks_its_running_pool_dcgm_first_then_nccl(preflight_graph):
    jobs = {j.inputs["metadata"]["name"]: j for j in preflight_graph.of_type(JOB)}
    assert set(jobs) == {"rl-training", "dcgm-diag-p5-training", "nccl-test-p5-training"}
    dcgm, nccl = jobs["dcgm-diag-p5-training"], jobs["nccl-test-p5-training"]
    assert preflight_graph.depends_on(nccl, dcgm)
    for kind, name in (("kubernetes:core/v1:Secret", "nccl-test-p5-training-ssh"), ("kubernetes:core/v1:ConfigMap", "nccl-test-p5-training-judge"), ("kubernetes:core/v1:Service", "nccl-test-p5-training")):
        (obj,) = [r for r in preflight_graph.of_type(kind) if r.inputs["metadata"]["name"] == name]
        assert preflight_graph.depends_on(nccl, obj)
    # The component waits for the device plugins' releases, the GPU nodes and the training namespace;
    # its Jobs register only once it has (a child waits for its parent's registration).
    checks = preflight_graph.one("eks-gpu-training:index:PreflightChecks")
    waits_for = {preflight_graph.by_urn(u).name for u in checks.dependencies}
    assert {"gpu-training-efa-device-plugin-release", "gpu-training-gpu-operator-release", "gpu-training-scheduling-training"} <= waits_for
    # Kueue's webhook watches Jobs in the training namespaces and fails closed: it must answer first.
    assert "gpu-training-kueue-release" in waits_for
    assert any(preflight_graph.by_urn(u).type in ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup") for u in checks.dependencies)
    # `pulumi up` waits for them: no skipAwait, and a deadline of preflight.timeoutMinutes.
    assert "annotations" not in nccl.inputs["metadata"]
    assert nccl.inputs["spec"]["activeDeadlineSeconds"] == 3600


def test_the_stacks_preflight_jobs_select_the_pool_by_the_label_the_stack_sets_on_its_nodes(preflight_graph):
    # EKS's own eks.amazonaws.com/nodegroup label holds the generated node group name (pool name plus
    # a unique suffix), so it never equals the pool name; the stack labels each node with its pool.
    for name in ("dcgm-diag-p5-training", "nccl-test-p5-training"):
        (job,) = [j for j in preflight_graph.of_type(JOB) if j.inputs["metadata"]["name"] == name]
        terms = job.inputs["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {"key": "eks-gpu-training/pool", "operator": "In", "values": ["p5-training"]} in terms[0]["matchExpressions"]


def test_the_ssh_key_comes_from_the_stack_state(preflight_graph):
    key = preflight_graph.one("tls:index/privateKey:PrivateKey")
    assert key.inputs["algorithm"] == "ED25519"
    secret = next(r for r in preflight_graph.of_type("kubernetes:core/v1:Secret") if r.inputs["metadata"]["name"] == "nccl-test-p5-training-ssh")
    assert preflight_graph.depends_on(secret, key)


def test_preflight_off_creates_nothing(prod_graph):
    assert prod_graph.of_type("eks-gpu-training:index:PreflightChecks") == []


@pytest.mark.parametrize(
    ("preflight", "problem"),
    [
        ({"enabled": True}, "preflight.nccl.image: is required to run the NCCL test on p5-training"),
        ({"enabled": True, "namespace": "evaluation", "nccl": {"image": NCCL_IMAGE}}, "preflight.namespace: 'evaluation' is not in scheduling.namespaces"),
        ({"enabled": True, "dcgmDiag": {"enabled": False}, "nccl": {"enabled": False}}, "preflight.enabled: is true but dcgmDiag.enabled and nccl.enabled are both false"),
    ],
)
def test_preflight_rules(preflight, problem):
    graph = run_main(prod_with(preflight=preflight))
    assert isinstance(graph.error, ConfigError)
    assert any(str(p).startswith(problem) for p in graph.error.problems), graph.error.problems


def test_dev_runs_dcgm_on_its_one_node_without_an_nccl_image():
    config = without_teams(stack_config("dev"))
    config[f"{NS}preflight"] = {"enabled": True, "nccl": {"enabled": False}}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    (job,) = [j for j in graph.of_type(JOB) if j.inputs["metadata"]["name"].startswith("dcgm-diag")]
    assert job.inputs["spec"]["completions"] == 1


def test_nccl_alone_needs_an_efa_pool_of_two_nodes():
    groups = copy.deepcopy(stack_config("prod")[f"{NS}gpuNodeGroups"])
    groups[0].update(minSize=1, desiredSize=1)
    graph = run_main(prod_with(gpuNodeGroups=groups, preflight={"enabled": True, "dcgmDiag": {"enabled": False}, "nccl": {"image": NCCL_IMAGE}}))
    assert [str(p) for p in graph.error.problems if p.path.startswith("preflight")] == [
        "preflight.dcgmDiag.enabled: is false and no pool that starts with nodes has EFA and two or more nodes for the NCCL test: nothing would run"
    ]


def test_preflight_needs_a_pool_that_starts_with_nodes():
    config = without_teams(stack_config("dev"))
    config[f"{NS}gpuNodeGroups"][0].update(minSize=0, desiredSize=0)
    config[f"{NS}preflight"] = {"enabled": True}
    graph = run_main(config)
    assert [str(p) for p in graph.error.problems] == [
        "preflight.enabled: no managed GPU pool starts with nodes (every initial size is 0), so there is nothing to check"
    ]


def test_preflight_needs_the_quota_for_every_pool_at_once():
    # prod without teams: the namespace's own quota
    scheduling = scheduling_without_teams(stack_config("prod")[f"{NS}scheduling"])
    scheduling["namespaces"][0]["quota"]["gpus"] = 8
    scheduling["trainingApps"] = []
    graph = run_main(prod_with(scheduling=scheduling, preflight={"enabled": True, "nccl": {"enabled": False}}))
    assert [str(p) for p in graph.error.problems if p.path.startswith("preflight")] == [
        "preflight.namespace: the pre-flight checks need 16 GPUs at once but 'training' allows 8"
    ]


def test_preflight_needs_the_cpu_and_memory_of_its_largest_check():
    """The NCCL pods request a training pod's CPU and memory (the node's room beside its DaemonSets, less a reserve): 2 x 189 CPUs."""
    scheduling = scheduling_without_teams(stack_config("prod")[f"{NS}scheduling"])  # the namespace's own quota
    scheduling["namespaces"][0]["quota"].update(cpu="300", memory="4Ti")
    scheduling["trainingApps"] = []
    graph = run_main(prod_with(scheduling=scheduling, preflight={"enabled": True, "nccl": {"image": NCCL_IMAGE}}))
    problems = [str(p) for p in graph.error.problems if p.path.startswith("preflight")]
    assert problems == ["preflight.namespace: the pre-flight checks need 378 CPU at once but 'training' allows 300"]
    try:
        problems = validate_stack(platform_args_from_settings(prod_with(scheduling=scheduling, preflight={"enabled": True, "nccl": {"enabled": False}})))
    except ConfigError as error:
        problems = error.problems
    assert [p for p in problems if p.path.startswith("preflight")] == []


def test_preflight_is_refused_with_teams_whose_queue_would_hold_its_jobs():
    config = copy.deepcopy(stack_config("prod"))
    config[f"{NS}preflight"] = {"enabled": True, "nccl": {"enabled": False}}
    graph = run_main(config)
    assert [str(p) for p in graph.error.problems] == [
        "preflight.enabled: cannot run with scheduling.teams: every training namespace is a team's, where Kueue holds a Job "
        "that names no queue; run the checks before adding teams, or as Jobs submitted to a team's queue"
    ]


@pytest.mark.parametrize(
    ("preflight", "key"),
    [
        ({"dcgmDiag": {"level": 5}}, "preflight.dcgmDiag.level"),
        ({"nccl": {"minBusBandwidthFraction": 1.5}}, "preflight.nccl.minBusBandwidthFraction"),
        ({"nccl": {"image": "nccl-tests:latest"}}, "preflight.nccl.image"),
    ],
)
def test_preflight_values_out_of_range_are_refused(preflight, key):
    graph = run_main(prod_with(preflight=preflight))
    assert any(p.path == key for p in graph.error.problems), graph.error.problems


# --- rendered and checked --------------------------------------------------------------------------


def test_preflight_and_dashboard_objects_render_and_pass_check(tmp_path):
    """Every new object, as a render writes it, against the Kubernetes schemas. The charts are not
    rendered: the stack pins a node monitoring agent (1.6.7) whose chart no test mirror holds."""
    config = health_config()
    stack_path = tmp_path / stack_file_name("preflight")
    stack_path.write_text(yaml.safe_dump({"config": config}))
    out = tmp_path / "render"
    render("preflight", out, stack_path=stack_path, picture=False, charts=False)
    manifests = {p.name for p in (out / "manifests").glob("*.yaml")}
    assert {
        "job_training_dcgm-diag-p5-training.yaml",
        "job_training_nccl-test-p5-training.yaml",
        "service_training_nccl-test-p5-training.yaml",
        "secret_training_nccl-test-p5-training-ssh.yaml",
        "configmap_training_nccl-test-p5-training-judge.yaml",
        "configmap_gpu-operator_dcgm-exporter-dashboard.yaml",
    } <= manifests
    report = check_render(out)
    assert report.failures == []
    secret = yaml.safe_load((out / "manifests" / "secret_training_nccl-test-p5-training-ssh.yaml").read_text())
    assert secret["stringData"] == "<secret>"  # the private key never reaches a render
