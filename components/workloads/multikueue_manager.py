"""A MultiKueue manager: the objects that make Kueue dispatch each job of a ClusterQueue to one worker
cluster, where it runs whole (Kueue's API kueue.x-k8s.io/v1beta2, ``multikueue_types.go``, v0.19.2).

- per worker, a Secret in Kueue's namespace holding the worker's kubeconfig under ``kubeconfig`` (a
  ``MultiKueueWorker``'s output) and a ``MultiKueueCluster`` reading it: its ``Active`` condition says
  whether Kueue reaches the worker, with the reason when not;
- one ``MultiKueueConfig`` listing the workers, most preferred first;
- the ``AdmissionCheck`` of controller ``kueue.x-k8s.io/multikueue`` on it, which the manager's
  ClusterQueues name in ``admissionChecksStrategy`` (``admission_checks_strategy``). A job is then
  admitted on the manager's quota, copied to every worker and runs on the first that admits it; the
  others' copies are deleted. On the manager, Kueue leaves the topology request to the worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..addons.kueue import KUEUE_NAMESPACE
from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config import ConfigError, Problem
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config.multikueue import MULTIKUEUE_MAX_WORKERS
from .kueue_flavors import KUEUE_API_VERSION, kueue_metadata
from .training_job import _custom, _dependencies

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The AdmissionCheck controller of MultiKueue (``MultiKueueControllerName``)."""
ADMISSION_CHECK = "multikueue"
"""The AdmissionCheck the manager's ClusterQueues name."""
MULTIKUEUE_CONFIG = "eks-gpu-training-workers"
"""The MultiKueueConfig listing the workers."""
KUBECONFIG_KEY = "kubeconfig"
"""The Secret key Kueue reads a worker's kubeconfig from (``MultiKueueConfigSecretKey``)."""


def kubeconfig_secret_name(worker: str) -> str:
    """The Secret in Kueue's namespace holding the worker's kubeconfig."""
    return f"multikueue-{worker}"


def multikueue_cluster(worker: str) -> dict[str, Any]:
    """The worker's MultiKueueCluster, reading its kubeconfig from ``kubeconfig_secret_name``."""
    return {"apiVersion": KUEUE_API_VERSION, "kind": "MultiKueueCluster", "metadata": kueue_metadata(worker),
            "spec": {"clusterSource": {"kubeConfig": {"location": kubeconfig_secret_name(worker), "locationType": "Secret"}}}}


def multikueue_config(workers: Sequence[str]) -> dict[str, Any]:
    """The MultiKueueConfig of the workers, in order of preference."""
    return {"apiVersion": KUEUE_API_VERSION, "kind": "MultiKueueConfig", "metadata": kueue_metadata(MULTIKUEUE_CONFIG),
            "spec": {"clusters": list(workers)}}


def multikueue_admission_check() -> dict[str, Any]:
    """The AdmissionCheck that dispatches through ``MULTIKUEUE_CONFIG``."""
    return {"apiVersion": KUEUE_API_VERSION, "kind": "AdmissionCheck", "metadata": kueue_metadata(ADMISSION_CHECK),
            "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                     "parameters": {"apiGroup": KUEUE_API_VERSION.split("/")[0], "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG}}}


def admission_checks_strategy(checks: Sequence[str]) -> dict[str, Any]:
    """A ClusterQueue's ``admissionChecksStrategy`` running ``checks`` on every flavor (MultiKueue
    refuses to run per flavor: such a ClusterQueue stays inactive)."""
    return {"admissionChecks": [{"name": check} for check in checks]}


def kubeconfig_secret(worker: str, kubeconfig: str, namespace: str = KUEUE_NAMESPACE) -> dict[str, Any]:
    """The Secret of the worker's kubeconfig."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": kueue_metadata(kubeconfig_secret_name(worker), namespace), "stringData": {KUBECONFIG_KEY: kubeconfig}}


@dataclass
class MultiKueueWorkerTarget:
    """A worker as the manager reaches it."""

    name: str
    """Its MultiKueueCluster's name (a DNS label)."""
    kubeconfig: pulumi.Input[str]
    """Its kubeconfig (``MultiKueueWorker.kubeconfig``, or a stack reference's output of it)."""


@documented_args
@dataclass
class MultiKueueManagerArgs:
    """Arguments of ``MultiKueueManager``."""

    workers: Sequence[MultiKueueWorkerTarget]
    """The workers, most preferred first (at least one, at most 20, each name once)."""
    kueue_namespace: str = KUEUE_NAMESPACE
    """Kueue's namespace, where the kubeconfig Secrets live (Kueue reads them nowhere else). Default: kueue-system."""
    cluster: Optional[ClusterInput] = field(default=None)
    """The manager cluster (a ``ClusterRef``, ``EksCluster`` or ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


def manager_problems(path: str, workers: Sequence[MultiKueueWorkerTarget]) -> list[Problem]:
    """Between one and twenty workers, each name once."""
    problems = []
    if not workers or len(workers) > MULTIKUEUE_MAX_WORKERS:
        problems.append(Problem(f"{path}.workers", f"{len(workers)} workers; a manager dispatches to 1-{MULTIKUEUE_MAX_WORKERS}"))
    names = [w.name for w in workers]
    problems += [Problem(f"{path}.workers[{i}].name", f"'{n}' is workers[{names.index(n)}]'s too")
                 for i, n in enumerate(names) if names.index(n) != i]
    return problems


@documented_component(MultiKueueManagerArgs)
class MultiKueueManager(pulumi.ComponentResource):
    """The manager's side of MultiKueue: each worker's kubeconfig Secret and MultiKueueCluster, the
    MultiKueueConfig and the AdmissionCheck its ClusterQueues name. Make it depend on the Kueue release."""

    admission_check: pulumi.Output[str]
    """The AdmissionCheck's name, for the ClusterQueues' ``admissionChecksStrategy``."""

    def __init__(self, name: str, args: Optional[MultiKueueManagerArgs] = None, opts: Optional[pulumi.ResourceOptions] = None,
                 **fields: Any):
        args = component_args(MultiKueueManagerArgs, "MultiKueueManager", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"MultiKueueManager({name})")
        problems = manager_problems(f"MultiKueueManager({name})", args.workers)
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:MultiKueueManager", name, None, opts)
        after = _dependencies(opts)
        clusters = []
        for worker in args.workers:
            body = kubeconfig_secret(worker.name, "", args.kueue_namespace)
            secret = k8s.core.v1.Secret(
                f"{name}-{worker.name}-kubeconfig", metadata=body["metadata"], type=body["type"],
                string_data={KUBECONFIG_KEY: pulumi.Output.secret(worker.kubeconfig)},
                opts=pulumi.ResourceOptions(parent=self, depends_on=after))
            clusters.append(_custom(f"{name}-{worker.name}", multikueue_cluster(worker.name),
                                    pulumi.ResourceOptions(parent=self, depends_on=[*after, secret])))
        config = _custom(f"{name}-config", multikueue_config([w.name for w in args.workers]),
                         pulumi.ResourceOptions(parent=self, depends_on=[*after, *clusters]))
        check = _custom(f"{name}-admission-check", multikueue_admission_check(),
                        pulumi.ResourceOptions(parent=self, depends_on=[*after, config]))
        self.admission_check = check.id.apply(lambda _: ADMISSION_CHECK)
        self.register_outputs({"admissionCheck": self.admission_check})
