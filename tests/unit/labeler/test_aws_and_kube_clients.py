"""The labeler's two API calls, each through its real client: EC2 through boto3 with botocore's
Stubber (requests validated against the EC2 model), Kubernetes through the ``kubernetes`` client
against a local API server that records what it receives."""

from __future__ import annotations

import botocore.exceptions
import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.labeler import aws, kube
from tests.support.labeler_fakes import (
    INSTANCE_ID,
    NETWORK_NODES_3,
    NETWORK_NODES_4,
    NODE_NAME,
    PROVIDER_ID,
    FakeApiServer,
    node_object,
    stubbed_ec2,
    topology_response,
)


def test_describe_topology_asks_for_exactly_the_node_instance():
    ec2, stubber = stubbed_ec2()
    stubber.add_response("describe_instance_topology", topology_response(NETWORK_NODES_3), {"InstanceIds": [INSTANCE_ID]})
    with stubber:
        topology = aws.describe_topology(ec2, INSTANCE_ID)
    stubber.assert_no_pending_responses()
    assert topology == aws.InstanceTopology("p5.48xlarge", tuple(NETWORK_NODES_3))


def test_describe_topology_keeps_a_fourth_layer():
    ec2, stubber = stubbed_ec2()
    stubber.add_response(
        "describe_instance_topology", topology_response(NETWORK_NODES_4, "p6-b200.48xlarge"), {"InstanceIds": [INSTANCE_ID]}
    )
    with stubber:
        assert aws.describe_topology(ec2, INSTANCE_ID).network_nodes == tuple(NETWORK_NODES_4)


def test_unsupported_instance_type_has_no_topology():
    # EC2 leaves instances of types without topology out of the answer.
    ec2, stubber = stubbed_ec2()
    stubber.add_response("describe_instance_topology", {"Instances": []}, {"InstanceIds": [INSTANCE_ID]})
    with stubber:
        assert aws.describe_topology(ec2, INSTANCE_ID) is None


def test_ec2_errors_are_classified():
    ec2, stubber = stubbed_ec2()
    for code, status in (("RequestLimitExceeded", 503), ("InternalError", 500), ("UnauthorizedOperation", 403)):
        stubber.add_client_error("describe_instance_topology", code, http_status_code=status)
    errors = []
    with stubber:
        for _ in range(3):
            with pytest.raises(botocore.exceptions.ClientError) as caught:
                aws.describe_topology(ec2, INSTANCE_ID)
            errors.append(caught.value)
    throttled, internal, denied = errors
    assert aws.is_throttling(throttled)
    assert aws.is_transient(throttled)
    assert not aws.is_throttling(internal)
    assert aws.is_transient(internal)
    assert not aws.is_transient(denied)
    assert aws.is_transient(botocore.exceptions.EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com"))


def test_ec2_client_targets_the_region_with_bounded_retries():
    client = aws.ec2_client("eu-north-1")
    assert client.meta.region_name == "eu-north-1"
    assert client.meta.config.retries["total_max_attempts"] == 3
    assert client.meta.config.read_timeout == 20


def test_read_node_returns_provider_id_labels_and_resource_version():
    with FakeApiServer(node_object(labels={"environment": "prod"})) as server:
        node = kube.read_node(server.core_v1(), NODE_NAME)
    assert node.provider_id == PROVIDER_ID
    assert node.resource_version == "4711"
    assert node.labels["environment"] == "prod"
    (request,) = server.requests
    assert (request.method, request.path) == ("GET", f"/api/v1/nodes/{NODE_NAME}")


def test_the_exact_patch_the_client_sends():
    labels = {"topology.k8s.aws/network-node-layer-3": "nn-3333333333333333c"}
    with FakeApiServer(node_object()) as server:
        api = server.core_v1()
        kube.add_node_labels(api, kube.read_node(api, NODE_NAME), labels)
    (patch,) = server.patches()
    assert patch.method == "PATCH"
    assert patch.path == f"/api/v1/nodes/{NODE_NAME}"
    assert patch.content_type == "application/strategic-merge-patch+json"
    assert patch.body == {
        "metadata": {
            "labels": {"topology.k8s.aws/network-node-layer-3": "nn-3333333333333333c"},
            "resourceVersion": "4711",
        }
    }


def test_api_errors_are_classified():
    with FakeApiServer(node_object()) as server:
        server.failures = [409, 429, 503, 403]
        api = server.core_v1()
        statuses = []
        for _ in range(4):
            with pytest.raises(ApiException) as caught:
                kube.read_node(api, NODE_NAME)
            statuses.append((kube.api_status(caught.value), kube.is_transient(caught.value)))
    assert statuses == [(409, True), (429, True), (503, True), (403, False)]
