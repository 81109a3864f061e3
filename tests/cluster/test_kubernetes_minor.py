"""The local control plane runs the Kubernetes minor the stack names (``cluster.kubernetesVersion``),
not the default one: a stack of another minor gets an API server, controller manager and scheduler
of that release, built from its own wrapper module."""

from __future__ import annotations

import pytest
from kubernetes import client

from eks_gpu_training.local import build as builds

from tests.support.clusters import stack_variant, start

MINORS = [m for m in builds.KUBERNETES_BY_MINOR if builds.KUBERNETES_BY_MINOR[m] is not builds.KUBERNETES]
"""The minors the shipped stacks do not name (the cluster tier's clusters run theirs)."""


@pytest.fixture(scope="module", params=MINORS)
def other_minor_cluster(request, tmp_path_factory):
    minor = request.param
    component = builds.KUBERNETES_BY_MINOR[minor]
    if not builds.is_built(component):
        # CI does not build it: a second Kubernetes build (23 min cold on 2 cores) would take a cold
        # run past its 75-minute target (docs/benchmarks.md, "CI's time").
        pytest.skip(f"the {minor} control plane ({component.name} {component.version}) is not built in "
                    f"{builds.cache_root()}; `eks-gpu-training-local up` of a {minor} stack builds it")
    folder = tmp_path_factory.mktemp("minor")

    def other_minor(config):
        config["eks-gpu-training:cluster"] = {**config["eks-gpu-training:cluster"], "kubernetesVersion": minor}

    name = f"dev-{minor.replace('.', '-')}"
    stack_path = stack_variant(folder, "dev", other_minor, name=name)
    for running in start(name, folder / "state", stack_path=stack_path, bare=True):
        yield minor, running


def test_a_stack_of_another_minor_runs_on_that_minors_control_plane(other_minor_cluster):
    minor, cluster = other_minor_cluster
    version = client.VersionApi(cluster.env.api).get_code()
    assert version.git_version == builds.KUBERNETES_BY_MINOR[minor].version
    nodes = cluster.env.core.list_node().items
    assert nodes
    assert all(n.status.conditions for n in nodes)
