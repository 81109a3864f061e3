"""Each team's files are its own, as the API server, the volume binder and the scheduler decide:
a team's namespace holds the claim of its team's directory only, a pod cannot name another team's
claim, and a team's training pods are admitted under the namespace's Pod Security level as the
team's non-root user, holding no capability."""

from __future__ import annotations

import copy

from kubernetes.client.exceptions import ApiException

from eks_gpu_training.config.team_settings import team_gid
from eks_gpu_training.workloads.training_storage import claim_name, persistent_volume_name

from tests.support.environment import wait_for
from tests.support.manifests import pod_manifest, unique

TEAMS = {"training": "pretraining", "research": "research"}
"""prod's namespaces and their teams."""
SMALL = {"cpu": "100m", "memory": "64Mi"}
"""What the probe pods request: the namespaces' quotas require requests."""


def test_each_team_namespaces_claim_is_bound_to_its_teams_directory_and_nothing_else(prod_cluster):
    env = prod_cluster.env
    for namespace, team in TEAMS.items():
        claim = env.get("v1", "PersistentVolumeClaim", claim_name(team), namespace)
        assert claim is not None, f"{namespace} has no claim {claim_name(team)}"
        assert (claim["status"]["phase"], claim["spec"]["volumeName"]) == ("Bound", persistent_volume_name(namespace, team))
        volume = env.get("v1", "PersistentVolume", persistent_volume_name(namespace, team))
        assert volume["spec"]["claimRef"]["namespace"] == namespace
        assert volume["spec"]["csi"]["volumeAttributes"]["mountname"].endswith(f"/teams/{team}")
        # No claim of the whole file system is left in a team's namespace.
        assert env.get("v1", "PersistentVolumeClaim", claim_name(None), namespace) is None


def test_a_pod_naming_another_teams_claim_is_never_scheduled(prod_cluster):
    env = prod_cluster.env
    name = unique("other-teams-claim")
    # research's pod names pretraining's claim: claims are namespaced, so it names one that does not exist.
    env.apply(pod_manifest(name, "research", requests=SMALL, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name("pretraining")}}]))
    try:
        message = env.expect_unschedulable("research", name)
        assert f'persistentvolumeclaim "{claim_name("pretraining")}" not found' in message
    finally:
        env.delete_pod("research", name)


def test_broken_variant_a_claim_on_another_teams_volume_never_binds(prod_cluster):
    """The volume is pre-bound to its own namespace's claim (``claimRef``): a claim in research that
    names training's volume stays Pending, and the volume keeps its claim."""
    env = prod_cluster.env
    name = unique("steal")
    volume = persistent_volume_name("training", "pretraining")
    env.apply({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "research"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume,
                 "resources": {"requests": {"storage": "1200Gi"}}},
    })
    try:
        # The binder tries at once and on each resync; it never binds a volume whose claimRef names another claim.
        wait_for(lambda: (env.get("v1", "PersistentVolumeClaim", name, "research") or {}).get("status", {}).get("phase") == "Pending",
                 what="the stolen claim Pending")
        assert env.get("v1", "PersistentVolume", volume)["spec"]["claimRef"]["namespace"] == "training"
    finally:
        env.delete("v1", "PersistentVolumeClaim", name, "research")


def _team_pod(prod_cluster, namespace: str) -> dict:
    """The pod the stack's training template makes in ``namespace``, as a CPU-only pod (no GPU: a
    bare GPU pod is not the question here), with its security contexts and its team's claim."""
    job = prod_cluster.platform_object("Job", "rl-training")
    template = copy.deepcopy(job["spec"]["template"]["spec"])
    (container,) = template["containers"]
    pod = pod_manifest(unique("team-pod"), namespace, requests=SMALL, securityContext=template["securityContext"],
                       volumes=[v for v in template["volumes"] if "persistentVolumeClaim" in v])
    pod["spec"]["containers"][0].update(securityContext=container["securityContext"],
                                        volumeMounts=[m for m in container["volumeMounts"] if m["name"] == "shared-fs"])
    return pod


def test_a_teams_training_pod_is_admitted_as_its_non_root_user_and_binds_its_claim(prod_cluster):
    env = prod_cluster.env
    pod = _team_pod(prod_cluster, "training")
    gid = team_gid(next(t for t in prod_cluster.args.scheduling.teams if t.name == "pretraining"))
    assert pod["spec"]["securityContext"] | {"seccompProfile": None} == {
        "seccompProfile": None, "runAsNonRoot": True, "runAsUser": gid, "runAsGroup": gid, "fsGroup": gid}
    assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env.apply(pod)
    name = pod["metadata"]["name"]
    try:
        # The scheduler binds it only with its claim Bound (VolumeBinding): the team's own.
        env.expect_bound("training", name)
        assert env.pod("training", name).spec.volumes[0].persistent_volume_claim.claim_name == claim_name("pretraining")
    finally:
        env.delete_pod("training", name)


def test_broken_variant_a_capability_beyond_baseline_is_refused_by_pod_security(prod_cluster):
    env = prod_cluster.env
    pod = _team_pod(prod_cluster, "training")
    pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    try:
        env.core.create_namespaced_pod("training", pod, dry_run="All")
    except ApiException as error:
        assert error.status == 403
        assert "violates PodSecurity" in error.body
        assert "SYS_ADMIN" in error.body
    else:
        raise AssertionError("the API server admitted a training pod adding SYS_ADMIN")
