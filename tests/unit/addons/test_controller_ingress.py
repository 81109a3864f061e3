"""The NetworkPolicies of the Kueue, JobSet and Kubeflow Trainer namespaces: webhooks from the
cluster's subnets only, metrics from the monitoring namespace only. The manifests against the
Kubernetes schema, the ports against the charts' own, and where each stack takes its blocks from.
No CNI enforces NetworkPolicy on the local cluster, so what they block is not shown there."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from eks_gpu_training.addons import controller_ingress as ci
from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS, ConfigError, subnet_layout
from eks_gpu_training.verify.stack import load_stack_args
from tests.support.builders import without_karpenter
from tests.support.harness import run_main, stack_config

PROJECT = "eks-gpu-training"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
INGRESS = ci.ControllerIngress(api_server_cidrs=["10.0.0.0/18", "10.0.64.0/18"], monitoring_namespace="observability")


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_policy_passes_the_kubernetes_schema(version):
    manifest = ci.network_policy_manifest("kueue-system", INGRESS, (ci.WEBHOOK_PORT, ci.KUEUE_VISIBILITY_PORT))
    assert kubernetes_validate.validate(manifest, version, strict=True) == version


def test_webhooks_from_the_api_servers_blocks_and_metrics_from_the_monitoring_namespace_only():
    spec = ci.network_policy_manifest("jobset-system", INGRESS)["spec"]
    assert spec["podSelector"] == {}
    assert spec["policyTypes"] == ["Ingress"]
    webhooks, metrics = spec["ingress"]
    assert webhooks == {"ports": [{"protocol": "TCP", "port": 9443}],
                        "from": [{"ipBlock": {"cidr": "10.0.0.0/18"}}, {"ipBlock": {"cidr": "10.0.64.0/18"}}]}
    assert metrics == {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}],
                       "ports": [{"protocol": "TCP", "port": 8443}]}


def test_without_known_blocks_the_webhook_ports_are_open_and_nothing_else():
    spec = ci.network_policy_manifest("jobset-system", ci.ControllerIngress(None, "monitoring"))["spec"]
    assert spec["ingress"][0] == {"ports": [{"protocol": "TCP", "port": 9443}]}
    assert spec["ingress"][1]["ports"] == [{"protocol": "TCP", "port": 8443}]


def _container_ports(out, chart: str) -> dict[str, int]:
    [deployment] = [yaml.safe_load(p.read_text()) for p in (out / "manifests" / "charts" / chart).glob("deployment_*.yaml")]
    [container] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c.get("ports")]
    return {port["name"]: port["containerPort"] for port in container["ports"]}


def test_the_ports_are_the_charts_webhook_and_metrics_ports(rendered_stack):
    _, out, _ = rendered_stack
    expected = {"kueue": {"webhook-server": ci.WEBHOOK_PORT, "metrics": ci.METRICS_PORT, "visibility": ci.KUEUE_VISIBILITY_PORT},
                "jobset": {"webhook": ci.WEBHOOK_PORT, "metrics": ci.METRICS_PORT},
                "kubeflow-trainer": {"webhook": ci.WEBHOOK_PORT, "metrics": ci.METRICS_PORT}}
    for chart, ports in expected.items():
        if (out / "manifests" / "charts" / chart).is_dir():
            assert ports.items() <= _container_ports(out, chart).items(), chart


def in_cluster_config(**settings) -> dict:
    """prod as the in-cluster half takes it (as ``tests/unit/platform/test_gpu_training_in_cluster.py``)."""
    config = without_karpenter(stack_config("prod"))
    config[f"{PROJECT}:healthGate"] = {"enabled": False}
    config[f"{PROJECT}:inCluster"] = {"enabled": True, "kubeconfig": "/home/ml/.kube/config", **settings}
    config[f"{PROJECT}:storage"] = {**config[f"{PROJECT}:storage"], "fsx": {"enabled": False}}
    config[f"{PROJECT}:s3Buckets"] = []
    return config


def _policies(graph) -> dict[str, dict]:
    return {r.inputs["metadata"]["namespace"]: r.inputs["spec"] for r in graph.of_type(POLICY)
            if r.inputs["metadata"]["name"] == ci.NAME}


def test_dev_admits_webhooks_from_its_created_networks_private_subnets(dev_graph):
    policies = _policies(dev_graph)
    assert sorted(policies) == ["jobset-system", "kueue-system"]  # dev runs no TrainJob
    private = sorted(subnet_layout(load_stack_args("dev").network).private.values())
    for spec in policies.values():
        assert sorted(peer["ipBlock"]["cidr"] for peer in spec["ingress"][0]["from"]) == private
        assert spec["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert [p["port"] for p in policies["kueue-system"]["ingress"][0]["ports"]] == [9443, 8082]


def test_prod_reads_its_adopted_subnets_blocks_from_ec2(prod_graph):
    policies = _policies(prod_graph)
    assert sorted(policies) == ["jobset-system", "kubeflow-system", "kueue-system"]
    subnets = [s.id for s in load_stack_args("prod").network.subnets]
    # The reads run concurrently, so their order is the event loop's: each subnet is read, in any order.
    assert set(subnets) <= {args["id"] for token, args in prod_graph.invokes if token == "aws:ec2/getSubnet:getSubnet"}
    for spec in policies.values():
        assert len(spec["ingress"][0]["from"]) == len(subnets)


def test_the_in_cluster_half_takes_its_blocks_from_the_settings_or_warns_that_webhooks_are_open(caplog):
    given = run_main(in_cluster_config(apiServerCidrs=["10.20.0.0/16"]))
    assert given.error is None, repr(given.error)
    assert {s["ingress"][0]["from"][0]["ipBlock"]["cidr"] for s in _policies(given).values()} == {"10.20.0.0/16"}
    assert not [token for token, _ in given.invokes if token == "aws:ec2/getSubnet:getSubnet"]
    unknown = run_main(in_cluster_config())
    assert unknown.error is None
    assert all("from" not in s["ingress"][0] for s in _policies(unknown).values())
    assert "inCluster.apiServerCidrs is empty" in caplog.text


@pytest.mark.parametrize(("key", "value", "path"), [
    ("monitoring", {"namespace": "Monitoring"}, "monitoring.namespace"),
    ("inCluster", {"enabled": True, "kubeconfig": "/k", "apiServerCidrs": ["10.0.0.1/16"]}, "inCluster.apiServerCidrs"),
])
def test_a_bad_monitoring_namespace_or_cidr_is_refused_before_anything_registers(key, value, path):
    config = stack_config("dev")
    config[f"{PROJECT}:{key}"] = value
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert any(p.path.startswith(path) for p in graph.error.problems), graph.error.problems
