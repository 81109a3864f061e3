"""The fit probe: a training job sized by the library's defaults for one pool, run in a namespace of
the tests' own past Kueue so the scheduler alone decides where it lands. The placement tests run it
on every pool; the repair and health-gate tests use it to bring a Karpenter node up."""

from __future__ import annotations

from tests.support.manifests import unique

FIT_NAMESPACE = "fit-probe"
"""Where the fit probe runs: a namespace of the tests' own, with the training ServiceAccount. Not a
training namespace: there, with teams, Kueue holds a Job that names no queue, and the probe asks the
scheduler alone."""


def prepare_fit_namespace(cluster, namespace: str = FIT_NAMESPACE) -> None:
    """A probe's namespace, outside Kueue, and the training ServiceAccount its pods run as."""
    cluster.env.ensure_namespace(namespace)
    cluster.env.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
        "name": cluster.args.scheduling.service_account.name, "namespace": namespace}, "automountServiceAccountToken": False})


def fit_job(cluster, pool, *, karpenter: bool, nodes: int) -> dict:
    """The Job a training app on ``pool`` gets from the library, with every default (its requests
    sized by ``node_fit`` for the stack's DaemonSets), in ``FIT_NAMESPACE`` past Kueue so that the
    scheduler alone decides, its shared file system an emptyDir (the claim is the training
    namespace's). An app on a Karpenter pool runs without EFA (the configuration refuses EFA there)."""
    from eks_gpu_training.config import TrainingAppConfig
    from eks_gpu_training.workloads.scheduling_policies import training_job_spec
    from eks_gpu_training.workloads.templates import training_job
    from eks_gpu_training.workloads.training_spec import TOPOLOGY_ANNOTATIONS

    app = TrainingAppConfig(name=unique("fit")[:20], nodes=nodes, pool=pool.name, **({"efa": False} if karpenter else {}))
    spec = training_job_spec(app, cluster.args)
    job = training_job(spec)
    job["metadata"]["namespace"] = FIT_NAMESPACE
    job["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name", None)
    job["spec"]["suspend"] = False
    template = job["spec"]["template"]
    template["spec"]["volumes"] = [{"name": v["name"], "emptyDir": {}} if "persistentVolumeClaim" in v else v
                                   for v in template["spec"].get("volumes") or []]
    for annotation in TOPOLOGY_ANNOTATIONS.values():
        (template["metadata"].get("annotations") or {}).pop(annotation, None)
    for container in template["spec"]["containers"]:
        container.setdefault("image", "registry.k8s.io/pause:3.10")
    return job


def shorter_consolidation(env, pool: str):
    """Karpenter's pool removes an emptied node within seconds during the probe (dev's own 10m
    would keep it for the next test); returns what restores it afterwards."""
    nodepool = env.get("karpenter.sh/v1", "NodePool", pool)
    original = nodepool["spec"]["disruption"]["consolidateAfter"]
    env.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", pool,
                                           {"spec": {"disruption": {"consolidateAfter": "10s"}}})
    return lambda: env.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", pool,
                                                          {"spec": {"disruption": {"consolidateAfter": original}}})
