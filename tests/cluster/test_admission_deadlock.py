"""Two gangs that each fit only the whole fleet, submitted together, and a node lost right after the
first is admitted: with the stack's admission (Kueue's topology-aware gang admission, side by side,
no ``blockAdmission``) both run whole, one after the other; without gang admission (the same sizes
as plain Jobs, the scheduler placing pod by pod) they deadlock, each holding part of the fleet.

Prod's pool grown to five nodes: a gang takes four, so after the loss four nodes are left, the
whole fleet for either. Kueue, the scheduler, the Job controller and the pod garbage collector
decide; the test deletes a Node as an instance's termination would.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration
from eks_gpu_training.local.simulate import job_objects
from eks_gpu_training.local.trace import check_rows
from tests.support import gpu_nodes
from tests.support.clusters import stack_variant, start
from tests.support.environment import holds_for, wait_for
from tests.support.node_faults import POOL, remove

GANG_NODES = 4
FLEET_NODES = 5
RUN_SECONDS = 20
"""How long each gang's pod runs once Ready (KWOK completes it, whether or not its gang is whole:
so "whole" here is each gang's four completions, and the two gangs never running at once)."""
BOTH_WHOLE_BOUND_SECONDS = 300
"""Both gangs ran whole and finished within this of their submission: the lost node's rank replaced
on the spare by Kueue (or the gang requeued), the first gang's run, the second's admission and run."""
DEADLOCK_HOLD_SECONDS = 30
"""How long the naive gangs are watched, each part-running and neither whole, to call it a deadlock."""


@pytest.fixture(scope="module")
def gang_cluster(tmp_path_factory):
    """Prod with its GPU pool grown to five nodes, node auto repair off (the lost node stays lost)."""
    folder = tmp_path_factory.mktemp("local-prod-gangs")

    def change(config):
        config["eks-gpu-training:gpuNodeGroups"][0]["nodeRepair"] = {"enabled": False}

    yield from start("prod", folder / "state", stack_path=stack_variant(folder, "prod", change), scale=FLEET_NODES)


def _gangs(running) -> list[Any]:
    """Two trace rows of four nodes each, one per team, as ``simulate`` submits them."""
    rows = [{"name": f"gang-{team}", "team": team, "app": app, "kind": "Job", "nodes": GANG_NODES,
             "duration": RUN_SECONDS, "submit": 0}
            for team, app in (("pretraining", "rl-training"), ("research", "finetune"))]
    return check_rows(rows, running.args, "test_admission_deadlock")


def _running_pods(running, namespace: str, name: str) -> list[Any]:
    return [p for p in running.env.job_pods(namespace, name) if p.status.phase == "Running"]


def test_two_whole_fleet_gangs_and_a_node_lost_after_admission_both_run_whole(gang_cluster):
    running = gang_cluster
    jobs = _gangs(running)
    for job in jobs:
        for obj in job_objects(job, running.args, speedup=1.0):
            running.env.apply(obj)
    submitted = time.monotonic()
    first = wait_for(lambda: next((j for j in jobs if len(running.env.job_pods(j.namespace, j.name)) == GANG_NODES
                                   and all(p.spec.node_name for p in running.env.job_pods(j.namespace, j.name))), None),
                     what="one gang admitted and its pods bound", timeout=120)
    lost = running.env.job_pods(first.namespace, first.name)[0].spec.node_name
    remove(running, lost)
    try:
        overlaps: list[str] = []

        def both_finished() -> bool:
            busy = [job.name for job in jobs if _running_pods(running, job.namespace, job.name)]
            if len(busy) > 1:
                overlaps.append(f"{time.monotonic() - submitted:.0f} s: {busy}")
            done = 0
            for job in jobs:
                status = running.env.batch.read_namespaced_job_status(job.name, job.namespace).status
                done += (status.succeeded or 0) >= GANG_NODES
            return done == len(jobs)

        wait_for(both_finished, what="both gangs finished", timeout=BOTH_WHOLE_BOUND_SECONDS, interval=0.5)
        print(f"both gangs ran whole and finished {time.monotonic() - submitted:.0f} s after submission")
        # Gang admission: the two never shared the fleet, the second admitted once the first was done.
        assert not overlaps, f"both gangs had pods running at once: {overlaps[:3]}"
    finally:
        for job in jobs:
            running.env.delete_job(job.namespace, job.name)
        _rejoin(running, lost)


def _naive_gang(name: str, namespace: str) -> dict[str, Any]:
    """A four-pod Indexed Job as written without the platform: a GPU node each, no queue."""
    pod = {
        "metadata": {"labels": {"gang": name}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {GPU_POOL_KEY: POOL},
            "tolerations": [gpu_toleration()],
            "containers": [{"name": "train", "image": "public.ecr.aws/docker/library/busybox:1.37",
                            "resources": {"limits": {GPU_RESOURCE: "8"}, "requests": {GPU_RESOURCE: "8"}}}],
        },
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"completions": GANG_NODES, "parallelism": GANG_NODES, "completionMode": "Indexed",
                     "backoffLimit": 10, "template": pod}}


def test_broken_variant_without_gang_admission_the_two_gangs_deadlock(gang_cluster):
    """The same two gangs as plain Jobs outside Kueue's namespaces: the scheduler binds pod by pod,
    so the five nodes hold parts of both, and the lost node leaves neither whole, for ever."""
    running = gang_cluster
    namespace = "naive-gangs"
    running.env.ensure_namespace(namespace)
    names = ["naive-a", "naive-b"]
    for name in names:
        running.env.apply(_naive_gang(name, namespace))
    wait_for(lambda: sum(len(_running_pods(running, namespace, n)) for n in names) == FLEET_NODES,
             what="every node of the pool holding a naive gang's pod", timeout=120)
    holder = max(names, key=lambda n: len(_running_pods(running, namespace, n)))
    lost = _running_pods(running, namespace, holder)[0].spec.node_name
    remove(running, lost)
    try:
        def deadlocked() -> bool:
            counts = [len(_running_pods(running, namespace, n)) for n in names]
            return all(0 < c < GANG_NODES for c in counts) or (sum(counts) <= GANG_NODES and max(counts) < GANG_NODES)

        wait_for(deadlocked, what="both gangs part-running, neither whole", timeout=120)
        holds_for(deadlocked, seconds=DEADLOCK_HOLD_SECONDS, what="neither naive gang whole")
    finally:
        for name in names:
            running.env.delete_job(namespace, name)
        running.env.core.delete_namespace(namespace)
        _rejoin(running, lost)


def _rejoin(running, name: str) -> None:
    """The lost node joins again, admitted by the gate, for the next test."""
    from tests.support.node_faults import replace_node

    if gpu_nodes.node(running, name) is None or not gpu_nodes.admitted(running, name):
        replace_node(running, name)
