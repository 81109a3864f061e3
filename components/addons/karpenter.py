"""The Karpenter controller: everything `pulumi up` needs for a working Karpenter on EKS.

Modelled on upstream's getting-started template (Karpenter 1.14): a controller role with upstream's
six policies, scoped to this cluster, bound to the controller's service account through an EKS Pod
Identity association (not IRSA); a node role that Karpenter makes instance profiles for, with an
``EC2_LINUX`` access entry so its nodes can join; an SQS interruption queue fed by EventBridge; and
the Helm releases, the CRDs through the ``karpenter-crd`` chart so that a chart bump also upgrades
them (Helm installs a chart's ``crds/`` folder once and never upgrades it).

The controller runs on the system node group: its node selector is the cluster's system selector,
and it tolerates only ``CriticalAddonsOnly`` (the chart's own default), never the GPU taint. The
chart's own affinity keeps it off nodes Karpenter launched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from ..config.base import Tags, tag_map
from ..aws import karpenter_iam
from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import KarpenterConfig
from ..aws.iam import create_node_role, node_role_resource_name
from ..aws.pod_identity import pod_identity_role
from ..facts.aws_names import PhysicalName
from ..config.arguments import check_model_fields
from .addon_release import addon_release
from .chart_source import release_chart
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config.chart_settings import ChartSource

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
"""The controller chart (upstream's OCI repository)."""

KARPENTER_CRD_CHART = "oci://public.ecr.aws/karpenter/karpenter-crd"
"""Karpenter's CRDs as templates, so that `helm upgrade` (a chart version bump) upgrades them too."""

KARPENTER_NAMESPACE = "kube-system"
"""Upstream's getting-started namespace: the chart's ``system-cluster-critical`` priority class
belongs with the other cluster-critical controllers, and no namespace has to be created."""

KARPENTER_SERVICE_ACCOUNT = "karpenter"
"""The controller's service account, named explicitly so the Pod Identity association matches it."""

INTERRUPTION_QUEUE_RETENTION_SECONDS = 300
"""Upstream's retention: an interruption notice older than five minutes is no longer actionable."""

KEEP_ON_UNINSTALL = {"helm.sh/resource-policy": "keep"}
"""Helm keeps a resource with this annotation on uninstall
(helm.sh/docs/howto/charts_tips_and_tricks). On Karpenter's CRDs it keeps a removed
``karpenter-crd`` release from deleting every NodePool, NodeClaim and node; set through the chart's
``additionalAnnotations``: Helm reads the stored manifest."""

CRD_RELEASE_TIMEOUT_SECONDS = 120
"""The CRD release holds only CRDs, established within seconds, so a failure shows fast. Atomic: a
failed upgrade rolls back to CRDs matching the running controller (Karpenter 1.x serves only v1, so
no stored version is dropped); a failed first install leaves the kept CRDs for the next attempt."""

CONTROLLER_RELEASE_TIMEOUT_SECONDS = 300
"""Helm's wait for the controller's two replicas on two system nodes (a minute or two of image
pulls); past five minutes something is wrong (too few system nodes, no credentials). Atomic: a
failed upgrade rolls back to the controller that ran before."""

CONTROLLER_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
"""Controller requests and limits from upstream's getting-started install command."""

AWS_REGION_ENV = "AWS_REGION"
"""The controller's region, set explicitly: without it the AWS SDK for Go v2 asks instance metadata,
which pods cannot reach at the nodes' hop limit of 1, and the controller panics
(aws/karpenter-provider-aws#8219)."""

CONTROLLER_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
"""The chart's default tolerations, stated here so no GPU toleration can creep in: the controller
must keep running when every GPU node is gone."""


def karpenter_values(
    cluster_name: pulumi.Input[str],
    cluster_endpoint: Optional[pulumi.Input[str]],
    interruption_queue: pulumi.Input[str],
    system_node_selector: Mapping[str, str],
    *,
    region: str,
    node_repair: bool,
) -> dict[str, Any]:
    """Helm values of the ``karpenter`` chart (keys checked against the chart's values.yaml in tests).
    Without an endpoint the controller looks it up itself (DescribeCluster). ``region`` goes into the
    controller's environment, so it never depends on instance metadata. ``node_repair`` turns on the
    NodeRepair feature gate (``KarpenterConfig.node_repair``)."""
    settings: dict[str, Any] = {"clusterName": cluster_name}
    if cluster_endpoint is not None:
        settings["clusterEndpoint"] = cluster_endpoint
    settings["interruptionQueue"] = interruption_queue
    # Capacity reservations (ODCRs, Capacity Blocks) as karpenter.sh/capacity-type "reserved". The gate
    # is BETA and already on by default in 1.14 (chart values.yaml); set here so a chart whose default
    # changes does not silently turn off the reserved pools this stack may declare.
    # NodeRepair is ALPHA (off by default in the 1.14 charts): Karpenter then force-terminates a node
    # whose AcceleratedHardwareReady condition has been False for 10 minutes (Kernel-, Networking-,
    # Storage-, ContainerRuntimeReady and kubelet Ready: 30), skipping the drain, and halts while more
    # than 20% of a NodePool's nodes are unhealthy (docs-disruption.md, "Node Auto Repair").
    settings["featureGates"] = {"reservedCapacity": True, "nodeRepair": node_repair}
    return {
        "serviceAccount": {"name": KARPENTER_SERVICE_ACCOUNT},
        "settings": settings,
        "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector},
        "tolerations": CONTROLLER_TOLERATIONS,
        "controller": {"resources": CONTROLLER_RESOURCES, "env": [{"name": AWS_REGION_ENV, "value": region}]},
    }


def karpenter_crd_values(retain_on_removal: bool) -> dict[str, Any]:
    """Helm values of the ``karpenter-crd`` chart: the keep policy on every CRD unless the stack
    opted out (``karpenter.retainOnRemoval: false``)."""
    return {"additionalAnnotations": dict(KEEP_ON_UNINSTALL)} if retain_on_removal else {}


@documented_args
@dataclass
class KarpenterArgs:
    """Arguments of ``Karpenter``."""

    cluster: ClusterInput
    """The cluster Karpenter provisions nodes for: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    config: KarpenterConfig
    """Chart version and ``retainOnRemoval`` (the GPU pools are ``GpuNodePool`` components of their own)."""
    tags: Tags = field(default_factory=dict)
    """Tags for every AWS resource (values, or the whole map, may be Outputs). Default: none."""
    charts: ChartSource = field(default_factory=ChartSource)
    """Where the chart comes from instead of its repository: a local folder (``directory``) or a mirror (``mirror``), as the stack's ``charts`` (``ChartsConfig.source()``). Default: the repository."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))

CONTROLLER_POLICY_ROLES = ("node-lifecycle", "iam-integration", "eks-integration", "interruption", "zonal-shift", "resource-discovery")
"""The controller's policies, by the suffix of upstream's policy names (``karpenter_iam.controller_policies``)."""


def interruption_queue_resource_name(name: str) -> str:
    """Logical name of the interruption queue (auto-named)."""
    return f"{name}-interruption-queue"


def interruption_rule_resource_name(name: str, role: str) -> str:
    """Logical name of one EventBridge interruption rule (auto-named)."""
    return f"{name}-{role}"


def controller_role_resource_name(name: str) -> str:
    """Logical name of the controller's Pod Identity role (auto-named)."""
    return f"{name}-controller-role"


def controller_policy_resource_name(name: str, policy_role: str) -> str:
    """Logical name of one controller policy (auto-named)."""
    return f"{name}-{policy_role}-policy"


def karpenter_physical_names(name: str) -> list[PhysicalName]:
    """Every AWS name ``Karpenter(name, ...)`` generates, from the functions it names them with."""
    return [
        PhysicalName("aws:iam/role:Role", node_role_resource_name(name), autonamed=True),
        PhysicalName("aws:iam/role:Role", controller_role_resource_name(name), autonamed=True),
        PhysicalName("aws:sqs/queue:Queue", interruption_queue_resource_name(name), autonamed=True),
        *(
            PhysicalName("aws:cloudwatch/eventRule:EventRule", interruption_rule_resource_name(name, role), autonamed=True)
            for role in karpenter_iam.INTERRUPTION_EVENTS
        ),
        *(
            PhysicalName("aws:iam/policy:Policy", controller_policy_resource_name(name, role), autonamed=True)
            for role in CONTROLLER_POLICY_ROLES
        ),
    ]


@documented_component(KarpenterArgs)
class Karpenter(pulumi.ComponentResource):
    """The Karpenter controller with its IAM, interruption queue and Helm releases."""

    node_role: aws.iam.Role
    """The role of every node Karpenter launches (``EC2NodeClass.spec.role``)."""
    release: k8s.helm.v3.Release
    """The controller release; Karpenter custom resources depend on it."""
    node_role_name: pulumi.Output[str]
    """Name of ``node_role``, as ``GpuNodePoolArgs.node_role_name`` takes it."""
    interruption_queue_name: pulumi.Output[str]
    """The SQS queue Karpenter reads spot interruptions, rebalance and health events from."""

    def __init__(self, name: str, args: Optional[KarpenterArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(KarpenterArgs, "Karpenter", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"Karpenter({name})")
        # A missing local chart is refused before anything registers.
        path = f"Karpenter({name}).charts.directory"
        crd_chart = release_chart(KARPENTER_CRD_CHART, args.config.chart_version, None, args.charts.directory, path,
                                   args.charts.mirror)
        controller_chart = release_chart(KARPENTER_CHART, args.config.chart_version, None, args.charts.directory, path,
                                   args.charts.mirror)
        super().__init__("eks-gpu-training:index:Karpenter", name, None, opts)
        ref, tags = cluster_ref_of(args), tag_map(args.tags)
        # Cluster-side AWS objects (access entry, association) need the cluster; in-cluster ones its nodes too.
        after_cluster = pulumi.ResourceOptions(parent=self, depends_on=list(ref.ready))
        account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id

        # With retainOnRemoval the NodePools and their nodes outlive the controller, so the nodes keep
        # what their kubelets authenticate with: the role, its policies and its access entry. Deleted,
        # the kubelets get Unauthorized and the kept nodes go NotReady.
        retain = args.config.retain_on_removal
        node_role = create_node_role(name, ref.partition, tags, parent=self, ssm_access=ref.node_ssm_access, retain_on_delete=retain)
        self.node_role = node_role.role
        node_access = aws.eks.AccessEntry(
            f"{name}-node-access-entry",
            cluster_name=ref.name,
            principal_arn=self.node_role.arn,
            type="EC2_LINUX",
            tags=tags,
            region=ref.region,
            opts=pulumi.ResourceOptions.merge(after_cluster, pulumi.ResourceOptions(retain_on_delete=retain)),
        )

        queue = aws.sqs.Queue(
            interruption_queue_resource_name(name),
            message_retention_seconds=INTERRUPTION_QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            tags=tags,
            region=ref.region,
            opts=pulumi.ResourceOptions(parent=self),
        )
        rule_arns = []
        for role, (source, detail_type) in karpenter_iam.INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                interruption_rule_resource_name(name, role),
                description=pulumi.Output.concat("Karpenter interruption handling for ", ref.name, f": {detail_type}"),
                event_pattern=json.dumps(karpenter_iam.interruption_event_pattern(source, detail_type)),
                tags=tags,
                region=ref.region,
                opts=pulumi.ResourceOptions(parent=queue),
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{role}-target",
                rule=rule.name,
                target_id="KarpenterInterruptionQueueTarget",
                arn=queue.arn,
                region=ref.region,
                opts=pulumi.ResourceOptions(parent=rule),
            )
            rule_arns.append(rule.arn)
        # The queue accepts messages from exactly these rules (their ARNs exist once they do).
        aws.sqs.QueuePolicy(
            f"{name}-interruption-queue-policy",
            queue_url=queue.url,
            policy=pulumi.Output.all(queue.arn, *rule_arns).apply(
                lambda arns: json.dumps(karpenter_iam.interruption_queue_policy(arns[0], arns[1:]))
            ),
            region=ref.region,
            opts=pulumi.ResourceOptions(parent=queue),
        )

        controller = pod_identity_role(
            controller_role_resource_name(name),
            ref,
            namespace=KARPENTER_NAMESPACE,
            service_account=KARPENTER_SERVICE_ACCOUNT,
            holder="Karpenter controller",
            tags=tags,
            parent=self,
            account_id=account_id,
        )
        controller_role = controller.role
        documents = pulumi.Output.all(account_id, ref.name, self.node_role.arn, queue.arn).apply(
            lambda values: karpenter_iam.controller_policies(ref.partition, ref.region, *values)
        )
        attachments = []
        for policy_role in CONTROLLER_POLICY_ROLES:
            policy = aws.iam.Policy(
                controller_policy_resource_name(name, policy_role),
                description=pulumi.Output.concat("Karpenter controller of EKS cluster ", ref.name, f": {policy_role}"),
                policy=documents[policy_role].apply(json.dumps),
                tags=tags,
                opts=pulumi.ResourceOptions(parent=controller_role),
            )
            attachments.append(
                aws.iam.RolePolicyAttachment(
                    f"{name}-{policy_role}",
                    role=controller_role.name,
                    policy_arn=policy.arn,
                    opts=pulumi.ResourceOptions(parent=controller_role),
                )
            )
        # Karpenter's pods get credentials only through the Pod Identity agent add-on.
        pod_identity = controller.associate(f"{name}-pod-identity")

        crds = addon_release(
            self, name, role="crd", release_name="karpenter-crd", chart=crd_chart, namespace=KARPENTER_NAMESPACE,
            create_namespace=None, values=karpenter_crd_values(args.config.retain_on_removal),
            timeout=CRD_RELEASE_TIMEOUT_SECONDS, ready=ref.ready,
        )
        # Pods get Pod Identity credentials only if the association exists when they start.
        self.release = addon_release(
            self, name, release_name="karpenter", chart=controller_chart, namespace=KARPENTER_NAMESPACE,
            create_namespace=None, skip_crds=True,
            values=karpenter_values(ref.name, ref.endpoint, queue.name, ref.system_node_selector, region=ref.region,
                                    node_repair=args.config.node_repair),
            timeout=CONTROLLER_RELEASE_TIMEOUT_SECONDS, ready=ref.ready,
            after=[crds, pod_identity, node_access, *attachments],
        )

        # The EC2NodeClass takes the role by name; resolving the name only once the policies are
        # attached and the access entry exists keeps Karpenter from launching nodes that cannot join.
        self.node_role_name = pulumi.Output.all(
            self.node_role.name, node_access.id, *(attachment.id for attachment in node_role.policy_attachments)
        ).apply(lambda values: values[0])
        self.interruption_queue_name = queue.name
        self.register_outputs({"nodeRoleName": self.node_role_name, "interruptionQueueName": self.interruption_queue_name})
