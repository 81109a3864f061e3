"""Training pod template, Indexed Job, rendezvous Service, PDB and smoke test: plain functions, no engine."""

from __future__ import annotations

import kubernetes_validate
import pytest

from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS, ConfigError
from eks_gpu_training.facts.gpu_nodes import gpu_toleration
from eks_gpu_training.workloads.training_job import TrainingJob, TrainingJobArgs
from eks_gpu_training.workloads.templates import (
    EFA_HUGEPAGES,
    rendezvous_service,
    training_job,
    training_pdb,
    training_pod_template,
)
from eks_gpu_training.workloads.training_spec import TrainingJobSpec, validate_training_job
from eks_gpu_training.workloads.gpu_smoke_test import smoke_test_job, smoke_test_name
from tests.support.builders import p5_job
from tests.support.harness import run_program

def pod_spec(spec: TrainingJobSpec) -> dict:
    return training_pod_template(spec)["spec"]


def trainer(spec: TrainingJobSpec) -> dict:
    (container,) = pod_spec(spec)["containers"]
    return container


def test_pod_tolerates_the_gpu_taint_and_requires_gpu_nodes_of_the_allowed_types():
    spec = pod_spec(p5_job(instance_types=("p5.48xlarge", "p5e.48xlarge")))
    assert spec["tolerations"] == [gpu_toleration()]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "role", "operator": "In", "values": ["gpu-training"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge", "p5e.48xlarge"]},
            ]
        }
    ]


def test_multi_node_pods_are_labelled_like_the_seed_and_never_share_a_node():
    template = training_pod_template(p5_job())
    assert template["metadata"]["labels"]["app"] == "rl-training-multi"
    assert template["metadata"]["labels"]["app.kubernetes.io/name"] == "rl-training"
    assert template["spec"]["affinity"]["podAntiAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["rl-training-multi"]}]},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }


def test_single_node_apps_use_the_plain_app_label():
    assert training_pod_template(p5_job(nodes=1))["metadata"]["labels"]["app"] == "rl-training"


def test_pods_spread_one_per_node_and_steer_away_from_other_training_apps_on_layer_2():
    hostname, layer_2 = pod_spec(p5_job())["topologySpreadConstraints"]
    assert hostname == {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "rl-training-multi"}},
    }
    assert layer_2["topologyKey"] == "topology.k8s.aws/network-node-layer-2"
    assert layer_2["whenUnsatisfiable"] == "ScheduleAnyway"
    # Counting its own pods would push them onto different switches; it counts other training apps only.
    assert layer_2["labelSelector"]["matchExpressions"] == [
        {"key": "app.kubernetes.io/component", "operator": "In", "values": ["training"]},
        {"key": "app", "operator": "NotIn", "values": ["rl-training-multi"]},
    ]


def test_pods_prefer_the_same_layer_3_then_layer_2_switch_as_their_peers():
    preferred = pod_spec(p5_job())["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [(p["weight"], p["podAffinityTerm"]["topologyKey"]) for p in preferred] == [
        (100, "topology.k8s.aws/network-node-layer-3"),
        (50, "topology.k8s.aws/network-node-layer-2"),
    ]
    assert all(p["podAffinityTerm"]["labelSelector"]["matchExpressions"][0]["values"] == ["rl-training-multi"] for p in preferred)


def test_pods_carry_the_priority_class():
    assert pod_spec(p5_job(priority_class="evaluation-normal"))["priorityClassName"] == "evaluation-normal"


def test_efa_pods_take_the_whole_p5_node_with_all_32_efa_devices_and_efa_hugepages():
    resources = trainer(p5_job())["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": EFA_HUGEPAGES}
    # p5.48xlarge allocatable 191450m and 1938410Mi (Karpenter's reference), less EFA's 10256Mi of
    # hugepages and the library's GPU-node DaemonSets (190m, 346Mi), less the 1% reserve (1914m,
    # 19281Mi); CPU in whole cores.
    assert resources["requests"] == {
        "cpu": "189",
        "memory": "1908527Mi",
        "nvidia.com/gpu": "8",
        "vpc.amazonaws.com/efa": "32",
        "hugepages-2Mi": "5120Mi",
    }


def test_extended_resources_and_hugepages_follow_the_rules_kubernetes_enforces():
    resources = trainer(p5_job())["resources"]
    for name in ("nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"):
        assert resources["requests"][name] == resources["limits"][name], name
    # A container with hugepages must request CPU or memory; the quota needs both.
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "cpu" not in resources["limits"]
    assert "memory" not in resources["limits"]


def test_pods_without_efa_request_gpus_only():
    resources = trainer(p5_job(efa=False))["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": "8"}
    assert "FI_PROVIDER" not in {e["name"] for e in trainer(p5_job(efa=False))["env"]}


def test_efa_devices_are_what_every_allowed_type_has():
    # p4de has 4 EFA interfaces; the pool's launch template lays out 4 on every node.
    assert trainer(p5_job(instance_types=("p5.48xlarge", "p4de.24xlarge")))["resources"]["limits"]["vpc.amazonaws.com/efa"] == "4"


def test_default_cpu_and_memory_are_the_smallest_nodes_room_beside_its_daemonsets_less_a_reserve():
    # g6e.xlarge allocatable 3920m and 29317Mi, less the DaemonSets (190m, 326Mi: no EFA plugin on a
    # type without EFA) and the reserve (500m, 1 GiB); CPU in whole cores.
    assert trainer(p5_job(instance_types=("g6e.xlarge",), efa=False))["resources"]["requests"] == {
        "cpu": "3",
        "memory": "27967Mi",
        "nvidia.com/gpu": "1",
    }
    assert trainer(p5_job(cpu="100", memory="1Ti"))["resources"]["requests"]["cpu"] == "100"


def test_shared_memory_is_a_memory_backed_volume_at_dev_shm():
    spec = pod_spec(p5_job(shm_size_limit="256Gi"))
    assert spec["volumes"][0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Gi"}}
    assert trainer(p5_job())["volumeMounts"][0] == {"name": "dshm", "mountPath": "/dev/shm"}
    assert pod_spec(p5_job())["volumes"][0]["emptyDir"] == {"medium": "Memory"}


def test_host_networking_only_when_asked_and_then_with_cluster_dns():
    assert "hostNetwork" not in pod_spec(p5_job())
    assert "dnsPolicy" not in pod_spec(p5_job())
    spec = pod_spec(p5_job(host_network=True))
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"


def test_torchrun_gets_its_rendezvous_from_the_environment():
    env = {e["name"]: e for e in trainer(p5_job())["env"]}
    assert env["PET_NNODES"]["value"] == "2"
    assert env["PET_NPROC_PER_NODE"]["value"] == "8"
    assert env["PET_NODE_RANK"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert env["PET_MASTER_ADDR"]["value"] == "rl-training-0.rl-training"
    assert env["PET_MASTER_PORT"]["value"] == "29500"
    assert env["FI_PROVIDER"]["value"] == "efa"


def test_the_job_is_indexed_with_one_pod_per_node_all_at_once():
    job = training_job(p5_job(nodes=4, backoff_limit=1, suspend=True))
    assert job["metadata"]["namespace"] == "training"
    assert {k: job["spec"][k] for k in ("completionMode", "completions", "parallelism", "backoffLimit", "suspend")} == {
        "completionMode": "Indexed",
        "completions": 4,
        "parallelism": 4,
        "backoffLimit": 1,
        "suspend": True,
    }
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_the_headless_service_gives_the_pods_their_rendezvous_names():
    spec = p5_job()
    service = rendezvous_service(spec)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"app.kubernetes.io/instance": "rl-training", "app.kubernetes.io/component": "training"}
    # Pods of an Indexed Job are named <job>-<index>; the subdomain makes <job>-0.<service> resolvable.
    assert training_pod_template(spec)["spec"]["subdomain"] == service["metadata"]["name"]
    assert spec.master_address == f"{training_job(spec)['metadata']['name']}-0.{service['metadata']['name']}"


def test_pdb_keeps_every_pod_with_min_available_as_job_pods_support_no_max_unavailable():
    multi = training_pdb(p5_job())["spec"]
    assert multi == {"minAvailable": 2, "selector": {"matchLabels": {"app": "rl-training-multi"}}, "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    # Pods whose controller is a Job: "only .spec.minAvailable can be used, not .spec.maxUnavailable".
    single = training_pdb(p5_job(nodes=1))["spec"]
    assert single == {"minAvailable": 1, "selector": {"matchLabels": {"app": "rl-training"}}, "unhealthyPodEvictionPolicy": "AlwaysAllow"}


def test_every_object_carries_the_seed_label_and_the_standard_labels():
    spec = p5_job()
    for obj in (training_job(spec), rendezvous_service(spec), training_pdb(spec)):
        labels = obj["metadata"]["labels"]
        assert labels["app"] == "rl-training-multi"
        assert labels["app.kubernetes.io/name"] == "rl-training"
        assert labels["app.kubernetes.io/component"] == "training"
        assert labels["app.kubernetes.io/managed-by"] == "pulumi"


# --- validation ---------------------------------------------------------------------------------


def problems(spec: TrainingJobSpec) -> list[str]:
    return [str(p) for p in validate_training_job(spec, "job")]


def test_a_valid_job_has_no_problems():
    assert problems(p5_job()) == []


def test_rejects_instance_types_outside_the_gpu_catalog():
    assert problems(p5_job(instance_types=("m7i.xlarge",))) == ["job.instanceTypes: 'm7i.xlarge' is not a GPU instance type of the catalog"]


def test_requires_gpus_per_node_when_the_types_differ_in_gpus():
    assert problems(p5_job(instance_types=("g6e.12xlarge", "g6e.48xlarge"), efa=False)) == [
        "job.gpusPerNode: is required: the instance types have different GPU counts (g6e.12xlarge 4, g6e.48xlarge 8), so no whole-node count fits all"
    ]
    assert problems(p5_job(instance_types=("g6e.12xlarge", "g6e.48xlarge"), efa=False, gpus_per_node=4)) == []


def test_rejects_more_gpus_per_node_than_a_node_has():
    assert problems(p5_job(gpus_per_node=16)) == ["job.gpusPerNode: 16 exceeds the GPUs of p5.48xlarge (8)"]


def test_rejects_efa_on_types_without_efa():
    assert problems(p5_job(instance_types=("g6e.xlarge",))) == ["job.efa: is on but g6e.xlarge has no EFA"]


def test_rejects_more_efa_devices_than_the_types_have():
    assert problems(p5_job(efa_devices_per_node=64)) == ["job.efaDevicesPerNode: must lie between 1 and the 32 EFA devices every allowed type has"]
    assert trainer(p5_job(efa_devices_per_node=16))["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"


def test_rejects_cpu_or_memory_beyond_what_the_node_offers_beside_its_daemonsets():
    assert problems(p5_job(cpu="192", memory="1900Gi")) == [
        "job.cpu: 192 does not fit a p5.48xlarge node, which offers a pod 191260m CPU beside its DaemonSets "
        "(allocatable less their requests)",
        "job.memory: 1900Gi does not fit a p5.48xlarge node, which offers a pod 1927808Mi beside its DaemonSets "
        "and hugepages (allocatable less their requests)",
    ]
    assert problems(p5_job(cpu="191", memory="1882Gi")) == []


def test_rejects_environment_variables_the_template_sets():
    assert problems(p5_job(env={"PET_NNODES": "4", "1BAD": "x"})) == [
        "job.job.env.PET_NNODES: is set by the template (torchrun rendezvous and EFA); remove it",
        "job.job.env.1BAD: is not a valid environment variable name",
    ]


def test_rejects_names_that_cannot_be_pod_hostnames():
    message = "job.name: must be a DNS label (lowercase letters, digits, '-') of at most 50 characters"
    assert problems(p5_job(name="x" * 51)) == [message]
    assert problems(p5_job(name="RL_training")) == [message]


def test_training_job_component_refuses_a_job_without_image():
    graph = run_program(lambda: TrainingJob("job", TrainingJobArgs(job=p5_job(image=None))))
    assert isinstance(graph.error, ConfigError)
    assert "TrainingJob(job).job.image: is required to run the job" in str(graph.error)
    assert graph.resources == []


def test_training_job_component_creates_service_job_and_pdb():
    graph = run_program(lambda: TrainingJob("rl", TrainingJobArgs(job=p5_job(suspend=True))))
    assert graph.error is None, graph.error
    kinds = {r.inputs.get("kind"): r for r in graph.resources if r.type.startswith("kubernetes:")}
    assert set(kinds) == {"Service", "Job", "PodDisruptionBudget"}
    job = kinds["Job"]
    assert job.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert job.ignore_changes == ["spec", 'metadata.labels["kueue.x-k8s.io/queue-name"]']


# --- smoke test ---------------------------------------------------------------------------------


def test_smoke_test_checks_every_node_of_the_pool_sees_all_its_gpus():
    job = smoke_test_job("p5-training", nodes=2, gpus=8, image="cuda", namespace="training")
    assert job["metadata"]["name"] == "gpu-smoke-test-p5-training"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 2
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["/bin/sh", "-c", 'nvidia-smi && test "$(nvidia-smi -L | wc -l)" -eq 8']
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert pod["tolerations"] == [gpu_toleration()]
    expressions = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    # The pool label, not eks.amazonaws.com/nodegroup: EKS node group names carry a generated suffix.
    assert {"key": "eks-gpu-training/pool", "operator": "In", "values": ["p5-training"]} in expressions
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"


def test_smoke_test_names_stay_dns_labels_for_long_pool_names():
    long_pool = "a" * 63
    name = smoke_test_name(long_pool)
    assert len(name) == 63
    assert name != smoke_test_name("a" * 62 + "b")


# --- strict schema ------------------------------------------------------------------------------


def objects() -> list[dict]:
    multi, single = p5_job(), p5_job(nodes=1, host_network=True, shm_size_limit="64Gi", env={"NCCL_DEBUG": "INFO"})
    built = [training_job(multi), rendezvous_service(multi), training_pdb(multi), training_job(single), training_pdb(single)]
    built.append(smoke_test_job("p5-training", nodes=2, gpus=8, image="cuda", namespace="training"))
    for spec in (multi, single):
        template = training_pod_template(spec)
        built.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": spec.name, **template["metadata"]}, "spec": template["spec"]})
    return built


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_every_workload_object_passes_strict_schema_validation(version):
    for obj in objects():
        kubernetes_validate.validate(obj, version, strict=True)


def test_strict_validation_catches_an_unknown_field():
    job = training_job(p5_job())
    job["spec"]["template"]["spec"]["gpuCount"] = 8
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.34", strict=True)


def test_training_pods_get_no_service_account_token():
    # Ranks talk to each other over the headless Service, never to the API server.
    assert pod_spec(p5_job())["automountServiceAccountToken"] is False


def test_every_training_pod_names_its_checkpoint_directory_on_the_shared_file_system_per_namespace_and_app():
    spec = p5_job(shared_volume_claim="fsx-lustre", shared_volume_mount_path="/fsx")
    container = trainer(spec)
    assert {"name": "CHECKPOINT_DIR", "value": "/checkpoints"} in container["env"]
    assert {"name": "shared-fs", "mountPath": "/checkpoints", "subPath": f"checkpoints/{spec.namespace}/{spec.name}"} in container["volumeMounts"]
    assert {"name": "shared-fs", "mountPath": "/fsx"} in container["volumeMounts"]
    assert [v["name"] for v in pod_spec(spec)["volumes"]] == ["dshm", "shared-fs"]


def test_without_a_shared_file_system_the_checkpoint_directory_is_an_empty_dir_on_the_node():
    container, volumes = trainer(p5_job()), pod_spec(p5_job())["volumes"]
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in container["volumeMounts"]
    assert {"name": "checkpoints", "emptyDir": {}} in volumes


def test_every_revision_of_an_app_finds_the_same_checkpoint_directory():
    from dataclasses import replace

    first, later = p5_job(shared_volume_claim="fsx-lustre"), replace(p5_job(shared_volume_claim="fsx-lustre"), revision=3)
    assert first.checkpoint_subpath == later.checkpoint_subpath


def test_a_job_may_not_set_the_checkpoint_variable_itself():
    problems = validate_training_job(p5_job(env={"CHECKPOINT_DIR": "/tmp/x"}), "scheduling.trainingApps[0]")
    assert [p.path for p in problems] == ["scheduling.trainingApps[0].job.env.CHECKPOINT_DIR"]


def test_a_lost_rank_of_a_job_is_made_again_instead_of_failing_the_job():
    policy = training_job(p5_job())["spec"]["podFailurePolicy"]
    assert policy == {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
