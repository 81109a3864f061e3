"""A training pod fits the node it is sized for: its default requests are the node's allocatable
less every DaemonSet that runs there, and the DaemonSets counted are those the stack renders.

These are offline pre-checks of the arithmetic; the real scheduler places a full job on an empty
node of each shipped pool in the cluster tier (tests/cluster/test_placement.py)."""

from __future__ import annotations

import copy

import pytest

from tests.support.cluster_objects import selects_node
from tests.support.harness import stack_config

from eks_gpu_training.facts import yaml_io
from eks_gpu_training.addons import system_footprints as footprints
from eks_gpu_training.addons.efa_device_plugin import efa_needed
from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES
from eks_gpu_training.facts.gpu_nodes import EFA_NODE_HUGEPAGES_MIB, GPU_TAINT_KEY
from eks_gpu_training.facts.node_allocatable import allocatable
from eks_gpu_training.facts.quantity import MIB, parse_quantity
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.workloads.node_fit import (
    NodeLoad,
    default_requests,
    gpu_node_daemonsets,
    library_node_load,
    stack_node_load,
    training_room,
)
from eks_gpu_training.workloads.scheduling_policies import training_job_spec


@pytest.mark.parametrize("instance_type", sorted(GPU_INSTANCE_TYPES))
@pytest.mark.parametrize("efa_node", [False, True])
def test_the_default_requests_fit_every_catalog_type_beside_every_daemonset_the_library_runs(instance_type, efa_node):
    if efa_node and GPU_INSTANCE_TYPES[instance_type].efa_interfaces == 0:
        pytest.skip(f"{instance_type} has no EFA")
    load = library_node_load(instance_type, efa_node=efa_node)
    cpu, memory = default_requests([instance_type], lambda t: load)
    node = allocatable(instance_type, hugepages_mib=load.hugepages_mib)
    assert cpu + load.cpu_millicores <= node.cpu_millicores, instance_type
    assert memory + load.memory_mib <= node.memory_mib, instance_type
    assert load.pods + 1 <= node.pods, instance_type
    # And not wastefully: at most the reserve (1%, at least 500m and 1 GiB) and the rounding down to
    # whole cores stay free.
    room = training_room(instance_type, load)
    assert room.cpu_millicores - cpu < max(500, node.cpu_millicores // 100) + 1000
    assert room.memory_mib - memory == max(1024, node.memory_mib // 100)


def test_an_efa_node_offers_its_hugepages_less_memory():
    plain, efa = library_node_load("p5.48xlarge", efa_node=False), library_node_load("p5.48xlarge", efa_node=True)
    assert training_room("p5.48xlarge", plain).memory_mib - training_room("p5.48xlarge", efa).memory_mib == EFA_NODE_HUGEPAGES_MIB


def test_the_smallest_of_several_types_sets_the_default():
    def load(instance_type: str) -> NodeLoad:
        return library_node_load(instance_type, efa_node=False)

    assert default_requests(["g6e.2xlarge", "g6e.xlarge"], load) == default_requests(["g6e.xlarge"], load)


def test_a_raised_labeler_request_lowers_the_training_pods_default_memory():
    config = copy.deepcopy(stack_config("prod"))
    before = platform_args_from_settings(config)
    config["eks-gpu-training:topologyLabeler"] = {"resources": {"memoryRequest": "2Gi", "memoryLimit": "2Gi"}}
    after = platform_args_from_settings(config)
    app = before.scheduling.training_apps[0]
    old, new = training_job_spec(app, before), training_job_spec(after.scheduling.training_apps[0], after)
    assert parse_quantity(old.pod_memory) - parse_quantity(new.pod_memory) == (2048 - 128) * MIB


def test_without_fsx_the_node_has_the_csi_drivers_room_too():
    config = copy.deepcopy(stack_config("prod"))
    with_fsx = platform_args_from_settings(config)
    config["eks-gpu-training:storage"]["fsx"]["enabled"] = False
    without = platform_args_from_settings(config)
    a = stack_node_load(with_fsx, "p5.48xlarge", efa_node=True)
    b = stack_node_load(without, "p5.48xlarge", efa_node=True)
    assert (a.cpu_millicores - b.cpu_millicores, a.memory_mib - b.memory_mib, a.pods - b.pods) == (
        footprints.FSX_CSI_NODE.cpu_millicores, footprints.FSX_CSI_NODE.memory_mib, 1)


# What the stacks render, against what the sizing counts.

NOT_RENDERED = {d.name for d in (*footprints.EKS_NODE_DAEMONSETS, footprints.FSX_CSI_NODE,
                                 *footprints.GPU_OPERATOR_OPERANDS[footprints.GPU_OPERATOR_DEFAULT_VERSION])}
"""DaemonSets no chart of the render creates: EKS's add-ons (each cites its source) and the GPU
Operator's operands, which the operator creates at run time from its ClusterPolicy."""


def _gpu_node_labels(instance_type: str) -> dict[str, str]:
    return {"role": "gpu-training", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": instance_type}


def _lands_on(pod: dict, labels: dict) -> bool:
    """The pod tolerates the GPU taint and a GPU node with ``labels`` satisfies its nodeSelector and
    required node affinity (a pre-check; the cluster tier has the scheduler decide)."""
    tolerated = any(t.get("operator") == "Exists" and t.get("key") in (None, GPU_TAINT_KEY) for t in pod.get("tolerations") or [])
    return tolerated and selects_node(pod, labels)


def _requests(pod: dict) -> tuple[int, int]:
    requests = [(c.get("resources") or {}).get("requests") or {} for c in pod["containers"]]
    return (int(sum(parse_quantity(str(r.get("cpu", "0"))) for r in requests) * 1000),
            int(sum(parse_quantity(str(r.get("memory", "0"))) for r in requests) / MIB))


def _rendered_daemonsets(out) -> list[dict]:
    found = []
    for path in sorted((out / "manifests").rglob("*.yaml")):
        for obj in yaml_io.load_all(path.read_text()):
            if obj and obj.get("kind") == "DaemonSet":
                found.append(obj)
    return found


def _rendered_jobs(out) -> list[dict]:
    jobs = [yaml_io.load(p.read_text()) for p in sorted((out / "manifests").glob("job_*.yaml"))]
    return [job for job in jobs if job["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "training"]


def test_the_daemonsets_the_sizing_counts_are_those_the_stack_renders_on_its_gpu_nodes(rendered_stack, reference_dir):
    stack, out, _ = rendered_stack
    args = platform_args_from_settings(stack_config(stack))
    daemonsets = _rendered_daemonsets(out)
    for instance_type in sorted({t for pool in args.gpu_node_groups for t in pool.instance_types}):
        labels = _gpu_node_labels(instance_type)
        rendered = {d["metadata"]["name"]: _requests(d["spec"]["template"]["spec"]) for d in daemonsets
                    if _lands_on(d["spec"]["template"]["spec"], labels)}
        counted = {d.name: (d.cpu_millicores, d.memory_mib) for d in gpu_node_daemonsets(
            instance_type, efa_plugin=efa_needed(args),
            node_monitoring=args.node_monitoring.enabled,
            labeler=footprints.labeler_footprint(args.topology_labeler.resources.cpu_request,
                                                 args.topology_labeler.resources.memory_request)
            if args.topology_labeler.enabled else None,
            fsx=args.storage.fsx.enabled, gpu_operator_version=args.gpu_operator.chart_version)
            if d.name not in NOT_RENDERED}
        assert rendered == counted, (stack, instance_type)


def test_each_shipped_jobs_requests_fit_its_nodes_beside_the_rendered_daemonsets(rendered_stack, reference_dir):
    stack, out, _ = rendered_stack
    args = platform_args_from_settings(stack_config(stack))
    daemonsets = _rendered_daemonsets(out)
    jobs = _rendered_jobs(out)
    assert jobs, f"stack {stack} renders no training job"
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        app = next(a for a in args.scheduling.training_apps if job["metadata"]["name"].startswith(a.name))
        spec = training_job_spec(app, args)
        requests = pod["containers"][0]["resources"]["requests"]
        for instance_type in spec.instance_types:
            labels = _gpu_node_labels(instance_type)
            beside = [_requests(d["spec"]["template"]["spec"]) for d in daemonsets if _lands_on(d["spec"]["template"]["spec"], labels)]
            beside += [(d.cpu_millicores, d.memory_mib) for d in gpu_node_daemonsets(instance_type) if d.name in NOT_RENDERED]
            hugepages = EFA_NODE_HUGEPAGES_MIB if spec.efa else 0
            node = allocatable(instance_type, hugepages_mib=hugepages)
            cpu = parse_quantity(str(requests["cpu"])) * 1000 + sum(c for c, _ in beside)
            memory = parse_quantity(str(requests["memory"])) / MIB + sum(m for _, m in beside)
            assert cpu <= node.cpu_millicores, (stack, job["metadata"]["name"], instance_type, cpu, node)
            assert memory <= node.memory_mib, (stack, job["metadata"]["name"], instance_type, memory, node)


def test_a_node_load_adds_up_its_daemonsets():
    load = NodeLoad.of([footprints.PodFootprint("a", 1, 10, 20), footprints.PodFootprint("b", 1, 5, 0)], hugepages_mib=2)
    assert load == NodeLoad(15, 20, 2, 2)
