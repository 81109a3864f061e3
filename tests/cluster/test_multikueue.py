"""Many clusters behind one Kueue, on the fleet of ``tests.support.multikueue_fleet`` (a manager and
two workers, three local control planes on loopback, started by ``fleet up``'s own code).

What the real Kueues decide: a job submitted to the manager runs once, whole, on one worker (one with
room), and its status comes back to the manager; a job larger than any worker waits rather than
splitting; a lost worker's job runs on the other; without the AdmissionCheck (the broken variant)
the manager runs the job itself; ``verify --fleet`` and ``simulate`` read the fleet.
test_multikueue_200_jobs runs 200 jobs through a fleet of its own."""

from __future__ import annotations

import time
from typing import Any

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY
from eks_gpu_training.local.multikueue_wiring import dispatch
from eks_gpu_training.workloads.multikueue_manager import ADMISSION_CHECK

from tests.support.clusters import RunningCluster
from tests.support.environment import holds_for, wait_for
from tests.support.kueue import KUEUE_API, condition
from tests.support.multikueue_fleet import POOL, WORKER_LOST_TIMEOUT_SECONDS, WORKERS


def workload_of(running: RunningCluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    return running.env.workload(namespace, name, kind)


def dispatched_to(manager: RunningCluster, kind: str, namespace: str, name: str, *, not_to: str = "", timeout: float = 120) -> str:
    """The worker the manager's Workload of the job was dispatched to (other than ``not_to``), once its check is Ready."""
    def ready():
        workload = workload_of(manager, kind, namespace, name)
        checks = {c["name"]: c["state"] for c in (workload.get("status") or {}).get("admissionChecks") or []}
        worker = checks.get(ADMISSION_CHECK) == "Ready" and workload["status"].get("clusterName")
        return worker if worker and worker != not_to else None

    return wait_for(ready, what=f"the manager dispatching {kind} {name}" + (f" to a worker other than {not_to}" if not_to else ""),
                    timeout=timeout)


def back_up(cluster) -> list[str]:
    """The lost worker's API server started again, with whatever of its control plane gave up while
    the API server was away (the local control plane's artefact, not the loss being tested)."""
    supervisor = cluster.supervisor
    dead = [name for name, started in supervisor.started.items() if not started.alive()]
    for name in dead:
        supervisor.stop(name)
    supervisor.start_all([cluster.processes[name] for name in ["kube-apiserver", *dead]], log=print)
    return dead


def active(manager: RunningCluster, worker: str) -> str:
    return condition(manager.env.get(KUEUE_API, "MultiKueueCluster", worker) or {}, "Active").get("status", "")


def test_the_workers_are_active_and_so_is_the_admission_check(manager_cluster):
    env = manager_cluster.env
    check = env.get(KUEUE_API, "AdmissionCheck", ADMISSION_CHECK)
    assert condition(check, "Active")["status"] == "True"
    for queue in env.list(KUEUE_API, "ClusterQueue"):
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": ADMISSION_CHECK}]}
        assert condition(queue, "Active")["status"] == "True", queue["metadata"]["name"]


def test_a_job_runs_once_whole_on_one_worker_and_its_status_comes_back(manager_cluster, east_cluster, west_cluster):
    submitted = time.monotonic()
    namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
    try:
        worker = dispatched_to(manager_cluster, "Job", namespace, name)
        print(f"dispatch of one job to an idle fleet: {time.monotonic() - submitted:.1f} s from submission to admitted on {worker}")
        running, other = (east_cluster, west_cluster) if worker == "east" else (west_cluster, east_cluster)
        (pod,) = running.env.expect_job_running(namespace, name, 1)
        assert running.env.core.read_node(pod.spec.node_name).metadata.labels[GPU_POOL_KEY] == POOL
        # The other worker's copy is gone, and the manager runs nothing of it.
        wait_for(lambda: other.env.get("batch/v1", "Job", name, namespace) is None, what=f"no copy of {name} left on the other worker")
        assert manager_cluster.env.job_pods(namespace, name) == []
        # MultiKueue copies the worker's Job status to the manager's Job.
        wait_for(lambda: (manager_cluster.env.get("batch/v1", "Job", name, namespace)["status"] or {}).get("active") == 1,
                 what=f"job {name}'s status mirrored to the manager")
    finally:
        manager_cluster.env.delete_job(namespace, name)


def test_a_two_node_jobset_runs_on_the_worker_with_room_for_its_team(manager_cluster, east_cluster, west_cluster):
    # research has one GPU on east and two on west.
    namespace, name = manager_cluster.submit_group_run("JobSet", "finetune", nodes=2)
    try:
        assert dispatched_to(manager_cluster, "JobSet", namespace, name) == "west"
        pods = west_cluster.env.expect_group_running(namespace, name, 2)
        assert len({p.spec.node_name for p in pods}) == 2, "one pod per node"
        assert east_cluster.env.group_pods(namespace, name) == []
        assert manager_cluster.env.group_pods(namespace, name) == []
    finally:
        manager_cluster.env.delete_group("JobSet", namespace, name)


def test_a_job_larger_than_every_worker_waits_rather_than_splitting(manager_cluster, east_cluster, west_cluster):
    namespace, name = manager_cluster.submit_run("rl-training", parallelism=3)
    try:
        # The manager's quota admits it: research has three GPUs there, no worker gives it more than two.
        wait_for(lambda: condition(workload_of(manager_cluster, "Job", namespace, name), "QuotaReserved").get("status") == "True",
                 what=f"the manager reserving quota for {name}")

        def waits() -> bool:
            workload = workload_of(manager_cluster, "Job", namespace, name)
            return (condition(workload, "Admitted").get("status") != "True"
                    and not any(running.env.job_pods(namespace, name) for running in (manager_cluster, east_cluster, west_cluster)))

        holds_for(waits, seconds=15, what=f"job {name} waiting with no pod on any cluster")
    finally:
        manager_cluster.env.delete_job(namespace, name)


def test_broken_variant_without_the_admission_check_the_manager_runs_the_job(manager_cluster, east_cluster, west_cluster):
    dispatch(manager_cluster.kubeconfig, on=False)
    try:
        namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
        try:
            manager_cluster.env.expect_job_running(namespace, name, 1)
            assert east_cluster.env.get("batch/v1", "Job", name, namespace) is None
            assert west_cluster.env.get("batch/v1", "Job", name, namespace) is None
        finally:
            manager_cluster.env.delete_job(namespace, name)
    finally:
        dispatch(manager_cluster.kubeconfig, on=True)


def test_a_lost_workers_job_runs_on_the_other_worker_and_not_twice_once_it_is_back(fleet, manager_cluster):
    namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
    try:
        lost = dispatched_to(manager_cluster, "Job", namespace, name)
        other = "west" if lost == "east" else "east"
        fleet[lost].env.expect_job_running(namespace, name, 1)
        lost_cluster = fleet[lost].cluster
        lost_cluster.supervisor.stop("kube-apiserver")
        stopped = time.monotonic()
        try:
            wait_for(lambda: active(manager_cluster, lost) == "False", what=f"the manager seeing worker {lost} lost", timeout=90)
            assert dispatched_to(manager_cluster, "Job", namespace, name, not_to=lost, timeout=WORKER_LOST_TIMEOUT_SECONDS + 150) == other
            fleet[other].env.expect_job_running(namespace, name, 1)
            print(f"re-dispatch: the job runs on {other} {time.monotonic() - stopped:.0f} s after {lost}'s API server stopped "
                  f"(workerLostTimeout {WORKER_LOST_TIMEOUT_SECONDS} s)")
        finally:
            restarted = back_up(lost_cluster)
        wait_for(lambda: active(manager_cluster, lost) == "True", what=f"the manager reaching worker {lost} again", timeout=120)

        # Back, one of the two copies is removed and the job runs on one worker only. Which copy stays
        # is Kueue's choice (its 0.19.2 source keeps the one admitted first, ``bestMatchByCondition``);
        # only that one stays is asserted.
        def copies() -> dict[str, str]:
            found = {}
            for worker in (lost, other):
                env = fleet[worker].env
                job = env.get("batch/v1", "Job", name, namespace)
                pods = [p.metadata.name for p in env.job_pods(namespace, name)]
                if job is not None or pods:
                    found[worker] = f"job {job is not None}, pods {pods}"
            return found

        try:
            wait_for(lambda: len(copies()) == 1, what=f"job {name} left on one worker only", timeout=150)
        except AssertionError as error:
            raise AssertionError(f"{error}; copies: {copies()}; restarted after the loss: {restarted}") from None
        holds_for(lambda: len(copies()) == 1, seconds=15, what=f"job {name} on one worker only ({copies()})")
    finally:
        manager_cluster.env.delete_job(namespace, name)



def test_switching_dispatch_on_stops_a_job_already_running_on_the_manager(manager_cluster, east_cluster, west_cluster):
    """``multiKueue.manager`` turned on in a stack whose jobs run: every ClusterQueue gains the
    AdmissionCheck, Kueue adds it to the admitted Workloads too, MultiKueue rejects it for a Job
    without ``spec.managedBy: kueue.x-k8s.io/multikueue``, and Kueue deactivates the job: its pods
    go. The change table says to turn it on with no job running (docs/operations.md)."""
    dispatch(manager_cluster.kubeconfig, on=False)
    try:
        namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
        try:
            manager_cluster.env.expect_job_running(namespace, name, 1)
            dispatch(manager_cluster.kubeconfig, on=True)

            def stopped():
                workload = workload_of(manager_cluster, "Job", namespace, name)
                evicted = condition(workload, "Evicted")
                return (workload["spec"].get("active") is False and evicted.get("reason") == "DeactivatedDueToAdmissionCheck"
                        and not manager_cluster.env.job_pods(namespace, name))

            wait_for(stopped, what="Kueue deactivating the running job once its check is rejected", timeout=120)
        finally:
            manager_cluster.env.delete_job(namespace, name)
    finally:
        dispatch(manager_cluster.kubeconfig, on=True)


def test_verify_fleet_passes_a_row_per_worker_and_fails_a_lost_one_with_kueues_reason(fleet, manager_cluster):
    from eks_gpu_training.verify import verify

    def fleet_rows() -> dict[str, Any]:
        return {row.item: row for row in verify(str(manager_cluster.kubeconfig), fleet=True) if row.item.startswith("multikueue-")}

    rows = fleet_rows()
    assert {item: row.status for item, row in rows.items()} == {
        "multikueue-admission-check": "pass", "multikueue-worker/east": "pass", "multikueue-worker/west": "pass"}, rows
    # Read through the kubeconfig in the manager's Secret: the worker's queues are the manager's.
    assert "its ClusterQueues" in rows["multikueue-worker/east"].evidence, rows["multikueue-worker/east"].evidence
    lost = fleet["west"].cluster
    lost.supervisor.stop("kube-apiserver")
    try:
        wait_for(lambda: active(manager_cluster, "west") == "False", what="the manager seeing worker west lost", timeout=90)
        rows = fleet_rows()
        said = condition(manager_cluster.env.get(KUEUE_API, "MultiKueueCluster", "west"), "Active")
        west = rows["multikueue-worker/west"]
        assert west.status == "fail", west
        assert f"not Active ({said['reason']}: {said['message']})" in west.evidence
        assert "its queues not checked: cannot reach the API server" in west.evidence
        assert rows["multikueue-worker/east"].status == "pass", rows["multikueue-worker/east"]
        assert "SomeActiveClusters" in rows["multikueue-admission-check"].evidence
    finally:
        back_up(lost)
    wait_for(lambda: active(manager_cluster, "west") == "True", what="the manager reaching worker west again", timeout=120)


def test_simulate_fleet_reports_each_jobs_worker_its_wait_and_each_workers_use(fleet, tmp_path):
    import json

    import yaml

    from eks_gpu_training.local.local_fleet import FleetMember, FleetMembers
    from eks_gpu_training.local.simulate import simulate_fleet

    members = FleetMembers("dev", FleetMember("manager", sum(WORKERS.values()), fleet["manager"].cluster.state),
                           tuple(FleetMember(name, WORKERS[name], fleet[name].cluster.state) for name in ("east", "west")))
    trace = tmp_path / "trace.yaml"
    # Four one-node jobs of ten minutes a minute apart: three run at once on research's three GPUs,
    # and research's quota of three on the manager holds the fourth until one ends.
    trace.write_text(yaml.safe_dump({"jobs": [{"name": f"fleet-{i}", "team": "research", "app": "rl-training", "kind": "Job",
                                               "nodes": 1, "duration": "10m", "submit": f"{i}m"} for i in range(4)]}))
    assert simulate_fleet(members, trace, speedup=20, out=tmp_path / "out", timeout=240) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {job["name"]: job["cluster"] in ("east", "west") for job in report["jobs"]} == {f"fleet-{i}": True for i in range(4)}
    clusters = {c["name"]: c for c in report["clusters"]}
    assert (set(clusters), sum(c["jobs"] for c in clusters.values())) == ({"east", "west"}, 4)
    assert {name: c["gpus"] for name, c in clusters.items()} == WORKERS
    assert all(0 < c["peak_gpus_used"] <= c["gpus"] for c in clusters.values())
    # The last job is admitted only once another ended (a sample, ten trace seconds apart, may see the end late).
    assert max(job["admitted"] for job in report["jobs"]) >= min(job["finished"] for job in report["jobs"]) - 30
    assert (tmp_path / "out" / "report.png").is_file()
