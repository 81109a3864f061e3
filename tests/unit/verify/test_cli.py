"""``eks-gpu-training-verify`` as a command: what it reads and how, its exit codes and its two
outputs. The API server here is a stand-in that serves canned lists over HTTP (what the client
sends, pages, and error answers are what is tested); judging a real control plane is the cluster
tier's."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from eks_gpu_training.addons.verifier_role import VERIFY_READS
from eks_gpu_training.verify import Row, Snapshot, as_json, main, read_snapshot, table, verify
from eks_gpu_training.verify.cli import _wants_colour
from eks_gpu_training.verify.snapshot import SNAPSHOT_FIELDS, ClusterUnreadable
from tests.support.cluster_objects import SEED_CLASSES, node, pdb, system_node, training_pods
from tests.support.harness import PROJECT_ROOT, stack_file
from tests.support.json_handler import JsonHandler
from eks_gpu_training.platform.stack_files import stack_file_name

STATUS_FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'poddisruptionbudgets.policy is forbidden: User "ci" cannot list resource "poddisruptionbudgets" in API group "policy" at the cluster scope',
    "reason": "Forbidden",
    "code": 403,
}


class FakeApiServer:
    """Answers GETs of list paths with the objects given per resource, records every request."""

    def __init__(self, objects: dict[str, list[dict]], errors: dict[str, tuple[int, dict]] | None = None, page_size: int = 0,
                 metadata_last: bool = False):
        self.objects, self.errors, self.page_size, self.metadata_last = objects, errors or {}, page_size, metadata_last
        self.requests: list[tuple[str, str, dict]] = []
        server = self

        class Handler(JsonHandler):

            def do_GET(self):
                url = urlparse(self.path)
                query = parse_qs(url.query)
                server.requests.append(("GET", url.path, query))
                resource = url.path.rsplit("/", 1)[-1]
                if resource in server.errors:
                    return self.answer(*server.errors[resource])
                if resource not in server.objects:
                    return self.answer(404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": "the server could not find the requested resource"})
                items = server.objects[resource]
                start = int(query.get("continue", ["0"])[0])
                end = start + server.page_size if server.page_size else len(items)
                metadata = {"resourceVersion": "1"} | ({"continue": str(end)} if end < len(items) else {})
                if server.metadata_last:
                    return self.answer(200, {"kind": "List", "apiVersion": "v1", "items": items[start:end], "metadata": metadata})
                self.answer(200, {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": items[start:end]})

            def _refuse(self):
                server.requests.append((self.command, self.path, {}))
                self.answer(405, {"kind": "Status", "code": 405})

            do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def paths(self) -> list[str]:
        return [path for _, path, _ in self.requests]


def kubeconfig(tmp_path, server: str, name: str = "test") -> str:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {server}
contexts:
- name: {name}
  context: {{cluster: {name}, user: {name}}}
current-context: {name}
users:
- name: {name}
  user: {{token: not-a-real-token}}
"""
    )
    return str(path)


def healthy_objects() -> dict[str, list[dict]]:
    return {
        "nodes": [system_node("system-0"), node("gpu-0"), node("gpu-1")],
        "pods": training_pods("rl-training", ["gpu-0", "gpu-1"]),
        "poddisruptionbudgets": [pdb("rl-training", "training", "rl-training-multi", min_available=2)],
        "priorityclasses": list(SEED_CLASSES),
        # Read with --stack only; a cluster without Kueue serves no clusterqueues or localqueues.
        "resourcequotas": [],
        "persistentvolumeclaims": [],
        "daemonsets": [],
        "rolebindings": [],
        "clusterrolebindings": [],
        "validatingadmissionpolicies": [],
        "validatingadmissionpolicybindings": [],
    }


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# --- exit codes ------------------------------------------------------------------------------------


def test_a_healthy_cluster_exits_0_with_a_table_of_the_seed_and_health_rows(tmp_path, capsys):
    with FakeApiServer(healthy_objects()) as server:
        status, out, err = run(capsys, "--kubeconfig", kubeconfig(tmp_path, server.url))
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "DETAIL"]
    assert [line.split()[0] for line in lines[1:9]] == [
        "gpu-device-plugin", "efa-device-plugin", "priority-classes", "pod-disruption-budgets",
        "gpu-taints", "one-pod-per-node", "topology-labels", "topology-aware-spread",
    ]
    assert lines[-1] == "12 checks: 10 pass, 0 fail, 2 skip"


def test_a_failing_row_exits_1_and_prints_what_to_do_under_it(tmp_path, capsys):
    objects = healthy_objects()
    objects["poddisruptionbudgets"] = []
    with FakeApiServer(objects) as server:
        status, out, _ = run(capsys, "--kubeconfig", kubeconfig(tmp_path, server.url))
    assert status == 1
    lines = out.splitlines()
    (index,) = [i for i, line in enumerate(lines) if line.startswith("pod-disruption-budgets")]
    assert lines[index].split()[1] == "fail"
    assert lines[index + 1].lstrip().startswith("fix: run `pulumi up` to recreate the job's PDB")
    assert lines[-1] == "12 checks: 9 pass, 1 fail, 2 skip"


def test_an_unreachable_api_server_exits_2_with_a_one_line_reason(tmp_path, capsys):
    port = closed_port()
    status, out, err = run(capsys, "--kubeconfig", kubeconfig(tmp_path, f"https://127.0.0.1:{port}"))
    assert status == 2
    assert out == ""
    assert err == f"eks-gpu-training-verify: cannot read the cluster: cannot reach the API server at https://127.0.0.1:{port}: Failed to establish a new connection: [Errno 111] Connection refused\n"


def test_the_command_prints_no_traceback_for_an_unreachable_cluster(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "eks_gpu_training.verify", "--kubeconfig", kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert "cannot reach the API server" in result.stderr


def test_a_forbidden_read_exits_2_naming_the_verb_and_resource_it_needs(tmp_path, capsys):
    with FakeApiServer(healthy_objects(), errors={"poddisruptionbudgets": (403, STATUS_FORBIDDEN)}) as server:
        status, out, err = run(capsys, "--kubeconfig", kubeconfig(tmp_path, server.url))
    assert status == 2
    assert out == ""
    assert err == (
        "eks-gpu-training-verify: cannot read the cluster: forbidden: the credentials may not list poddisruptionbudgets "
        "(policy/v1) in all namespaces; grant 'list' on 'poddisruptionbudgets' of API group 'policy' "
        "(the stack's read-only ClusterRole does, with verify.clusterRole: true)\n"
    )


def test_rejected_credentials_exit_2(tmp_path, capsys):
    unauthorized = {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"}
    with FakeApiServer(healthy_objects(), errors={"nodes": (401, unauthorized)}) as server:
        status, _, err = run(capsys, "--kubeconfig", kubeconfig(tmp_path, server.url))
    assert status == 2
    assert "unauthorized: the API server at http://127.0.0.1:" in err
    assert len(err.splitlines()) == 1


def test_a_missing_kubeconfig_or_context_exits_2(tmp_path, capsys):
    status, _, err = run(capsys, "--kubeconfig", str(tmp_path / "absent.yaml"))
    assert status == 2
    assert err.endswith("absent.yaml: no such file\n")
    status, _, err = run(capsys, "--kubeconfig", kubeconfig(tmp_path, "https://127.0.0.1:1"), "--context", "elsewhere")
    assert status == 2
    assert "elsewhere" in err
    assert len(err.splitlines()) == 1


def test_without_any_kubeconfig_it_says_where_one_is_looked_for(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    status, _, err = run(capsys)
    assert status == 2
    assert err == (
        "eks-gpu-training-verify: cannot read the cluster: no kubeconfig: pass --kubeconfig, set $KUBECONFIG or write "
        "~/.kube/config (aws eks update-kubeconfig --name <cluster>)\n"
    )


def test_something_other_than_an_api_server_exits_2(tmp_path, capsys):
    class NotKubernetes(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), NotKubernetes)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        status, _, err = run(capsys, "--kubeconfig", kubeconfig(tmp_path, f"http://127.0.0.1:{httpd.server_address[1]}"))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert status == 2
    assert "answered something other than JSON" in err


def test_an_invalid_stack_file_exits_2_before_reading_the_cluster(tmp_path, capsys):
    bad = tmp_path / stack_file_name("bad")
    bad.write_text("config:\n  aws:region: us-west-2\n  eks-gpu-training:cluster: {name: c}\n")
    with FakeApiServer(healthy_objects()) as server:
        status, _, err = run(capsys, "--kubeconfig", kubeconfig(tmp_path, server.url), "--stack", str(bad))
    assert status == 2
    assert server.requests == []
    assert err.startswith(f"eks-gpu-training-verify: --stack {bad}: ")
    assert "network" in err
    assert len(err.splitlines()) == 1


# --- what it reads -------------------------------------------------------------------------------


def test_it_only_lists_the_seeds_resources_without_a_stack(tmp_path):
    with FakeApiServer(healthy_objects()) as server:
        verify(kubeconfig=kubeconfig(tmp_path, server.url))
    assert {method for method, _, _ in server.requests} == {"GET"}
    # Read side by side, so in no fixed order.
    assert sorted(server.paths) == ["/api/v1/nodes", "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets", "/apis/scheduling.k8s.io/v1/priorityclasses"]


def test_with_a_stack_it_also_lists_quotas_claims_daemonsets_and_kueues_queues(tmp_path):
    with FakeApiServer({**healthy_objects(), "clusterqueues": [], "localqueues": []}) as server:
        verify(kubeconfig=kubeconfig(tmp_path, server.url), stack=stack_file("prod", PROJECT_ROOT))
    assert sorted(server.paths) == sorted(read.path for read in VERIFY_READS if read.wanted(with_stack=True, with_fleet=False))
    assert {"/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "/apis/kueue.x-k8s.io/v1beta2/localqueues"} <= set(server.paths)


def test_every_read_fills_a_snapshot_field_and_every_field_has_a_read():
    assert set(SNAPSHOT_FIELDS) == {read.resource for read in VERIFY_READS}
    assert set(SNAPSHOT_FIELDS.values()) == set(Snapshot.__dataclass_fields__)


def test_it_reads_every_page_of_a_long_list(tmp_path):
    objects = healthy_objects()
    objects["nodes"] = [system_node("system-0")] + [node(f"gpu-{i}", layers=None) for i in range(5)]
    with FakeApiServer(objects, page_size=2) as server:
        snapshot = read_snapshot(kubeconfig(tmp_path, server.url))
    assert [n["metadata"]["name"] for n in snapshot.nodes] == ["system-0", "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    node_reads = [query for _, path, query in server.requests if path == "/api/v1/nodes"]
    assert [q.get("continue") for q in node_reads] == [None, ["2"], ["4"]]
    assert all(q["limit"] == ["500"] for q in node_reads)


def test_a_list_whose_metadata_comes_after_its_items_is_still_read_page_by_page(tmp_path):
    # The next page is asked for ahead only when the head of a page names it; otherwise after the parse.
    objects = healthy_objects()
    objects["nodes"] = [system_node("system-0")] + [node(f"gpu-{i}", layers=None) for i in range(5)]
    with FakeApiServer(objects, page_size=2, metadata_last=True) as server:
        snapshot = read_snapshot(kubeconfig(tmp_path, server.url))
    assert [n["metadata"]["name"] for n in snapshot.nodes] == ["system-0", "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    assert [q.get("continue") for _, path, q in server.requests if path == "/api/v1/nodes"] == [None, ["2"], ["4"]]


def test_the_snapshot_keeps_the_api_servers_json_as_it_came(tmp_path):
    objects = healthy_objects()
    with FakeApiServer(objects) as server:
        snapshot = read_snapshot(kubeconfig(tmp_path, server.url))
    assert snapshot == Snapshot(nodes=objects["nodes"], pods=objects["pods"], pod_disruption_budgets=objects["poddisruptionbudgets"], priority_classes=objects["priorityclasses"])


def test_a_cluster_without_kueues_crds_fails_the_kueue_row_instead_of_stopping(tmp_path):
    with FakeApiServer(healthy_objects()) as server:
        rows = verify(kubeconfig=kubeconfig(tmp_path, server.url), stack="prod", project_dir=PROJECT_ROOT)
    (kueue,) = [r for r in rows if r.item == "kueue-queues"]
    assert kueue.status == "fail"
    assert "Kueue's CRDs are not installed" in kueue.evidence


def test_verify_raises_cluster_unreadable_for_python_callers(tmp_path):
    with pytest.raises(ClusterUnreadable, match="cannot reach the API server"):
        verify(kubeconfig=kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}"))


# --- outputs ---------------------------------------------------------------------------------------


ROWS = [
    Row("gpu-device-plugin", "pass", "2 GPU nodes offer every GPU of their type."),
    Row("pod-disruption-budgets", "fail", "job training/a: pod a-0 is selected by no PDB.", "run `pulumi up`."),
    Row("topology-labels", "skip", "no GPU pool has 3 or more nodes"),
]


def test_json_output_is_rows_of_item_status_and_detail(tmp_path, capsys):
    with FakeApiServer(healthy_objects()) as server:
        status, out, _ = run(capsys, "--kubeconfig", kubeconfig(tmp_path, server.url), "--json")
    document = json.loads(out)
    assert status == 0
    assert list(document) == ["rows"]
    assert all(list(r) == ["item", "status", "detail", "failures"] for r in document["rows"])
    assert document["rows"][0] == {"item": "gpu-device-plugin", "status": "pass", "detail": "2 GPU nodes offer every GPU of their type (2 × p5.48xlarge: 8 each).", "failures": []}


def test_examples_sets_how_many_failing_objects_each_group_names(tmp_path, capsys):
    objects = healthy_objects()
    for gpu_node in objects["nodes"][1:]:
        gpu_node["spec"]["taints"] = []
    with FakeApiServer(objects) as server:
        status, out, _ = run(capsys, "--kubeconfig", kubeconfig(tmp_path, server.url), "--examples", "1", "--json")
    (taints,) = [r for r in json.loads(out)["rows"] if r["item"] == "gpu-taints"]
    assert status == 1
    assert taints["failures"] == [{"noun": "GPU node", "reason": "without the nvidia.com/gpu NoSchedule taint", "count": 2, "examples": ["gpu-0"]}]
    assert taints["detail"].startswith("2 GPU nodes without the nvidia.com/gpu NoSchedule taint (gpu-0 and 1 more).")


@pytest.mark.parametrize("examples", ["0", "-1", "three"])
def test_examples_below_one_are_refused(capsys, examples):
    with pytest.raises(SystemExit) as exit_info:
        main(["--examples", examples])
    assert exit_info.value.code == 2
    assert "--examples: expected a whole number of 1 or more" in capsys.readouterr().err


def test_a_fails_json_detail_carries_the_evidence_and_what_to_do():
    assert json.loads(as_json(ROWS))["rows"][1] == {
        "item": "pod-disruption-budgets",
        "status": "fail",
        "detail": "job training/a: pod a-0 is selected by no PDB. Fix: run `pulumi up`.",
        "failures": [],
    }


def test_the_table_aligns_its_columns_and_has_no_colour_off_a_terminal():
    text = table(ROWS)
    assert "\033[" not in text
    lines = text.splitlines()
    assert lines == [
        "CHECK                   STATUS  DETAIL",
        "gpu-device-plugin       pass    2 GPU nodes offer every GPU of their type.",
        "pod-disruption-budgets  fail    job training/a: pod a-0 is selected by no PDB.",
        "                                fix: run `pulumi up`.",
        "topology-labels         skip    no GPU pool has 3 or more nodes",
        "3 checks: 1 pass, 1 fail, 1 skip",
    ]


def test_the_table_colours_statuses_on_a_terminal_without_moving_the_columns():
    coloured = table(ROWS, colour=True)
    assert "\033[31mfail  \033[0m" in coloured
    assert "\033[32mpass  \033[0m" in coloured
    assert re.sub(r"\033\[\d+m", "", coloured) == table(ROWS)


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert _wants_colour(Stream(True))
    assert not _wants_colour(Stream(False))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _wants_colour(Stream(True))
