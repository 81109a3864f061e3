"""``Applier``'s reads and deletes through the official client's dynamic client: what they send and
how they read the answers. The answers come from a loopback HTTP server speaking the API server's
REST conventions (discovery, objects, ``Status`` bodies), so the client's own discovery, paths and
error classes run; what Kubernetes decides about the objects is the cluster tier's."""

from __future__ import annotations

import json
import tempfile
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from eks_gpu_training.local import platform
from eks_gpu_training.local.platform import Applier, ApplyError
from tests.support.json_handler import JsonHandler

DISCOVERY = {
    "/version": {"major": "1", "minor": "35", "gitVersion": "v1.35.0"},
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node",
         "verbs": ["get", "list", "delete", "patch"]}]},
    "/apis/batch/v1": {"kind": "APIResourceList", "groupVersion": "batch/v1", "resources": [
        {"name": "jobs", "singularName": "job", "namespaced": True, "kind": "Job",
         "verbs": ["get", "list", "delete", "patch"]}]},
}
JOB_PATH = "/apis/batch/v1/namespaces/training/jobs/rl-training"
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "rl-training", "namespace": "training", "uid": "u-1"}}
FORBIDDEN_PATH = "/api/v1/nodes/protected"
BUSY_PATH = "/apis/batch/v1/namespaces/training/jobs/busy"
"""A Job the server answers 504 Timeout for, with a Retry-After of 0, ``busy_answers`` times."""


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message}


class _ApiServer(JsonHandler):
    """Discovery, one Job, one Node the caller may not touch; every request recorded."""

    requests: list[tuple[str, str, dict, dict]] = []
    busy_answers = 0

    def _record(self) -> str:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        self.requests.append((self.command, url.path, parse_qs(url.query), body))
        return url.path

    def do_GET(self) -> None:
        path = self._record()
        if path in DISCOVERY:
            self.answer(200, DISCOVERY[path])
        elif path == JOB_PATH:
            self.answer(200, JOB)
        elif path == "/apis/batch/v1/namespaces/training/jobs":
            self.answer(200, {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": [JOB]})
        elif path == FORBIDDEN_PATH:
            self.answer(403, _status(403, "Forbidden", 'nodes "protected" is forbidden: User "alice" cannot get resource "nodes"'))
        else:
            self.answer(404, _status(404, "NotFound", f"{path.rsplit('/', 1)[-1]} not found"))

    def do_DELETE(self) -> None:
        path = self._record()
        if path == JOB_PATH:
            self.answer(200, {**JOB, "metadata": {**JOB["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}})
        elif path == FORBIDDEN_PATH:
            self.answer(403, _status(403, "Forbidden", 'nodes "protected" is forbidden: User "alice" cannot delete resource "nodes"'))
        else:
            self.answer(404, _status(404, "NotFound", f"{path.rsplit('/', 1)[-1]} not found"))


    def do_PATCH(self) -> None:
        path = self._record()
        if path == BUSY_PATH and _ApiServer.busy_answers:
            _ApiServer.busy_answers -= 1
            self.answer(504, _status(504, "Timeout", "Timeout: request did not complete within requested timeout"),
                        headers={"Retry-After": "0"})
        elif path == FORBIDDEN_PATH:
            self.answer(403, _status(403, "Forbidden", 'nodes "protected" is forbidden: User "alice" cannot patch resource "nodes"'))
        else:
            self.answer(200, self.requests[-1][3])


@pytest.fixture
def applier(tmp_path, monkeypatch):
    """An ``Applier`` on a kubeconfig naming the loopback server; the dynamic client's discovery
    cache in the test's own folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _ApiServer.requests = []
    _ApiServer.busy_answers = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ApiServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "local",
        "clusters": [{"name": "local", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "local", "user": {}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "local"}}],
    }))
    try:
        yield Applier(kubeconfig)
    finally:
        server.shutdown()
        server.server_close()


def _calls(method: str) -> list[tuple[str, dict, dict]]:
    return [(path, query, body) for verb, path, query, body in _ApiServer.requests if verb == method and path not in DISCOVERY]


def test_get_returns_the_object_the_server_holds_and_none_for_a_name_it_holds_none_of(applier):
    assert applier.get("batch/v1", "Job", "rl-training", "training") == JOB
    assert applier.get("batch/v1", "Job", "rl-training-2", "training") is None
    assert [path for path, _, _ in _calls("GET")] == [JOB_PATH, "/apis/batch/v1/namespaces/training/jobs/rl-training-2"]


def test_list_sends_the_label_selector_and_returns_the_items(applier):
    assert applier.list("batch/v1", "Job", "training", label_selector="kueue.x-k8s.io/queue-name") == [JOB]
    assert _calls("GET") == [("/apis/batch/v1/namespaces/training/jobs", {"labelSelector": ["kueue.x-k8s.io/queue-name"]}, {})]


def test_delete_sends_the_propagation_policy_and_grace_period_and_says_whether_there_was_an_object(applier):
    assert applier.delete("batch/v1", "Job", "rl-training", "training", propagation="Foreground", grace_seconds=0)
    assert not applier.delete("v1", "Node", "gone")
    assert _calls("DELETE") == [
        (JOB_PATH, {}, {"propagationPolicy": "Foreground", "gracePeriodSeconds": 0}),
        ("/api/v1/nodes/gone", {}, {"propagationPolicy": "Background"}),
    ]


def test_a_refused_read_or_delete_names_the_object_and_carries_the_servers_words(applier):
    with pytest.raises(ApplyError) as refused:
        applier.get("v1", "Node", "protected")
    assert str(refused.value) == 'Node protected not read: nodes "protected" is forbidden: User "alice" cannot get resource "nodes"'
    with pytest.raises(ApplyError) as refused:
        applier.delete("v1", "Node", "protected")
    assert str(refused.value) == ('Node protected not deleted: nodes "protected" is forbidden: '
                                  'User "alice" cannot delete resource "nodes"')


def test_an_apply_a_busy_server_timed_out_is_sent_again_and_a_refusal_is_not(applier):
    busy = {**JOB, "metadata": {"name": "busy", "namespace": "training"}}
    _ApiServer.busy_answers = 2
    assert applier.apply(busy)["metadata"]["name"] == "busy"
    assert [path for path, _, _ in _calls("PATCH")] == [BUSY_PATH] * 3
    _ApiServer.requests.clear()
    with pytest.raises(ApplyError) as refused:
        applier.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "protected"}})
    assert str(refused.value) == ('Node protected refused by the API server: nodes "protected" is forbidden: '
                                  'User "alice" cannot patch resource "nodes"')
    assert len(_calls("PATCH")) == 1


def test_a_server_busy_past_the_retry_window_fails_the_apply_with_its_words(applier, monkeypatch):
    monkeypatch.setattr(platform, "BUSY_RETRY_SECONDS", 0)
    _ApiServer.busy_answers = 5
    with pytest.raises(ApplyError) as refused:
        applier.apply({**JOB, "metadata": {"name": "busy", "namespace": "training"}})
    assert str(refused.value) == ("Job training/busy refused by the API server: "
                                  "Timeout: request did not complete within requested timeout")
