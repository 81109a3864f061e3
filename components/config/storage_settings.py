"""Storage for training: an FSx for Lustre file system shared by the training namespaces, and the
GPU nodes' instance-store NVMe as one RAID0 array for ephemeral storage."""

from __future__ import annotations

from typing import Literal, Optional, Sequence

from pydantic import Field

from .access import BucketName, S3BucketConfig
from .base import _AZ, _Model
from .problems import Problem
from .inputs import shown
from .network_settings import NetworkConfig, network_zones

FSX_PERSISTENT_2_CAPACITY_STEP_GIB = 2400
"""PERSISTENT_2 SSD file systems take 1200 GiB, 2400 GiB or a multiple of 2400 GiB
(docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html, StorageCapacity)."""

FSX_PERSISTENT_2_THROUGHPUTS = (125, 250, 500, 1000)
"""MB/s per TiB of storage a PERSISTENT_2 file system offers (same page, PerUnitStorageThroughput)."""


DEFAULT_BACKUP_RETENTION_DAYS = 7
"""Automatic daily backups FSx keeps of a file system it can back up: a week of restore points."""


class DataRepositoryConfig(_Model):
    """An S3 prefix linked to a directory of the file system: files load from S3 on first read, and
    new or changed files are exported back (checkpoints reach S3 without a copy step)."""

    bucket: BucketName
    """S3 bucket, one of the stack's `s3Buckets` (an Output must be the very one `s3Buckets` holds) (required; `readWrite` access when autoExport is on)."""
    prefix: str = ""
    """Key prefix in the bucket, without a leading slash. Default: the whole bucket."""
    file_system_path: str = Field(default="/s3", pattern=r"^/[^\s]*$")
    """Directory of the file system the prefix appears at. Default: /s3."""
    auto_export: bool = True
    """Export new, changed and deleted files to S3 automatically. Default: true."""


class FsxLustreConfig(_Model):
    """A persistent FSx for Lustre file system in the GPU pools' AZ, mounted by training pods."""

    enabled: bool = False
    """Create the file system, its security group, the FSx CSI driver and a volume in each training namespace. Default: false."""
    storage_capacity_gib: int = Field(default=1200, ge=1200)
    """Storage in GiB: 1200, 2400 or a multiple of 2400; it can grow in place but never shrink. Default: 1200."""
    throughput_mbps_per_tib: int = 250
    """Throughput per TiB of storage (125, 250, 500 or 1000 MB/s/TiB). Default: 250."""
    availability_zone: Optional[str] = Field(default=None, pattern=_AZ)
    """AZ of the file system; required when `cluster.protect` is on, since a derived AZ follows the pools and a new AZ replaces the file system and its data. Default: the AZ the GPU pools with a fixed AZ share (the network's first AZ when none fixes one)."""
    automatic_backup_retention_days: Optional[int] = Field(default=None, ge=0, le=90)
    """Days FSx keeps its automatic daily backups (0-90; 0 turns them off), changed in place; incremental, billed per GB-month (docs.aws.amazon.com/fsx/latest/LustreGuide/using-backups-fsx.html). FSx backs up no file system linked to S3: 0 with `dataRepository`. Default: 7, or 0 with `dataRepository`."""

    @property
    def backups(self) -> bool:
        """FSx can back the file system up: backups (automatic, user-initiated, final) are only for
        persistent file systems not linked to an S3 data repository (FSx API CreateBackup;
        docs.aws.amazon.com/fsx/latest/LustreGuide/using-backups-fsx.html)."""
        return self.data_repository is None

    @property
    def backup_retention_days(self) -> int:
        """``automatic_backup_retention_days``, else 7 days when FSx can back the file system up, 0 when not."""
        if self.automatic_backup_retention_days is not None:
            return self.automatic_backup_retention_days
        return DEFAULT_BACKUP_RETENTION_DAYS if self.backups else 0

    mount_path: str = Field(default="/fsx", pattern=r"^/[^\s]*$")
    """Where training containers mount the file system. Default: /fsx."""
    data_repository: Optional[DataRepositoryConfig] = None
    """An S3 data repository association. Default: none."""
    csi_driver_version: Optional[str] = Field(default=None, pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
    """Build of the EKS add-on aws-fsx-csi-driver to pin. Default: EKS's default build for the cluster's Kubernetes version, looked up at deployment (it moves with the version, not with each new build)."""


class StorageConfig(_Model):
    """Storage of the training platform: shared Lustre and the GPU nodes' instance-store NVMe."""

    fsx: FsxLustreConfig = FsxLustreConfig()
    """FSx for Lustre. Default: off."""
    instance_store: Literal["raid0", "none"] = "raid0"
    """GPU nodes' instance-store NVMe: raid0 makes one array for kubelet and containerd (ephemeral storage, image cache); none leaves the disks unused. Default: raid0."""


def fsx_zone(storage: StorageConfig, network: NetworkConfig, pool_zones: list[Optional[str]]) -> Optional[str]:
    """The file system's AZ: the configured one (with pools in several AZs, one of theirs), else the
    one AZ the GPU pools with a fixed AZ share, else (no pool fixes one) the network's first AZ. None
    when the pools are in several AZs and none is configured (``validate_storage`` reports it)."""
    if storage.fsx.availability_zone is not None:
        return storage.fsx.availability_zone
    fixed = {zone for zone in pool_zones if zone is not None}
    if not fixed:
        return next(iter(network_zones(network)), None)
    return fixed.pop() if len(fixed) == 1 else None


def validate_fsx_file_system(fsx: FsxLustreConfig, path: str) -> list[Problem]:
    """Storage capacity, throughput and backups a PERSISTENT_2 SSD file system accepts."""
    problems = []
    if fsx.data_repository is not None and fsx.backup_retention_days:
        problems.append(
            Problem(
                f"{path}.automaticBackupRetentionDays",
                f"is {fsx.backup_retention_days}, but FSx takes no backups of a file system linked to an S3 data repository "
                "(dataRepository): leave it unset or 0, and keep what must survive the file system under the repository's "
                "path with autoExport on, or drop dataRepository to have FSx back the file system up",
            )
        )
    capacity = fsx.storage_capacity_gib
    if capacity not in (1200, 2400) and capacity % FSX_PERSISTENT_2_CAPACITY_STEP_GIB:
        problems.append(Problem(f"{path}.storageCapacityGib", f"{capacity} is not 1200, 2400 or a multiple of 2400 (FSx PERSISTENT_2 SSD)"))
    if fsx.throughput_mbps_per_tib not in FSX_PERSISTENT_2_THROUGHPUTS:
        allowed = ", ".join(map(str, FSX_PERSISTENT_2_THROUGHPUTS))
        problems.append(Problem(f"{path}.throughputMbpsPerTib", f"{fsx.throughput_mbps_per_tib} is not one of {allowed}"))
    return problems


def validate_storage(
    storage: StorageConfig,
    network: NetworkConfig,
    pool_zones: list[Optional[str]],
    s3_buckets: Sequence[S3BucketConfig] = (),
    protect: bool = False,
) -> list[Problem]:
    """Rules of the storage section: FSx sizes, an AZ of the GPU pools' (one of them, named, when
    they are in several) that has a subnet, named explicitly on a protected stack (``protect``:
    ``cluster.protect``),
    and a data repository in a bucket of the stack's `s3Buckets` (the one place buckets are named),
    declared `readWrite` when the file system exports to it."""
    problems: list[Problem] = []
    fsx = storage.fsx
    if not fsx.enabled:
        return problems
    path = "storage.fsx"
    problems.extend(validate_fsx_file_system(fsx, path))
    zones = network_zones(network)
    fixed = sorted({zone for zone in pool_zones if zone is not None})
    zone = fsx_zone(storage, network, pool_zones)
    # With pools in several AZs the file system sits in the one named, and the other pools' Lustre
    # traffic crosses AZs: the stack chooses which pools that is, among the pools' own AZs.
    choices = [z for z in fixed if z in zones] or zones
    if zone is None:
        problems.append(
            Problem(f"{path}.availabilityZone", f"is required: the GPU pools are in {', '.join(fixed)}; choose one of {', '.join(choices)}")
        )
    elif zone not in zones:
        problems.append(Problem(f"{path}.availabilityZone", f"'{zone}' has no private subnet in the network; allowed: {', '.join(choices)}"))
    elif protect and fsx.availability_zone is None:
        # A derived AZ follows the pools: moving one (to a Capacity Block's AZ, as docs/day-two.md
        # advises) would move the file system's subnet, and pulumi-aws replaces a LustreFileSystem
        # whose subnetIds change (ForceNew), deleting its data.
        problems.append(
            Problem(
                f"{path}.availabilityZone",
                f"must be set on a protected stack (cluster.protect): derived from the GPU pools it is '{zone}' today, "
                "and moving a pool (e.g. to a Capacity Block's AZ) would change the file system's subnet, which "
                f"replaces the file system and deletes its data; set availabilityZone: {zone}",
            )
        )
    elif fixed and zone not in fixed:
        which = f"not the GPU pools' AZ ({fixed[0]})" if len(fixed) == 1 else f"none of the GPU pools' AZs ({', '.join(fixed)})"
        problems.append(
            Problem(
                f"{path}.availabilityZone",
                f"'{zone}' is {which}: Lustre traffic would cross AZs for every pool (latency, transfer charges); "
                f"choose {' or '.join(choices)}",
            )
        )
    repository = fsx.data_repository
    if repository is not None:
        # An Output bucket name is found by identity: its access is known only through the s3Buckets entry holding it.
        access = {bucket.name: bucket.access for bucket in s3_buckets}
        if repository.bucket not in access:
            listed = ", ".join(shown(name) for name in access) or "none"
            problems.append(
                Problem(f"{path}.dataRepository.bucket", f"{shown(repository.bucket)} is not in s3Buckets (listed: {listed}); name it there once")
            )
        elif repository.auto_export and access[repository.bucket] != "readWrite":
            problems.append(
                Problem(
                    f"{path}.dataRepository.autoExport",
                    f"writes to {shown(repository.bucket)}, which s3Buckets declares read-only; set autoExport: false or access: readWrite",
                )
            )
        if repository.prefix.startswith("/"):
            problems.append(Problem(f"{path}.dataRepository.prefix", "is a key prefix: no leading '/'"))
    return problems
