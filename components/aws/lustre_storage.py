"""Storage on AWS for training: a persistent FSx for Lustre file system with its security group,
an optional S3 data repository association and the FSx CSI driver (EKS add-on). The user data that
makes AL2023 GPU nodes put their instance-store NVMe into one RAID0 array is in ``node_config``.

What the next change does (FSx for Lustre user guide, "Managing storage capacity" and
"Managing throughput capacity"; API_UpdateFileSystem): a larger ``storageCapacityGib`` or another
``throughputMbpsPerTib`` updates the file system in place, online; a smaller capacity cannot be
applied, so Pulumi replaces the file system and its data is lost unless it is in S3. A new AZ or
subnet replaces it too (a file system's subnet is fixed at creation). Another
``automaticBackupRetentionDays`` updates it in place; ``protect``, the final backup's settings and
its tags change Pulumi's state only. FSx backs up only file systems not linked to an S3 data
repository (API CreateBackup; LustreGuide using-backups-fsx.html): a linked one keeps no automatic
backups and takes no final one, and what survives its deletion is what was exported to S3, so
linking a repository later turns its backups off in the same update. Security-group rules are
separate resources and change without touching the file system. A data repository association
whose bucket, prefix or path changes is replaced (DeleteDataRepositoryAssociation keeps the files
already in the file system).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import pulumi
import pulumi_aws as aws

from .eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from .addon_versions import addon_version
from ..config.base import Tags, merged_tags, tag_map
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config import ConfigError, FsxLustreConfig, SubnetRef, validate_fsx_file_system
from ..config.inputs import is_unknown
from ..facts.aws_names import PhysicalName

LUSTRE_PORT_RANGES = ((988, 988), (1018, 1023))
"""TCP ports Lustre uses between clients and servers, inbound and outbound between the file system's
and the clients' security groups: 988 (LNet) and 1018-1023
(docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html)."""

LUSTRE_VERSION = "2.15"
"""Lustre version of the file system (FileSystemTypeVersion); 2.15 is the newest FSx offers and the
one the AL2023 EKS AMIs' Lustre client speaks."""

FSX_DEPLOYMENT_TYPE = "PERSISTENT_2"
"""Persistent file systems keep their data when a server fails (replicated within the AZ) and
support data repository associations; scratch file systems do neither."""

FSX_CSI_ADDON = "aws-fsx-csi-driver"
"""The EKS add-on of the FSx for Lustre CSI driver (docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html)."""

FSX_CSI_NAMESPACE = "kube-system"
"""The namespace the EKS add-on installs the FSx CSI driver into (as every EKS add-on of kube-system components)."""

FSX_CSI_CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
"""The FSx CSI controller's ServiceAccount in kube-system. It gets no AWS role: with static
provisioning (a PersistentVolume naming the file system, no StorageClass, ``Retain``) it never calls
FSx, which it does only to create, delete or expand volumes (aws-fsx-csi-driver
``pkg/driver/controller.go``)."""

FSX_CSI_DRIVER = "fsx.csi.aws.com"
"""The CSI driver name persistent volumes name."""

DATA_REPOSITORY_EVENTS = ("NEW", "CHANGED", "DELETED")
"""S3 events a data repository association follows in both directions."""

@dataclass(frozen=True)
class LustreRule:
    """One security-group rule of the file system: which group it sits on, its direction, ports and peer."""

    on: str
    """``filesystem`` (the file system's group) or ``clients`` (the cluster security group)."""
    direction: str
    """``ingress`` or ``egress``."""
    from_port: int
    to_port: int
    peer: str
    """``filesystem`` or ``clients``."""


def lustre_rules() -> list[LustreRule]:
    """Every rule Lustre needs and nothing more: the file system's group takes and sends Lustre
    traffic from and to itself (its servers) and the clients; the clients' group takes it from the
    file system (the cluster security group already allows all egress)."""
    rules = []
    for low, high in LUSTRE_PORT_RANGES:
        for peer in ("filesystem", "clients"):
            rules.append(LustreRule("filesystem", "ingress", low, high, peer))
            rules.append(LustreRule("filesystem", "egress", low, high, peer))
        rules.append(LustreRule("clients", "ingress", low, high, "filesystem"))
    return rules


def data_repository_path(bucket: pulumi.Input[str], prefix: str) -> pulumi.Input[str]:
    """The ``s3://`` path of a data repository (a trailing slash marks a prefix); an Output bucket
    (one made in the same program) gives an Output path."""
    key = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    if is_unknown(bucket):
        return pulumi.Output.concat("s3://", bucket, "/", key)
    return f"s3://{bucket}/{key}"


def lustre_security_group_resource_name(name: str) -> str:
    """Resource name of the file system's security group (auto-named by Pulumi)."""
    return f"{name}-lustre"


def lustre_storage_physical_names(name: str) -> list[PhysicalName]:
    """Every length-limited AWS name ``LustreStorage(name, ...)`` generates."""
    return [
        PhysicalName("aws:ec2/securityGroup:SecurityGroup", lustre_security_group_resource_name(name), autonamed=True),
    ]


@dataclass(frozen=True)
class LustreVolume:
    """What a persistent volume needs of the file system."""

    file_system_id: pulumi.Output[str]
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    capacity_gib: int


@documented_args
@dataclass
class LustreStorageArgs:
    """Arguments of ``LustreStorage``."""

    config: FsxLustreConfig
    """The file system's settings."""
    cluster: ClusterInput
    """The cluster whose nodes mount it: their security group (the cluster's) becomes the client group: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    subnet_id: pulumi.Input[str]
    """The private subnet of the file system's AZ."""
    tags: Tags = field(default_factory=dict)
    """Tags for every AWS resource, and for the file system's final backup (values, or the whole map, may be Outputs). Default: none."""
    protect: bool = False
    """Refuse deleting or replacing the file system (Pulumi ``protect``; the platform passes ``cluster.protect``). Default: false."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))


@documented_component(LustreStorageArgs)
class LustreStorage(pulumi.ComponentResource):
    """An FSx for Lustre file system reachable from the cluster's nodes, with the FSx CSI driver."""

    file_system_id: pulumi.Output[str]
    """The file system's ID (fs-...)."""
    volume: LustreVolume
    """What ``TrainingStorage`` needs to mount it: ID, DNS name, mount name and capacity."""
    csi_driver: aws.eks.Addon
    """The FSx CSI driver add-on; volumes and claims wait for it."""
    security_group_id: pulumi.Output[str]
    """The file system's security group."""

    def __init__(self, name: str, args: Optional[LustreStorageArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(LustreStorageArgs, "LustreStorage", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"LustreStorage({name})")
        problems = validate_fsx_file_system(args.config, f"LustreStorage({name}).config")
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:LustreStorage", name, None, opts)
        config, ref = args.config, cluster_ref_of(args)
        tags = tag_map(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        group = aws.ec2.SecurityGroup(
            lustre_security_group_resource_name(name),
            vpc_id=ref.vpc_id,
            # The cluster name may be an Output: never formatted into text.
            description=pulumi.Output.concat("FSx for Lustre of EKS cluster ", ref.name, ": Lustre ports to and from the cluster's nodes"),
            tags=tags,
            region=ref.region,
            opts=child,
        )
        peers = {"filesystem": group.id, "clients": ref.cluster_security_group_id}
        rule_types = {"ingress": aws.vpc.SecurityGroupIngressRule, "egress": aws.vpc.SecurityGroupEgressRule}
        rules: list[pulumi.Resource] = []
        for rule in lustre_rules():
            rules.append(
                rule_types[rule.direction](
                    f"{name}-{rule.on}-{rule.direction}-{rule.from_port}-{rule.peer}",
                    security_group_id=peers[rule.on],
                    referenced_security_group_id=peers[rule.peer],
                    ip_protocol="tcp",
                    from_port=rule.from_port,
                    to_port=rule.to_port,
                    description=f"Lustre {rule.from_port}-{rule.to_port} {'from' if rule.direction == 'ingress' else 'to'} {rule.peer}",
                    tags=tags,
                    region=ref.region,
                    opts=pulumi.ResourceOptions(parent=group),
                )
            )

        # FSx checks at creation that its security group passes Lustre traffic (cannot-create-fs.html).
        file_system = aws.fsx.LustreFileSystem(
            f"{name}-file-system",
            deployment_type=FSX_DEPLOYMENT_TYPE,
            storage_type="SSD",
            storage_capacity=config.storage_capacity_gib,
            per_unit_storage_throughput=config.throughput_mbps_per_tib,
            file_system_type_version=LUSTRE_VERSION,
            data_compression_type="LZ4",
            # One subnet: a file system lives in one AZ (pulumi-aws 7 takes the ID as a string).
            subnet_ids=args.subnet_id,
            security_group_ids=[group.id],
            # pulumi-aws skips the final backup unless told not to, and reads this only on delete. FSx
            # backs up no file system linked to S3 (API CreateBackup), so a linked one takes none.
            skip_final_backup=not config.backups,
            final_backup_tags=tags if config.backups else None,
            automatic_backup_retention_days=config.backup_retention_days,
            # "Not available for use with file systems that are linked to a data repository" (API
            # CreateFileSystemLustreConfiguration CopyTagsToBackups).
            copy_tags_to_backups=config.backups,
            tags=merged_tags(tags, {"Name": pulumi.Output.concat(ref.name, "-training")}),
            region=ref.region,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=rules,
                protect=args.protect,
                # CopyTagsToBackups is set at creation only (UpdateFileSystem has no such field; the
                # provider marks it ForceNew): a file system made before it keeps its setting rather
                # than being replaced, data and all.
                ignore_changes=["copyTagsToBackups"],
            ),
        )

        repository = config.data_repository
        if repository is not None:
            events = list(DATA_REPOSITORY_EVENTS)
            s3: aws.fsx.DataRepositoryAssociationS3ArgsDict = {"auto_import_policy": {"events": events}}
            if repository.auto_export:
                s3["auto_export_policy"] = {"events": events}
            aws.fsx.DataRepositoryAssociation(
                f"{name}-data-repository",
                file_system_id=file_system.id,
                data_repository_path=data_repository_path(repository.bucket, repository.prefix),
                file_system_path=repository.file_system_path,
                batch_import_meta_data_on_create=True,
                s3=s3,
                tags=tags,
                region=ref.region,
                # Not protected with its parent: deleting an association keeps the files already in the
                # file system (DeleteDataRepositoryAssociation), so a new bucket or path may replace it.
                opts=pulumi.ResourceOptions(parent=file_system, protect=False),
            )

        self.csi_driver = aws.eks.Addon(
            f"{name}-csi-driver",
            cluster_name=ref.name,
            addon_name=FSX_CSI_ADDON,
            addon_version=addon_version(FSX_CSI_ADDON, ref.kubernetes_version, config.csi_driver_version, self, ref.region),
            # No configuration values: pods get IMDS hop limit 1, and the controller then reads its
            # region from the Kubernetes API (its node's labels) instead (aws-fsx-csi-driver
            # pkg/driver/controller.go, newControllerService; pkg/cloud metadata fallback). No Pod
            # Identity association: the controller needs no AWS credentials here
            # (FSX_CSI_CONTROLLER_SERVICE_ACCOUNT). On a stack that had one, EKS deletes the
            # association the add-on owns when UpdateAddon gets an empty list (botocore eks
            # UpdateAddon, podIdentityAssociations), and the controller's pods keep running.
            pod_identity_associations=[],
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            region=ref.region,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(ref.ready)),
        )

        self.volume = LustreVolume(
            file_system_id=file_system.id,
            dns_name=file_system.dns_name,
            mount_name=file_system.mount_name,
            capacity_gib=config.storage_capacity_gib,
        )
        self.file_system_id = file_system.id
        self.security_group_id = group.id
        self.register_outputs({"fileSystemId": self.file_system_id, "securityGroupId": self.security_group_id})


def subnet_in_zone(subnets: Sequence[SubnetRef], zone: str) -> pulumi.Input[str]:
    """The first of the cluster's private subnets in ``zone`` (validation guarantees there is one)."""
    return next(s.id for s in subnets if s.availability_zone == zone)
