"""The offline render of a MultiKueue fleet: the README's manager (dev, naming its workers by stack)
and a worker (dev in us-east-1) render and pass the check. The manager's render reads a worker of
its project from that worker's own offline render, the kubeconfig only its deployment knows as a
placeholder; a worker of another project stays unknown, and the render says so."""

from __future__ import annotations

import json

import pytest
import yaml

from eks_gpu_training.offline.check import check_render
from eks_gpu_training.offline.render import RenderError, render
from eks_gpu_training.offline.render.registrations import stack_reference_outputs
from eks_gpu_training.platform.stack_files import locate_stack
from tests.support.clusters import stack_variant
from tests.support.fleet_stacks import MANAGER, WORKERS, write_fleet_project

EAST = WORKERS["east"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The README's fleet stacks in a project of their own, the current folder while a test renders
    them (Pulumi runs a stack's program in its project's folder)."""
    folder = tmp_path_factory.mktemp("fleet-project")
    write_fleet_project(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        yield folder


@pytest.fixture(scope="module")
def renders(project, chart_sources, tmp_path_factory):
    """The manager and the east worker rendered with their charts: out folder and summary by stack."""
    found = {}
    for stack in (MANAGER, EAST):
        out = tmp_path_factory.mktemp(f"render-{stack}")
        found[stack] = out, render(stack, out, project_root=project, picture=False, sources=chart_sources)
    return found


def manifest(out, name: str):
    return yaml.safe_load((out / "manifests" / name).read_text())


@pytest.mark.parametrize("stack", [MANAGER, EAST])
def test_the_manager_and_a_worker_render_and_pass_the_check(renders, stack):
    out, _ = renders[stack]
    report = check_render(out)
    assert report.failures == [], stack
    assert report.skipped == [], stack
    assert report.checked["chart objects"] > 0


def test_the_managers_render_holds_what_multikueue_needs_with_each_worker_read_by_stack_reference(renders):
    out, summary = renders[MANAGER]
    document = json.loads((out / "resources.json").read_text())
    references = [r for r in document["resources"] if r["type"] == "pulumi:pulumi:StackReference"]
    assert sorted(r["inputs"]["name"] for r in references) == sorted(WORKERS.values())
    for name in WORKERS:
        # The worker's kubeconfig is a secret: a render never writes one out.
        assert manifest(out, f"secret_kueue-system_multikueue-{name}.yaml")["stringData"] == "<secret>"
        assert manifest(out, f"multikueuecluster_{name}.yaml")["spec"]["clusterSource"]["kubeConfig"]["location"] == f"multikueue-{name}"
    assert manifest(out, "multikueueconfig_eks-gpu-training-workers.yaml")["spec"] == {"clusters": list(WORKERS)}
    assert manifest(out, "admissioncheck_multikueue.yaml")["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    for stack in WORKERS.values():
        assert (f"stack reference {stack}: its outputs are those of its own offline render; one known only once it is "
                f"deployed reads <unknown: OUTPUT of stack {stack}>") in summary.notes
    assert "<unknown: OUTPUT of stack NAME>" in document["legend"]


def test_a_worker_of_the_project_is_read_from_its_own_render_its_kubeconfig_a_secret_placeholder(project):
    outputs = stack_reference_outputs(locate_stack(EAST, project))
    assert outputs.outputs["multiKueueKubeconfig"] == f"<unknown: multiKueueKubeconfig of stack {EAST}>"
    assert outputs.secret_names >= {"multiKueueKubeconfig"}
    assert set(outputs.outputs) >= {"clusterName", "kubeconfig", "gpuNodeGroupNames", "multiKueueKubeconfig"}


def manager_variant(project, name: str, workers: list[dict]) -> str:
    def change(config):
        config["eks-gpu-training:multiKueue"] = {"manager": True, "workers": workers}

    stack_variant(project, "dev", change, name=name)
    return name


def test_a_worker_of_another_project_stays_unknown_and_the_render_says_so(project, tmp_path):
    stack = manager_variant(project, "fleet-far", [{"name": "far", "stack": "acme/other/far"}])
    summary = render(stack, tmp_path, project_root=project, picture=False, charts=False)
    assert summary.render.stack_references == {"acme/other/far": False}
    assert "stack reference acme/other/far: no stack file of this project, so its outputs are unknown in this render" in summary.notes
    assert manifest(tmp_path, "secret_kueue-system_multikueue-far.yaml")["stringData"] == "<secret>"


@pytest.mark.parametrize(("workers", "path", "text"), [
    ([{"name": "east", "stack": EAST}, {"name": "again", "stack": EAST}], "multiKueue.workers[1]", f"stack {EAST} is workers[0] too"),
    ([{"name": "east", "stack": EAST}, {"name": "east", "stack": WORKERS["west"]}], "multiKueue.workers[1].name", "is workers[0]'s name too"),
    ([{"name": "other", "stack": "fleet-other"}], "multiKueue.workers[0]",
     "worker other queues namespace training in ClusterQueue 'science', the manager in 'research'"),
])
def test_the_render_refuses_a_manager_naming_a_worker_twice_or_one_that_does_not_mirror_it(project, tmp_path, workers, path, text):
    def other_team(config):
        config["eks-gpu-training:multiKueue"] = {"worker": True}
        config["eks-gpu-training:scheduling"]["teams"][0]["name"] = "science"

    stack_variant(project, "dev", other_team, name="fleet-other")
    stack = manager_variant(project, "fleet-bad", workers)
    with pytest.raises(RenderError) as refused:
        render(stack, tmp_path, project_root=project, picture=False, charts=False)
    assert path in str(refused.value)
    assert text in str(refused.value)
