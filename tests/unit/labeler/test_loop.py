"""The labeler's loop end to end: a real EC2 client answered by botocore's Stubber, the real
Kubernetes client against a local API server, and no real sleeping (the idle function records the
delays instead)."""

from __future__ import annotations

import io
import json
import logging
import uuid

import pytest

from eks_gpu_training.labeler.logs import JsonFormatter
from eks_gpu_training.labeler.loop import Backoff, Labeler, Outcome
from eks_gpu_training.labeler.topology import layer_label, topology_labels
from tests.support.labeler_fakes import (
    INSTANCE_ID,
    NETWORK_NODES_3,
    NETWORK_NODES_4,
    NODE_NAME,
    FakeApiServer,
    node_object,
    stubbed_ec2,
    topology_response,
)

L1, L2, L3, L4 = (layer_label(n) for n in (1, 2, 3, 4))
INTERVAL = 600.0
DESCRIBE = "describe_instance_topology"
ONLY_THIS_INSTANCE = {"InstanceIds": [INSTANCE_ID]}


class Harness:
    """One labeler wired to a fake API server and a stubbed EC2 client, with its JSON log lines."""

    def __init__(self, server: FakeApiServer):
        self.server = server
        self.ec2, self.stubber = stubbed_ec2()
        self.regions: list[str] = []
        self.delays: list[float] = []
        self.stream = io.StringIO()
        logger = logging.getLogger(f"test-labeler-{uuid.uuid4()}")
        handler = logging.StreamHandler(self.stream)
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        self.labeler = Labeler(
            node_name=NODE_NAME,
            nodes=server.core_v1(),
            ec2_for_region=self._ec2_for_region,
            logger=logger,
            idle=self.delays.append,
            interval_seconds=INTERVAL,
            backoff=Backoff(base=2.0, cap=300.0, jitter=lambda low, high: high),
        )

    def _ec2_for_region(self, region: str):
        self.regions.append(region)
        return self.ec2

    def run(self, checks: int) -> None:
        with self.stubber:
            self.labeler.run(max_checks=checks)
        self.stubber.assert_no_pending_responses()

    def logs(self) -> list[dict]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def events(self) -> list[str]:
        return [entry["event"] for entry in self.logs()]

    def node_labels(self) -> dict[str, str]:
        return self.server.nodes[NODE_NAME]["metadata"]["labels"]


@pytest.fixture
def harness_for():
    servers = []

    def make(node) -> Harness:
        server = FakeApiServer(node).__enter__()
        servers.append(server)
        return Harness(server)

    yield make
    for server in servers:
        server.__exit__(None, None, None)


def test_three_layer_response_is_written_with_one_patch(harness_for):
    h = harness_for(node_object())
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=1)
    (patch,) = h.server.patches()
    assert patch.content_type == "application/strategic-merge-patch+json"
    assert patch.body == {"metadata": {"labels": topology_labels(NETWORK_NODES_3), "resourceVersion": "4711"}}
    assert {k: h.node_labels()[k] for k in (L1, L2, L3)} == dict(zip((L1, L2, L3), NETWORK_NODES_3, strict=True))
    assert h.regions == ["us-west-2"]
    assert h.delays == [INTERVAL]
    (added,) = [e for e in h.logs() if e["event"] == "labels_added"]
    assert added["node"] == NODE_NAME
    assert added["labels"] == topology_labels(NETWORK_NODES_3)
    assert added["level"] == "info"
    assert added["instanceType"] == "p5.48xlarge"


def test_four_layer_response_adds_four_labels(harness_for):
    h = harness_for(node_object())
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_4, "p6-b200.48xlarge"), ONLY_THIS_INSTANCE)
    h.run(checks=1)
    (patch,) = h.server.patches()
    assert patch.body["metadata"]["labels"] == dict(zip((L1, L2, L3, L4), NETWORK_NODES_4, strict=True))


def test_existing_labels_are_left_untouched_and_a_differing_value_is_reported(harness_for):
    h = harness_for(node_object(labels={L1: "nn-set-by-ccm", L2: NETWORK_NODES_3[1]}))
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=1)
    (patch,) = h.server.patches()
    assert patch.body == {"metadata": {"labels": {L3: NETWORK_NODES_3[2]}, "resourceVersion": "4711"}}
    assert h.node_labels()[L1] == "nn-set-by-ccm"
    (differs,) = [e for e in h.logs() if e["event"] == "label_differs_from_ec2"]
    assert differs["labels"] == {L1: {"node": "nn-set-by-ccm", "ec2": NETWORK_NODES_3[0]}}
    assert differs["level"] == "warning"


def test_node_with_all_three_labels_set_gets_no_patch_at_all(harness_for):
    h = harness_for(node_object(labels=topology_labels(NETWORK_NODES_3)))
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=3)
    assert h.server.patches() == []
    assert [r.method for r in h.server.requests] == ["GET", "GET", "GET"]
    # EC2 is asked once; the re-checks only read the node. The steady state is logged once.
    assert h.regions == ["us-west-2"]
    assert h.events().count("complete") == 1
    assert h.delays == [INTERVAL] * 3


def test_node_with_three_labels_set_gains_only_the_fourth_layer(harness_for):
    h = harness_for(node_object(labels=topology_labels(NETWORK_NODES_3)))
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_4), ONLY_THIS_INSTANCE)
    h.run(checks=1)
    (patch,) = h.server.patches()
    assert patch.body["metadata"]["labels"] == {L4: NETWORK_NODES_4[3]}


def test_a_removed_label_is_put_back_at_the_next_check_without_asking_ec2_again(harness_for):
    h = harness_for(node_object())
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    with h.stubber:
        assert h.labeler.check() is Outcome.LABELLED
        del h.node_labels()[L2]
        assert h.labeler.check() is Outcome.LABELLED
    second = h.server.patches()[1]
    assert second.body == {"metadata": {"labels": {L2: NETWORK_NODES_3[1]}, "resourceVersion": "4712"}}


def test_unsupported_instance_type_is_logged_once_and_the_pod_idles(harness_for):
    h = harness_for(node_object(labels={"node.kubernetes.io/instance-type": "m7i.xlarge"}))
    for _ in range(3):
        h.stubber.add_response(DESCRIBE, {"Instances": []}, ONLY_THIS_INSTANCE)
    h.run(checks=3)
    assert h.server.patches() == []
    reports = [e for e in h.logs() if e["event"] == "no_topology"]
    assert len(reports) == 1
    assert reports[0]["instanceType"] == "m7i.xlarge"
    assert reports[0]["instanceId"] == INSTANCE_ID
    # Idle at the slow interval, never the error backoff: nothing is failing.
    assert h.delays == [INTERVAL] * 3


def test_ec2_throttling_backs_off_exponentially_then_labels(harness_for):
    h = harness_for(node_object())
    h.stubber.add_client_error(DESCRIBE, "RequestLimitExceeded", http_status_code=503, expected_params=ONLY_THIS_INSTANCE)
    h.stubber.add_client_error(DESCRIBE, "RequestLimitExceeded", http_status_code=503, expected_params=ONLY_THIS_INSTANCE)
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=3)
    assert h.delays == [2.0, 4.0, INTERVAL]
    throttled = [e for e in h.logs() if e["event"] == "throttled"]
    assert [e["retryInSeconds"] for e in throttled] == [2.0, 4.0]
    assert all(e["level"] == "warning" and "RequestLimitExceeded" in e["error"] for e in throttled)
    assert len(h.server.patches()) == 1


def test_backoff_doubles_up_to_the_cap_and_resets_after_success(harness_for):
    h = harness_for(node_object())
    for _ in range(10):
        h.stubber.add_client_error(DESCRIBE, "InternalError", http_status_code=500, expected_params=ONLY_THIS_INSTANCE)
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=11)
    assert h.delays == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0, INTERVAL]
    assert h.labeler.backoff.failures == 0


def test_backoff_jitter_draws_between_half_the_ceiling_and_the_ceiling():
    bounds = []
    backoff = Backoff(base=2.0, cap=300.0, jitter=lambda low, high: bounds.append((low, high)) or low)
    assert [backoff.next_delay() for _ in range(3)] == [1.0, 2.0, 4.0]
    assert bounds == [(1.0, 2.0), (2.0, 4.0), (4.0, 8.0)]


def test_a_label_set_by_another_controller_between_read_and_patch_is_not_overwritten(harness_for):
    h = harness_for(node_object())
    server = h.server
    original = server._respond

    def ccm_writes_after_first_read(method, path, body):
        status, payload = original(method, path, body)
        if method == "GET" and len(server.requests) == 1:
            node = server.nodes[NODE_NAME]["metadata"]
            node["labels"][L1] = "nn-set-by-ccm"
            node["resourceVersion"] = "4712"
        return status, payload

    server._respond = ccm_writes_after_first_read
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=2)
    first, second = h.server.patches()
    assert first.body["metadata"]["resourceVersion"] == "4711"  # refused with 409 Conflict
    assert second.body == {"metadata": {"labels": {L2: NETWORK_NODES_3[1], L3: NETWORK_NODES_3[2]}, "resourceVersion": "4712"}}
    assert h.node_labels()[L1] == "nn-set-by-ccm"
    assert h.delays == [2.0, INTERVAL]
    assert "retrying" in h.events()


def test_api_server_errors_are_retried_with_backoff(harness_for):
    h = harness_for(node_object())
    h.server.failures = [503, 429]
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=3)
    assert h.delays == [2.0, 4.0, INTERVAL]
    assert h.events()[:2] == ["retrying", "throttled"]
    assert len(h.server.patches()) == 1


def test_permission_errors_are_logged_as_errors_and_retried_not_raised(harness_for):
    h = harness_for(node_object())
    h.stubber.add_client_error(DESCRIBE, "UnauthorizedOperation", http_status_code=403, expected_params=ONLY_THIS_INSTANCE)
    h.run(checks=1)
    (failure,) = h.logs()
    assert failure["event"] == "check_failed"
    assert failure["level"] == "error"
    assert "UnauthorizedOperation" in failure["error"]
    assert h.delays == [2.0]


def test_node_without_provider_id_yet_is_retried(harness_for):
    h = harness_for(node_object(provider_id=None))
    h.run(checks=2)
    assert h.delays == [2.0, 4.0]
    assert h.events() == ["retrying", "retrying"]


def test_node_that_is_not_an_ec2_instance_is_reported_once_and_idles(harness_for):
    h = harness_for(node_object(provider_id="eks-hybrid:///us-west-2/gpu-training-prod/mi-0123456789abcdef0"))
    h.run(checks=2)
    assert h.events() == ["not_ec2"]
    assert h.delays == [INTERVAL, INTERVAL]
    assert h.server.patches() == []


def test_every_log_line_is_one_json_object(harness_for):
    h = harness_for(node_object())
    h.stubber.add_client_error(DESCRIBE, "RequestLimitExceeded", http_status_code=503, expected_params=ONLY_THIS_INSTANCE)
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=2)
    lines = h.stream.getvalue().splitlines()
    assert len(lines) == 2
    for line in lines:
        entry = json.loads(line)
        assert {"time", "level", "logger", "event", "node"} <= set(entry)


def test_a_node_whose_provider_id_names_no_zone_is_labelled_in_its_labelled_region(harness_for):
    h = harness_for(node_object(labels={"topology.kubernetes.io/region": "eu-west-1"}, provider_id=f"aws:////{INSTANCE_ID}"))
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=1)
    assert h.regions == ["eu-west-1"]
    assert {k: h.node_labels()[k] for k in (L1, L2, L3)} == dict(zip((L1, L2, L3), NETWORK_NODES_3, strict=True))


def test_without_zone_or_region_label_the_clusters_region_is_used_and_else_retried(harness_for):
    h = harness_for(node_object(provider_id=f"aws:////{INSTANCE_ID}"))
    h.labeler.default_region = "us-east-2"
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    h.run(checks=1)
    assert h.regions == ["us-east-2"]
    assert len(h.server.patches()) == 1

    h = harness_for(node_object(provider_id=f"aws:////{INSTANCE_ID}"))
    h.run(checks=1)
    assert h.events() == ["retrying"]
    assert h.server.patches() == []


def test_one_invalid_network_node_leaves_out_its_layer_only_and_is_reported(harness_for):
    h = harness_for(node_object())
    nodes = [NETWORK_NODES_3[0], "not a label!", NETWORK_NODES_3[2]]
    h.stubber.add_response(DESCRIBE, topology_response(nodes), ONLY_THIS_INSTANCE)
    h.run(checks=1)
    (patch,) = h.server.patches()
    assert patch.body["metadata"]["labels"] == {L1: NETWORK_NODES_3[0], L3: NETWORK_NODES_3[2]}
    (invalid,) = [e for e in h.logs() if e["event"] == "invalid_label_value"]
    assert invalid["labels"] == {L2: "'not a label!'"}
    assert invalid["level"] == "warning"


def test_sigterm_during_the_ec2_call_sends_no_patch(harness_for):
    h = harness_for(node_object())
    stop = []

    def describe_then_sigterm(region):
        stop.append("SIGTERM")  # arrives while the EC2 call is under way
        return h.ec2

    h.labeler.ec2_for_region = describe_then_sigterm
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    with h.stubber:
        h.labeler.run(stopped=lambda: bool(stop), max_checks=1)
    assert h.server.patches() == []
    assert h.events() == ["stopped"]


def test_an_error_in_the_idle_step_is_logged_and_the_loop_goes_on(harness_for, monkeypatch):
    h = harness_for(node_object(labels=dict(zip((L1, L2, L3), NETWORK_NODES_3, strict=True))))
    h.stubber.add_response(DESCRIBE, topology_response(NETWORK_NODES_3), ONLY_THIS_INSTANCE)
    slept = []
    monkeypatch.setattr("eks_gpu_training.labeler.loop.time.sleep", slept.append)
    clock = iter(range(0, 10_000, 300))
    monkeypatch.setattr("eks_gpu_training.labeler.loop.time.monotonic", lambda: next(clock))

    def broken_idle(seconds):
        raise OSError(30, "Read-only file system")

    h.labeler.idle = broken_idle
    h.run(checks=2)
    assert h.events() == ["complete", "idle_failed", "idle_failed"]
    assert slept  # it waited instead of spinning
