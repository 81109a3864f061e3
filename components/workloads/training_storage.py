"""Kubernetes side of the training storage: a statically provisioned FSx for Lustre volume in
every training namespace, how training pods mount it, and what they request of the nodes'
instance-store RAID0.

Static provisioning (kubernetes-sigs/aws-fsx-csi-driver/examples/kubernetes/static_provisioning): the stack made the
file system, so each namespace gets a PersistentVolume naming it by ID, DNS name and mount name,
pre-bound through ``claimRef`` to one PersistentVolumeClaim there, so no other claim can take it.
The PersistentVolume's reclaim policy is Retain: deleting a claim or a namespace never touches the
data.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..aws.lustre_storage import FSX_CSI_DRIVER, FSX_CSI_NAMESPACE, LustreVolume
from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.inputs import joined
from ..config.team_settings import team_data_path
from .training_spec import PART_OF
from ..facts.instance_store import ephemeral_storage_request

FSX_CLAIM = "fsx-lustre"
"""Name of the claim in each training namespace (and the pod volume that mounts it)."""

LUSTRE_MOUNT_OPTIONS = ("flock",)
"""Cluster-wide coherent file locks, which checkpoint writers and dataset caches rely on (the FSx
CSI driver's static-provisioning example mounts with them)."""

CLAIM_REQUEST_GIB = 1200
"""What each namespace's claim requests: FSx for Lustre's smallest size, not the file system's. A
claim binds to any volume at least that large, and its request cannot grow (only an expandable,
dynamically provisioned claim's may), so the file system grows freely. The claim ignores
``spec.resources``."""

CLAIM_IGNORED_CHANGES = ("spec.resources",)
"""What Pulumi never updates on a claim: its request, which the API server refuses to change on a
statically bound claim (``CLAIM_REQUEST_GIB``)."""

STACK_CLAIMS_WITH_FSX = 1
"""Claims the stack itself makes in each training namespace when FSx is on; the quota's
``persistentvolumeclaims`` gets them on top of the users' own."""


def claim_name(team: Optional[str] = None) -> str:
    """A namespace's claim: ``fsx-lustre`` (the whole file system), or ``fsx-lustre-<team>`` (its
    team's directory). A new name, not the old claim changed: a bound claim's ``volumeName`` and a
    volume's ``csi`` are immutable."""
    return FSX_CLAIM if team is None else f"{FSX_CLAIM}-{team}"


def persistent_volume_name(namespace: str, team: Optional[str] = None) -> str:
    """The PersistentVolume of a namespace's claim (PersistentVolumes are cluster-scoped)."""
    return f"{namespace}-{claim_name(team)}"


def team_mount_name(mount_name: pulumi.Input[str], team: str) -> pulumi.Input[str]:
    """The ``mountname`` of a team's volume: the file system's followed by the team's directory. The
    FSx CSI driver mounts ``<dnsname>@tcp:/<mountname>`` (kubernetes-sigs/aws-fsx-csi-driver
    pkg/driver/node.go, NodePublishVolume), a Lustre subdirectory mount: the pod sees that directory
    as the volume's root and nothing above it (docs.aws.amazon.com/fsx/latest/LustreGuide/
    mounting-from-fileset.html). The directory must exist first (``team_directories_job``)."""
    if isinstance(mount_name, str):
        return f"{mount_name}/{team_data_path(team)}"
    return pulumi.Output.all(mount_name).apply(lambda names: f"{names[0]}/{team_data_path(team)}")


def lustre_persistent_volume(namespace: str, volume: LustreVolume, team: Optional[str] = None) -> dict[str, Any]:
    """A ReadWriteMany PersistentVolume of the whole file system, or of ``team``'s directory, bound
    in advance to the namespace's claim: no claim of another namespace can take it (``claimRef``)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": persistent_volume_name(namespace, team)},
        "spec": {
            "capacity": {"storage": f"{volume.capacity_gib}Gi"},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": list(LUSTRE_MOUNT_OPTIONS),
            "claimRef": {"namespace": namespace, "name": claim_name(team)},
            "csi": {
                "driver": FSX_CSI_DRIVER,
                "volumeHandle": volume.file_system_id if team is None else joined(volume.file_system_id, f":{team}"),
                "volumeAttributes": {
                    "dnsname": volume.dns_name,
                    "mountname": volume.mount_name if team is None else team_mount_name(volume.mount_name, team),
                },
            },
        },
    }


def lustre_claim(namespace: str, team: Optional[str] = None) -> dict[str, Any]:
    """The namespace's claim on its PersistentVolume (no storage class: static binding only); its
    request is ``CLAIM_REQUEST_GIB`` whatever the file system's size."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim_name(team), "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": persistent_volume_name(namespace, team),
            "resources": {"requests": {"storage": f"{CLAIM_REQUEST_GIB}Gi"}},
        },
    }


TEAM_DIRECTORIES_NAMESPACE = FSX_CSI_NAMESPACE
"""Where the Job that makes the teams' directories runs, with a claim on the whole file system:
kube-system, which only cluster admins reach."""

TEAM_DIRECTORIES_IMAGE = "public.ecr.aws/docker/library/busybox:1.37.0"
"""A shell with mkdir, chown and chmod (Docker's official busybox image, as ECR Public serves it)."""

TEAM_DIRECTORY_MODE = "2770"
"""A team directory's mode: its owner and group read, write and enter it, nobody else; setgid, so
what is made in it belongs to the team's group whoever makes it."""

TEAM_DIRECTORIES_CAPABILITIES = ("CHOWN", "FOWNER")
"""All the Job's root needs: give a directory to the team (CHOWN) and set the mode of one it no
longer owns (FOWNER)."""


TEAM_DIRECTORIES_RESOURCES = {"cpu": "100m", "memory": "64Mi"}
"""What a shell making a few directories needs, requested and its limit (the namespace's quota counts it)."""
TEAM_DIRECTORIES_LABELS = {"app.kubernetes.io/name": "fsx-team-directories", "app.kubernetes.io/part-of": PART_OF}
"""Labels of the directories Job and its pod."""


def team_directories_script(teams: Mapping[str, int], mount_path: str = "/fsx") -> str:
    """Shell that makes each team's directory (``teams/<team>``, by gid) if missing and gives it to the team."""
    lines = ["set -eu"]
    for team, gid in sorted(teams.items()):
        path = f"{mount_path}/{team_data_path(team)}"
        lines += [f"mkdir -p {path}", f"chown {gid}:{gid} {path}", f"chmod {TEAM_DIRECTORY_MODE} {path}"]
    return "\n".join(lines)


def team_directories_job_name(teams: Mapping[str, int]) -> str:
    """The Job's name, new for each set of teams and IDs (a Job's pod template cannot change)."""
    digest = hashlib.sha256(json.dumps(sorted(teams.items())).encode()).hexdigest()[:10]
    return f"fsx-team-directories-{digest}"


def team_directories_job(teams: Mapping[str, int]) -> dict[str, Any]:
    """The Job that makes the teams' directories on the whole file system, as root holding only
    ``TEAM_DIRECTORIES_CAPABILITIES``; it runs once per set of teams and is kept once done."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": team_directories_job_name(teams), "namespace": TEAM_DIRECTORIES_NAMESPACE, "labels": dict(TEAM_DIRECTORIES_LABELS)},
        "spec": {
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": dict(TEAM_DIRECTORIES_LABELS)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "directories",
                        "image": TEAM_DIRECTORIES_IMAGE,
                        "imagePullPolicy": "Always",
                        "command": ["sh", "-c", team_directories_script(teams)],
                        "resources": {"requests": dict(TEAM_DIRECTORIES_RESOURCES), "limits": dict(TEAM_DIRECTORIES_RESOURCES)},
                        "securityContext": {
                            "runAsUser": 0,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": list(TEAM_DIRECTORIES_CAPABILITIES)},
                        },
                        "volumeMounts": [{"name": "fsx", "mountPath": "/fsx"}],
                    }],
                    "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": FSX_CLAIM}}],
                },
            },
        },
    }


def stack_claims(args: GpuTrainingPlatformArgs) -> int:
    """Claims the stack makes in each training namespace."""
    return STACK_CLAIMS_WITH_FSX if args.storage.fsx.enabled else 0


def training_storage_fields(args: GpuTrainingPlatformArgs, instance_types: Sequence[str], namespace: Optional[str] = None) -> dict[str, Any]:
    """The storage fields of a ``TrainingJobSpec`` in ``namespace``: its FSx claim (its team's
    directory in a team's namespace) and its mount path, and an ephemeral-storage request sized to
    the nodes' instance-store RAID0."""
    fields: dict[str, Any] = {}
    if args.storage.fsx.enabled:
        team = next((t.name for t in args.scheduling.teams if namespace in t.namespaces), None)
        fields.update(shared_volume_claim=claim_name(team), shared_volume_mount_path=args.storage.fsx.mount_path)
    if args.storage.instance_store == "raid0":
        fields["ephemeral_storage"] = ephemeral_storage_request(instance_types)
    return fields


@documented_args
@dataclass
class TrainingStorageArgs:
    """Arguments of ``TrainingStorage``."""

    volume: LustreVolume
    """The file system (``LustreStorage.volume``)."""
    namespaces: Sequence[str]
    """Training namespaces that each get a claim."""
    depends_on: Sequence[pulumi.Resource] = ()
    """What must exist first: the namespaces and the CSI driver. Default: nothing."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""
    teams: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Teams and their namespaces, among ``namespaces``: a team's namespace gets a volume of the
    team's directory ``teams/<team>`` only, which a Job makes first. Default: none (every namespace
    gets the whole file system)."""
    team_ids: Mapping[str, int] = field(default_factory=dict)
    """Each team's user and group ID, owner of its directory (``config.team_settings.team_gid``), one for every team. Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))
        missing = sorted(set(self.teams) - set(self.team_ids))
        if missing:
            raise ConfigError([Problem("TrainingStorageArgs.team_ids", f"has no ID for {', '.join(missing)}: each team's directory is owned by its ID")])


@documented_component(TrainingStorageArgs)
class TrainingStorage(pulumi.ComponentResource):
    """A PersistentVolume and its claim in each training namespace. Give it the ``cluster`` (or its Kubernetes provider in ``opts``)."""

    claim_name: pulumi.Output[str]
    """The name of the whole file system's claim (a team's namespace has ``fsx-lustre-<team>``, ``claim_name``)."""

    def __init__(self, name: str, args: Optional[TrainingStorageArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TrainingStorageArgs, "TrainingStorage", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TrainingStorage({name})")
        super().__init__("eks-gpu-training:index:TrainingStorage", name, None, opts)
        after = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        team_of = {namespace: team for team, namespaces in args.teams.items() for namespace in namespaces}
        directories: list[pulumi.Resource] = []
        if args.teams:
            ids = {team: args.team_ids[team] for team in args.teams}
            claim = self._claim(name, TEAM_DIRECTORIES_NAMESPACE, None, args, after)
            job_body = team_directories_job(ids)
            # Awaited until it completes, so no team's volume is mounted before its directory exists.
            directories.append(k8s.batch.v1.Job(
                f"{name}-team-directories", metadata=job_body["metadata"], spec=job_body["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, claim]),
            ))
        for namespace in args.namespaces:
            team = team_of.get(namespace)
            self._claim(name, namespace, team, args, pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, *directories]))
        self.claim_name = pulumi.Output.from_input(FSX_CLAIM)
        self.register_outputs({"claimName": self.claim_name})

    def _claim(
        self, name: str, namespace: str, team: Optional[str], args: TrainingStorageArgs, after: pulumi.ResourceOptions
    ) -> k8s.core.v1.PersistentVolumeClaim:
        """The namespace's volume and claim; a team's are named after the team, so switching a
        namespace to its team's directory makes new ones and deletes the old (data kept: Retain)."""
        stem = f"{name}-{namespace}" if team is None else f"{name}-{namespace}-{team}"
        volume_body = lustre_persistent_volume(namespace, args.volume, team)
        volume = k8s.core.v1.PersistentVolume(
            f"{stem}-volume", metadata=volume_body["metadata"], spec=volume_body["spec"], opts=after
        )
        claim_body = lustre_claim(namespace, team)
        return k8s.core.v1.PersistentVolumeClaim(
            f"{stem}-claim",
            metadata=claim_body["metadata"],
            spec=claim_body["spec"],
            opts=pulumi.ResourceOptions.merge(
                after, pulumi.ResourceOptions(depends_on=[volume], ignore_changes=list(CLAIM_IGNORED_CHANGES))
            ),
        )
