"""The labeler's pure logic: provider ids, regions, and which labels a node lacks."""

from __future__ import annotations

import pytest

from eks_gpu_training.labeler.topology import (
    invalid_layers,
    InstanceLocation,
    differing_labels,
    label_patch,
    layer_label,
    missing_labels,
    parse_provider_id,
    region_of_zone,
    topology_labels,
)
from tests.support.labeler_fakes import NETWORK_NODES_3, NETWORK_NODES_4

L1, L2, L3, L4 = (layer_label(n) for n in (1, 2, 3, 4))


def test_layer_labels_are_the_eks_well_known_keys():
    assert [L1, L2, L3, L4] == [
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "topology.k8s.aws/network-node-layer-4",
    ]


def test_provider_id_gives_instance_zone_and_region():
    assert parse_provider_id("aws:///us-west-2b/i-0123456789abcdef0") == InstanceLocation(
        instance_id="i-0123456789abcdef0", zone="us-west-2b", region="us-west-2"
    )
    assert parse_provider_id("aws:///us-gov-west-1a/i-0abc1234").region == "us-gov-west-1"


@pytest.mark.parametrize(
    "provider_id",
    [
        None,
        "",
        "aws:///us-west-2b/fargate-ip-10-0-1-23.us-west-2.compute.internal",
        "eks-hybrid:///us-west-2/my-cluster/mi-0123456789abcdef0",
        "aws://us-west-2b/i-0123456789abcdef0",
        "aws:///us-west-2b/i-XYZ",
    ],
)
def test_provider_ids_of_non_ec2_nodes_are_rejected(provider_id):
    with pytest.raises(ValueError, match="is not an EC2 provider id"):
        parse_provider_id(provider_id)


@pytest.mark.parametrize(
    ("zone", "region"),
    [
        ("us-west-2b", "us-west-2"),
        ("eu-central-1a", "eu-central-1"),
        ("ap-southeast-3c", "ap-southeast-3"),
        ("us-gov-east-1a", "us-gov-east-1"),
        ("cn-northwest-1b", "cn-northwest-1"),
        ("us-west-2-lax-1a", "us-west-2"),
        ("us-east-1-wl1-bos-wlz-1", "us-east-1"),
    ],
)
def test_region_is_derived_from_the_zone(zone, region):
    assert region_of_zone(zone) == region


def test_region_of_a_zone_id_or_garbage_is_refused():
    for zone in ("usw2-az2", "us-west-2", "west"):
        with pytest.raises(ValueError, match="is not an availability zone name"):
            region_of_zone(zone)


def test_three_layer_response_gives_labels_top_to_bottom():
    assert missing_labels(NETWORK_NODES_3, {}) == {
        L1: "nn-1111111111111111a",
        L2: "nn-2222222222222222b",
        L3: "nn-3333333333333333c",
    }


def test_four_layer_response_gives_a_fourth_label_closest_to_the_instance():
    labels = missing_labels(NETWORK_NODES_4, {})
    assert list(labels) == [L1, L2, L3, L4]
    assert labels[L4] == "nn-4444444444444444d"


def test_existing_labels_are_never_part_of_the_result_whatever_their_value():
    existing = {L1: "nn-set-by-someone-else", L2: NETWORK_NODES_3[1], "role": "gpu-training"}
    assert missing_labels(NETWORK_NODES_3, existing) == {L3: NETWORK_NODES_3[2]}


def test_node_with_all_three_layers_set_needs_nothing():
    existing = {L1: "a", L2: "b", L3: "c"}
    assert missing_labels(NETWORK_NODES_3, existing) == {}


def test_node_with_three_layers_set_only_gains_the_fourth():
    existing = topology_labels(NETWORK_NODES_3)
    assert missing_labels(NETWORK_NODES_4, existing) == {L4: NETWORK_NODES_4[3]}


def test_differing_values_are_reported_as_node_value_and_ec2_value():
    existing = {L1: "nn-other", L2: NETWORK_NODES_3[1]}
    assert differing_labels(NETWORK_NODES_3, existing) == {L1: ("nn-other", NETWORK_NODES_3[0])}


def test_a_network_node_that_is_not_a_label_value_is_left_out_and_the_other_layers_kept():
    network_nodes = ["nn-ok", "has space", "nn-3"]
    assert topology_labels(network_nodes) == {layer_label(1): "nn-ok", layer_label(3): "nn-3"}
    assert invalid_layers(network_nodes) == {layer_label(2): "has space"}
    assert missing_labels(network_nodes, {}) == {layer_label(1): "nn-ok", layer_label(3): "nn-3"}


def test_a_provider_id_with_an_empty_zone_is_an_ec2_instance_without_a_region():
    # The AWS cloud provider accepts aws:////<instance-id> (it reads the id from the last segment).
    assert parse_provider_id("aws:////i-0123456789abcdef0") == InstanceLocation(
        instance_id="i-0123456789abcdef0", zone="", region=None
    )


def test_patch_carries_only_the_labels_and_the_resource_version_that_was_read():
    assert label_patch({L3: "nn-3"}, "4711") == {"metadata": {"labels": {L3: "nn-3"}, "resourceVersion": "4711"}}
    assert label_patch({L3: "nn-3"}, None) == {"metadata": {"labels": {L3: "nn-3"}}}
