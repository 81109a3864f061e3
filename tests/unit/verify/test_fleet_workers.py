"""``verify --fleet`` on a MultiKueue manager: the AdmissionCheck's row and one row per worker,
judged from snapshots built of the objects the manager's stack makes (``multikueue_manager``) with
the status Kueue writes; the reads (the worker's kubeconfig from the manager's Secret, the worker's
queues through it) against stand-in API servers. The cluster tier runs it on a real fleet."""

from __future__ import annotations

import base64
import json
import threading
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from eks_gpu_training.verify import Snapshot, WorkerQueues, as_json, exit_status, judge_fleet, main
from eks_gpu_training.verify.fleet_workers import read_worker
from eks_gpu_training.verify.snapshot import api_client_of
from eks_gpu_training.workloads.multikueue_manager import (
    ADMISSION_CHECK, MULTIKUEUE_CONFIG, admission_checks_strategy, kubeconfig_secret_name, multikueue_admission_check,
    multikueue_cluster, multikueue_config,
)

from tests.support.json_handler import JsonHandler

QUEUES = ("research", "shared")


def active(obj: dict, status: bool = True, reason: str = "Active", message: str = "Connected") -> dict:
    obj["status"] = {"conditions": [{"type": "Active", "status": "True" if status else "False", "reason": reason, "message": message}]}
    return obj


def cluster_queue(name: str, checks: tuple[str, ...] = (ADMISSION_CHECK,), is_active: bool = True) -> dict:
    spec: dict[str, Any] = {"admissionChecksStrategy": admission_checks_strategy(list(checks))} if checks else {}
    return active({"metadata": {"name": name}, "spec": spec}, is_active, "Ready" if is_active else "AdmissionCheckInactive",
                  "Can admit new workloads" if is_active else "references inactive AdmissionCheck(s): multikueue")


def local_queues() -> list[dict]:
    return [{"metadata": {"namespace": "training", "name": "training"}, "spec": {"clusterQueue": "research"}},
            {"metadata": {"namespace": "shared", "name": "training"}, "spec": {"clusterQueue": "shared"}}]


def manager(workers=("east", "west"), **overrides) -> Snapshot:
    """A manager wired as its stack wires it, every worker reached."""
    fields: dict[str, Any] = {
        "admission_checks": [active(multikueue_admission_check(), message="The admission check is active")],
        "multikueue_clusters": [active(multikueue_cluster(worker)) for worker in workers],
        "multikueue_configs": [multikueue_config(list(workers))],
        "cluster_queues": [cluster_queue(name) for name in QUEUES],
        "local_queues": local_queues(),
    }
    return Snapshot(**{**fields, **overrides})


def mirrored() -> WorkerQueues:
    """A worker made from the same stack: the manager's queues, active, without the check."""
    return WorkerQueues([cluster_queue(name, checks=()) for name in QUEUES], local_queues())


def rows_of(snapshot: Snapshot, workers: dict[str, WorkerQueues] | None = None) -> dict:
    found = judge_fleet(snapshot, workers if workers is not None else {"east": mirrored(), "west": mirrored()})
    return {row.item: row for row in found}


def test_a_wired_fleet_passes_with_the_check_row_then_a_row_per_worker_in_the_configs_order():
    rows = judge_fleet(manager(workers=("west", "east")), {"east": mirrored(), "west": mirrored()})
    assert [(row.item, row.status) for row in rows] == [
        ("multikueue-admission-check", "pass"), ("multikueue-worker/west", "pass"), ("multikueue-worker/east", "pass")]
    assert rows[0].evidence == ("AdmissionCheck multikueue Active (Active: The admission check is active); "
                                "2 ClusterQueue(s) dispatch through it (research, shared).")
    assert rows[2].evidence == (f"MultiKueueCluster east Active (Active: Connected), 2nd of 2 in MultiKueueConfig {MULTIKUEUE_CONFIG}; "
                                "its ClusterQueues research, shared active and their 2 LocalQueues there.")


def test_a_lost_worker_fails_with_kueues_reason_and_message_and_the_others_pass():
    lost = active(multikueue_cluster("west"), False, "ClientConnectionFailed",
                  'Get "https://127.0.0.1:6443/api": dial tcp 127.0.0.1:6443: connect: connection refused')
    check = active(multikueue_admission_check(), reason="SomeActiveClusters", message="Inactive clusters: [west]")
    snapshot = manager(multikueue_clusters=[active(multikueue_cluster("east")), lost], admission_checks=[check])
    workers = {"east": mirrored(), "west": WorkerQueues(unread="cannot reach the API server at https://127.0.0.1:6443: Connection refused")}
    rows = rows_of(snapshot, workers)
    west = rows["multikueue-worker/west"]
    assert west.status == "fail"
    assert west.evidence == ('MultiKueueCluster west not Active (ClientConnectionFailed: Get "https://127.0.0.1:6443/api": dial tcp '
                             "127.0.0.1:6443: connect: connection refused): no job is dispatched to it; its queues not checked: "
                             "cannot reach the API server at https://127.0.0.1:6443: Connection refused.")
    assert "reachable from the manager" in west.fix
    assert "docs/fleet.md#the-credential" in west.fix
    assert rows["multikueue-worker/east"].status == "pass"
    assert rows["multikueue-admission-check"].status == "pass"
    assert "SomeActiveClusters: Inactive clusters: [west]" in rows["multikueue-admission-check"].evidence
    assert exit_status(list(rows.values())) == 1
    assert json.loads(as_json([west]))["rows"][0]["status"] == "fail"


def test_a_worker_kueue_has_not_judged_yet_fails_saying_so():
    snapshot = manager(multikueue_clusters=[multikueue_cluster("east"), active(multikueue_cluster("west"))])
    assert "not Active (no Active condition yet)" in rows_of(snapshot)["multikueue-worker/east"].evidence


def test_a_worker_missing_a_queue_or_with_an_inactive_one_fails_naming_each():
    lacking = WorkerQueues([cluster_queue("research", checks=(), is_active=False)], local_queues()[:1])
    row = rows_of(manager(), {"east": lacking, "west": mirrored()})["multikueue-worker/east"]
    assert row.status == "fail"
    assert [(g.reason, g.examples) for g in row.failures] == [
        ("missing on the worker", ("ClusterQueue shared", "LocalQueue shared/training")),
        ("not Active on the worker (AdmissionCheckInactive: references inactive AdmissionCheck(s): multikueue)", ("ClusterQueue research",)),
    ]
    assert "same teams" in row.fix


def test_a_worker_without_kueue_fails():
    row = rows_of(manager(), {"east": WorkerQueues(None, None), "west": mirrored()})["multikueue-worker/east"]
    assert (row.status, str(row.failures[0])) == ("fail", "1 queue not served on the worker (Kueue)")


def test_queues_not_read_from_here_pass_on_kueues_word_and_say_why():
    forbidden = WorkerQueues(unread="forbidden: the credentials may not get Secret kueue-system/multikueue-east")
    row = rows_of(manager(), {"east": forbidden, "west": mirrored()})["multikueue-worker/east"]
    assert row.status == "pass"
    assert row.evidence.endswith("; its queues not checked: forbidden: the credentials may not get Secret kueue-system/multikueue-east.")


def test_a_worker_in_no_config_and_a_config_entry_without_its_cluster_both_fail():
    snapshot = manager(multikueue_configs=[multikueue_config(["east", "north"])])
    rows = rows_of(snapshot)
    assert list(rows) == ["multikueue-admission-check", "multikueue-worker/east", "multikueue-worker/north", "multikueue-worker/west"]
    assert rows["multikueue-worker/north"].evidence == ("2nd of 2 in MultiKueueConfig eks-gpu-training-workers, but no "
                                                         "MultiKueueCluster north: Kueue counts it missing.")
    assert rows["multikueue-worker/west"].status == "fail"
    assert "in no MultiKueueConfig the AdmissionCheck names" in rows["multikueue-worker/west"].evidence


def test_a_cluster_queue_without_the_check_fails_the_check_row_it_runs_jobs_on_the_manager():
    snapshot = manager(cluster_queues=[cluster_queue("research"), cluster_queue("shared", checks=())])
    row = rows_of(snapshot)["multikueue-admission-check"]
    assert row.status == "fail"
    assert str(row.failures[0]) == "1 ClusterQueue without AdmissionCheck multikueue: its jobs run on the manager (shared)"
    assert "every ClusterQueue" in row.fix


def test_an_inactive_check_fails_with_kueues_reason():
    check = active(multikueue_admission_check(), False, "NoUsableClusters", "Inactive clusters: [east west]")
    row = rows_of(manager(admission_checks=[check]))["multikueue-admission-check"]
    assert row.status == "fail"
    assert "multikueue not Active (NoUsableClusters: Inactive clusters: [east west])" in row.evidence


@pytest.mark.parametrize(("overrides", "why"), [
    ({"admission_checks": None, "multikueue_clusters": None}, "Kueue on this cluster serves no MultiKueue objects (no Kueue, or MultiKueue off)"),
    ({"admission_checks": []}, "no AdmissionCheck of controller kueue.x-k8s.io/multikueue"),
    ({"multikueue_clusters": []}, "no MultiKueueCluster"),
])
def test_a_cluster_that_is_no_manager_fails_one_row_saying_why(overrides, why):
    (row,) = judge_fleet(manager(**overrides), {})
    assert (row.item, row.status) == ("multikueue-workers", "fail")
    assert row.evidence == f"{why}: this cluster is no MultiKueue manager."


# --- reading a worker through the manager's Secret -----------------------------------------------


class Served:
    """An API server stand-in: the bodies given by path, an empty list for any other path."""

    def __init__(self, answers: dict[str, tuple[int, dict]]):
        self.answers, self.paths = answers, []
        served = self

        class Handler(JsonHandler):
            def do_GET(self):
                path = self.path.split("?", 1)[0]
                served.paths.append(path)
                self.answer(*served.answers.get(path, (200, {"kind": "List", "metadata": {}, "items": []})))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def kubeconfig(server: str) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": server}}], "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": {"token": "not-a-real-token"}}]}


def listed(items: list[dict]) -> tuple[int, dict]:
    return 200, {"kind": "List", "metadata": {}, "items": items}


SECRET_PATH = f"/api/v1/namespaces/kueue-system/secrets/{kubeconfig_secret_name('east')}"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def test_the_workers_queues_are_read_through_the_kubeconfig_in_the_managers_secret():
    queues = mirrored()
    worker_answers = {f"{KUEUE}/clusterqueues": listed(queues.cluster_queues or []), f"{KUEUE}/localqueues": listed(local_queues())}
    with Served(worker_answers) as worker:
        encoded = base64.b64encode(json.dumps(kubeconfig(worker.url)).encode()).decode()
        with Served({SECRET_PATH: (200, {"kind": "Secret", "data": {"kubeconfig": encoded}})}) as manager_server:
            api = api_client_of(kubeconfig(manager_server.url))
            try:
                read = read_worker(api, multikueue_cluster("east"))
            finally:
                api.close()
    assert read == WorkerQueues(queues.cluster_queues, local_queues())
    assert manager_server.paths == [SECRET_PATH]
    assert sorted(worker.paths) == [f"{KUEUE}/clusterqueues", f"{KUEUE}/localqueues"]


def test_a_secret_the_credentials_may_not_get_leaves_the_queues_unread_saying_so():
    forbidden = (403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
    with Served({SECRET_PATH: forbidden}) as manager_server:
        api = api_client_of(kubeconfig(manager_server.url))
        try:
            read = read_worker(api, multikueue_cluster("east"))
        finally:
            api.close()
    assert read == WorkerQueues(unread="forbidden: the credentials may not get Secret kueue-system/multikueue-east")


def test_fleet_on_the_command_line_reads_the_multikueue_objects_and_prints_the_rows(tmp_path, capsys):
    snapshot = manager(workers=("east",))
    answers = {f"{KUEUE}/admissionchecks": listed(snapshot.admission_checks or []),
               f"{KUEUE}/multikueueclusters": listed(snapshot.multikueue_clusters or []),
               f"{KUEUE}/multikueueconfigs": listed(snapshot.multikueue_configs or []),
               f"{KUEUE}/clusterqueues": listed(snapshot.cluster_queues or []), f"{KUEUE}/localqueues": listed(local_queues()),
               SECRET_PATH: (404, {"kind": "Status", "code": 404, "reason": "NotFound"})}
    with Served(answers) as manager_server:
        path = tmp_path / "kubeconfig.json"
        path.write_text(json.dumps(kubeconfig(manager_server.url)))
        main(["--kubeconfig", str(path), "--fleet", "--json"])
    rows = {row["item"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["multikueue-admission-check"]["status"] == "pass"
    assert rows["multikueue-worker/east"]["status"] == "pass"
    assert rows["multikueue-worker/east"]["detail"].endswith("its queues not checked: no Secret kueue-system/multikueue-east.")
    assert {f"{KUEUE}/admissionchecks", f"{KUEUE}/multikueueclusters", SECRET_PATH} <= set(manager_server.paths)
