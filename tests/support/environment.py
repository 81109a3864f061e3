"""The cluster tier's environment: one local cluster as its tests see it, and ``expect_*`` helpers
that wait for what the API server, the scheduler and the controllers decide.

Every apply, read and delete goes through the product's own ``Applier`` (the client
``eks-gpu-training-local up`` applies the platform with), so the tests exercise the server-side
apply a user's cluster gets, not one of their own. Its field manager is the platform's: applying
part of an object the platform applied would take the rest away, so a test that changes part of
one (a label, a limit, a selector) patches it through the typed APIs instead, and applies only
whole objects.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from eks_gpu_training.facts.quantity import parse_quantity
from eks_gpu_training.healthgate.gate_api import list_items
from eks_gpu_training.local.platform import Applier, ApplyError

from tests.support.kueue import KUEUE_API, QUEUE_LABEL, Accounting, condition, conditions, job_uids, read_accounting

DEFAULT_TIMEOUT = 60.0
KNOWN_STATE_TIMEOUT = 120.0
JOB_TIMEOUT = 180.0
"""How long a job may take to run: Kueue's admission, and a Karpenter node launched for it."""
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The label JobSet puts on its Jobs' pods: the JobSet's name (a TrainJob's JobSet is named after it)."""
GROUP_APIS = {"JobSet": "jobset.x-k8s.io/v1alpha2", "TrainJob": "trainer.kubeflow.org/v1alpha1"}
"""The job kinds run as a group of Jobs, by their API version."""
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
"""The label the Job controller puts on its pods: the Job's uid."""
REFUSALS = (" is forbidden: ", " is invalid: ")
"""How the API server words a 403 Forbidden and a 422 Invalid (``apierrors.NewForbidden``,
``NewInvalid``): a refusal by RBAC, admission or validation, not an error."""


class TimedOut(AssertionError):
    pass


def wait_for(predicate: Callable[[], Any], *, timeout: float = DEFAULT_TIMEOUT, what: str, interval: float = 0.25):
    """Poll until ``predicate`` returns something truthy; return it, or fail saying ``what`` did not happen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimedOut(f"{what} did not happen within {timeout:.0f} s (last: {last!r})")


def holds_for(predicate: Callable[[], Any], *, seconds: float, what: str, interval: float = 0.5) -> None:
    """Fail as soon as ``predicate`` turns falsy within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            raise AssertionError(f"{what} stopped holding")
        time.sleep(interval)


def refusal(error: Exception) -> Optional[str]:
    """The API server's words when ``error`` is its refusal of a request (403 or 422), else None."""
    if isinstance(error, ApiException):
        return error.body if error.status in (403, 422) else None
    if isinstance(error, ApplyError):
        return str(error) if any(words in str(error) for words in REFUSALS) else None
    return None


def expect_refused(call: Callable[[], Any], *, on_admitted: Callable[[Any], None] = lambda result: None) -> str:
    """The API server's refusal of ``call``; fail when it allows it (after ``on_admitted`` has
    removed what it made) or answers with an error that is no refusal."""
    try:
        result = call()
    except (ApiException, ApplyError) as error:
        words = refusal(error)
        assert words is not None, f"not a refusal: {error}"
        return words
    on_admitted(result)
    raise AssertionError("the API server allowed it")


def expect_refused_by(policy: str, call: Callable[[], Any], *, what: str,
                      on_admitted: Callable[[Any], None] = lambda result: None, timeout: float = 30) -> str:
    """The API server's refusal of ``call`` naming the ValidatingAdmissionPolicy ``policy``, once
    what the test just changed is in force (informers need a moment); until then a refusal naming
    no policy (RBAC's) or an admission (``on_admitted`` removes what it made) is retried."""
    last: list[str] = []
    named = f"ValidatingAdmissionPolicy '{policy}'"

    def attempt() -> Optional[str]:
        try:
            result = call()
        except (ApiException, ApplyError) as error:
            words = refusal(error)
            assert words is not None, f"not a refusal: {error}"
            last[:] = [words]
            return words if named in words else None
        last[:] = ["admitted"]
        on_admitted(result)
        return None

    try:
        return wait_for(attempt, what=what, timeout=timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}; the last answer: {last[0] if last else None}") from None


class Environment:
    """A local cluster through one identity: the product's ``Applier`` and the typed APIs."""

    def __init__(self, kubeconfig, *, user: Optional[str] = None, groups: tuple[str, ...] = (),
                 extra: Optional[dict[str, str]] = None):
        self.kubeconfig = kubeconfig
        self.applier = Applier(kubeconfig)
        self.api = self.applier.api_client
        if user:
            self.api.set_default_header("Impersonate-User", user)
            for group in groups:
                # The client keeps one value per header; RBAC needs only the first group here.
                self.api.set_default_header("Impersonate-Group", group)
            for key, value in (extra or {}).items():
                self.api.set_default_header(f"Impersonate-Extra-{key.replace('/', '%2F')}", value)
        self.core = self.applier.core
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self._known_state: Optional[Accounting] = None

    def as_user(self, user: str, *, groups: tuple[str, ...] = (), extra: Optional[dict[str, str]] = None) -> "Environment":
        """The same cluster as ``user`` presents itself (impersonation), for RBAC and admission."""
        return Environment(self.kubeconfig, user=user, groups=groups, extra=extra)

    # --- objects, through the Applier ----------------------------------------------------------------

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.applier.apply(obj)

    def get(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        return self.applier.get(api_version, kind, name, namespace)

    def list(self, api_version: str, kind: str, namespace: Optional[str] = None, selector: str = "") -> list[dict[str, Any]]:
        return self.applier.list(api_version, kind, namespace, label_selector=selector)

    def delete(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> bool:
        return self.applier.delete(api_version, kind, name, namespace, grace_seconds=0)

    def ensure_namespace(self, name: str) -> None:
        """A namespace of the tests' own (never one the platform made: the apply would take its labels)."""
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # --- nodes and pods ------------------------------------------------------------------------------

    def nodes(self, selector: str = "") -> list[client.V1Node]:
        return self.core.list_node(label_selector=selector).items

    def pods(self, namespace: str, selector: str = "") -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(namespace, label_selector=selector).items

    def pod(self, namespace: str, name: str) -> client.V1Pod:
        return self.core.read_namespaced_pod(name, namespace)

    def node_of(self, namespace: str, name: str) -> Optional[str]:
        return self.pod(namespace, name).spec.node_name

    def scheduling_message(self, namespace: str, name: str) -> str:
        for found in self.pod(namespace, name).status.conditions or []:
            if found.type == "PodScheduled" and found.status == "False":
                return found.message or ""
        return ""

    def node_requests(self, node: str) -> str:
        """What the pods on ``node`` request, added up, beside what the node allocates: the figures
        the scheduler compared, for a failure's message."""
        pods = [p for p in self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
                if p.status.phase in ("Pending", "Running")]
        requests = [c.resources.requests or {} for p in pods for c in p.spec.containers]
        cpu = sum(parse_quantity(str(r.get("cpu", "0"))) for r in requests)
        memory = sum(parse_quantity(str(r.get("memory", "0"))) for r in requests)
        allocatable = self.core.read_node(node).status.allocatable
        return (f"{node}: {len(pods)} pods requesting {float(cpu):.3f} CPU and {int(memory) >> 20}Mi of "
                f"{allocatable['cpu']} CPU and {allocatable['memory']} allocatable "
                f"({', '.join(f'{p.metadata.namespace}/{p.metadata.name}' for p in pods)})")

    def expect_bound(self, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The node the scheduler bound the pod to."""
        return wait_for(lambda: self.node_of(namespace, name), timeout=timeout, what=f"pod {namespace}/{name} bound")

    def expect_running(self, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> client.V1Pod:
        return wait_for(lambda: (p := self.pod(namespace, name)).status.phase == "Running" and p, timeout=timeout,
                        what=f"pod {namespace}/{name} Running")

    def expect_unschedulable(self, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The scheduler's own message once it has tried and failed to place the pod; a pod it binds
        instead fails at once, naming the node (a broken variant then takes seconds, not the timeout)."""
        def refused() -> str:
            bound = self.node_of(namespace, name)
            if bound:
                raise AssertionError(f"the scheduler bound pod {namespace}/{name} to node {bound} instead of refusing it")
            return self.scheduling_message(namespace, name)

        return wait_for(refused, timeout=timeout, what=f"the scheduler to report pod {namespace}/{name} unschedulable")

    def delete_pod(self, namespace: str, name: str) -> None:
        self.delete("v1", "Pod", name, namespace)

    # --- jobs and Kueue's Workloads ------------------------------------------------------------------

    def job_pods(self, namespace: str, name: str) -> list[client.V1Pod]:
        """The pods of job ``name`` not being deleted."""
        return [p for p in self.pods(namespace, f"{JOB_NAME_LABEL}={name}") if p.metadata.deletion_timestamp is None]

    def serves_kueue(self) -> bool:
        """Whether Kueue's API is installed (a bare cluster has none)."""
        try:
            self.applier.resource({"apiVersion": KUEUE_API, "kind": "Workload"})
        except ResourceNotFoundError:
            return False
        return True

    def workloads(self, namespace: Optional[str] = None, *, job_uid: Optional[str] = None) -> list[dict[str, Any]]:
        """Kueue's Workloads (of the Job with ``job_uid``); none where Kueue is not installed."""
        try:
            found = self.list(KUEUE_API, "Workload", namespace)
        except ResourceNotFoundError:
            return []
        return [w for w in found if job_uid is None or job_uid in job_uids(w)]

    def workload(self, namespace: str, job: str, kind: str = "Job") -> dict[str, Any]:
        """Kueue's Workload for the job ``job`` (a Job, a JobSet or a TrainJob) as it is now; empty
        when there is none (yet)."""
        live = self.get(GROUP_APIS.get(kind, "batch/v1"), kind, job, namespace)
        found = self.workloads(namespace, job_uid=live["metadata"]["uid"]) if live else []
        return found[0] if found else {}

    # --- JobSets and TrainJobs -----------------------------------------------------------------------

    def group_pods(self, namespace: str, name: str) -> list[client.V1Pod]:
        """The pods of JobSet ``name`` (or of the TrainJob ``name``'s JobSet) not being deleted."""
        return [p for p in self.pods(namespace, f"{JOBSET_NAME_LABEL}={name}") if p.metadata.deletion_timestamp is None]

    def expect_group_running(self, namespace: str, name: str, count: int, timeout: float = JOB_TIMEOUT,
                             kind: str = "JobSet") -> list[client.V1Pod]:
        """``count`` Running pods of the JobSet (or TrainJob) ``name``; else fail with its Workload's
        conditions and each pod's scheduling message."""
        def running():
            pods = [p for p in self.group_pods(namespace, name) if p.status.phase == "Running"]
            return len(pods) == count and pods

        try:
            return wait_for(running, what=f"{count} pods of {kind} {name} Running", timeout=timeout)
        except AssertionError as error:
            pods = [(p.metadata.name, p.status.phase, p.spec.node_name, self.scheduling_message(namespace, p.metadata.name))
                    for p in self.group_pods(namespace, name)]
            raise AssertionError(f"{error}; workload conditions {conditions(self.workload(namespace, name, kind))}; "
                                 f"pods {pods}") from None

    def expect_group_admitted(self, kind: str, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        return wait_for(lambda: condition(w := self.workload(namespace, name, kind), "Admitted").get("status") == "True" and w,
                        what=f"Kueue admitting {kind} {name}", timeout=timeout)

    def delete_group(self, kind: str, namespace: str, name: str, timeout: float = 90) -> None:
        """Delete a JobSet or TrainJob and wait until it, its Jobs' pods and Kueue's Workload for it
        are gone (queued, once its Workload exists, for the reasons of ``delete_job``)."""
        api_version = GROUP_APIS[kind]
        live = self.get(api_version, kind, name, namespace)
        if live is None:
            return
        uid = live["metadata"]["uid"]
        try:
            if QUEUE_LABEL in (live["metadata"].get("labels") or {}) and self.serves_kueue():
                wait_for(lambda: self.workloads(namespace, job_uid=uid), what=f"Kueue making {kind} {name}'s Workload",
                         timeout=timeout)
        finally:
            self.applier.delete(api_version, kind, name, namespace, propagation="Foreground", grace_seconds=0)

            def gone() -> bool:
                now = self.get(api_version, kind, name, namespace)
                return ((now is None or now["metadata"]["uid"] != uid) and not self.group_pods(namespace, name)
                        and not self.workloads(namespace, job_uid=uid))

            wait_for(gone, what=f"{kind} {name}, its pods and its Kueue Workload gone", timeout=timeout)

    def expect_job_running(self, namespace: str, name: str, count: int, timeout: float = JOB_TIMEOUT) -> list[client.V1Pod]:
        """``count`` Running pods of the job; else fail with its Workload's conditions, each pod's
        scheduling message and what every GPU node already holds."""
        def running():
            pods = [p for p in self.job_pods(namespace, name) if p.status.phase == "Running"]
            return len(pods) == count and pods

        try:
            return wait_for(running, what=f"{count} pods of job {name} Running", timeout=timeout)
        except AssertionError as error:
            pods = [(p.metadata.name, p.status.phase, p.spec.node_name, self.scheduling_message(namespace, p.metadata.name))
                    for p in self.job_pods(namespace, name)]
            nodes = [self.node_requests(n.metadata.name) for n in self.nodes("role=gpu-training")]
            raise AssertionError(f"{error}; workload conditions {conditions(self.workload(namespace, name))}; "
                                 f"pods {pods}; GPU nodes {nodes}") from None

    def expect_admitted(self, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The job's Workload, once Kueue has admitted it."""
        return wait_for(lambda: condition(w := self.workload(namespace, name), "Admitted").get("status") == "True" and w,
                        what=f"Kueue admitting job {name}", timeout=timeout)

    def expect_suspended(self, namespace: str, name: str, seconds: float = 8) -> dict[str, Any]:
        """The job's Workload, once Kueue has considered the job (tried to reserve quota) and for
        ``seconds`` after left it suspended with no pods."""
        wait_for(lambda: condition(self.workload(namespace, name), "QuotaReserved"),
                 what=f"Kueue to consider job {name}", timeout=DEFAULT_TIMEOUT)
        holds_for(lambda: self.batch.read_namespaced_job(name, namespace).spec.suspend and not self.job_pods(namespace, name),
                  seconds=seconds, what=f"job {name} suspended with no pods")
        return self.workload(namespace, name)

    def delete_job(self, namespace: str, name: str, timeout: float = 90) -> None:
        """Delete a Job and wait until it, its pods and Kueue's Workload for it are gone.

        Kueue makes a queued Job's Workload after the Job, and the garbage collector removes the
        Workload only after the Job. Deleted before its Workload is made, a Job can still get one
        (Kueue read the Job before the delete), left behind; deleted in the background, the next
        test starts while its Workload still holds the quota and the topology Kueue admitted it
        to, and a Job applied again under its name lands on the one being deleted. So a queued Job
        is deleted once its Workload exists, in the foreground, and is deleted when nothing of it
        is left."""
        job = self.get("batch/v1", "Job", name, namespace)
        if job is None:
            return
        uid = job["metadata"]["uid"]
        try:
            if QUEUE_LABEL in (job["metadata"].get("labels") or {}) and self.serves_kueue():
                wait_for(lambda: self.workloads(namespace, job_uid=uid), what=f"Kueue making job {name}'s Workload",
                         timeout=timeout)
        finally:
            self.applier.delete("batch/v1", "Job", name, namespace, propagation="Foreground", grace_seconds=0)

            def gone() -> bool:
                live = self.get("batch/v1", "Job", name, namespace)
                return ((live is None or live["metadata"]["uid"] != uid)
                        and not self.pods(namespace, f"{CONTROLLER_UID_LABEL}={uid}")
                        and not self.workloads(namespace, job_uid=uid))

            wait_for(gone, what=f"job {name}, its pods and its Kueue Workload gone", timeout=timeout)

    # --- the known state -----------------------------------------------------------------------------

    def accounting(self) -> Accounting:
        """Kueue's books and the pods on (or waiting for) GPU nodes, as they are now."""
        try:
            cluster_queues = self.list(KUEUE_API, "ClusterQueue")
        except ResourceNotFoundError:
            cluster_queues = []
        queued = []
        if cluster_queues:
            # A JobSet's Jobs carry its labels, the queue's among them, but Kueue admits the JobSet:
            # only jobs nothing owns have Workloads of their own.
            queued = [j for j in self.list("batch/v1", "Job", selector=QUEUE_LABEL) if not j["metadata"].get("ownerReferences")]
            for kind, api_version in GROUP_APIS.items():
                try:
                    queued += [{**o, "kind": kind} for o in self.list(api_version, kind, selector=QUEUE_LABEL)
                               if not o["metadata"].get("ownerReferences")]
                except ResourceNotFoundError:
                    pass  # the stack installs no controller of that kind
        # Read as the API server's JSON: built into the client's models, every pod of the cluster
        # after every test was a good part of the tier's workers' CPU.
        gpu_nodes = {n["metadata"]["name"] for n in list_items(self.core.list_node)
                     if ((n.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", "0") != "0"}
        pods = {}
        for pod in list_items(self.core.list_pod_for_all_namespaces):
            meta, node, phase = pod["metadata"], pod["spec"].get("nodeName"), (pod.get("status") or {}).get("phase")
            if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
                continue
            waiting = node is None and phase == "Pending"
            if node in gpu_nodes or waiting:
                pods[f"{meta['namespace']}/{meta['name']}"] = f"{phase} on {node or 'no node'}"
        return read_accounting(cluster_queues, self.workloads(), queued, pods)

    def known_state(self) -> Accounting:
        """The books as the platform left them, read before the cluster's first test, once Kueue has
        a Workload for every Job queued to it: every test starts from it and returns to it."""
        def settled() -> Optional[Accounting]:
            books = self.accounting()
            return None if books.unmade else books

        if self._known_state is None:
            self._known_state = wait_for(settled, timeout=60, what="Kueue making a Workload for every queued Job")
        return self._known_state

    def expect_known_state(self, *, when: str, timeout: float = KNOWN_STATE_TIMEOUT) -> None:
        """Wait until Kueue's books and the GPU nodes' pods are back to the known state; fail with
        what differs (``when`` says at which point of the test)."""
        expected = self.known_state()
        deadline = time.monotonic() + timeout
        while True:
            differences = self.accounting().differences(expected)
            if not differences:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster is not back to its known state {when} after {timeout:.0f} s: "
                                     + "; ".join(differences))
            time.sleep(0.5)
