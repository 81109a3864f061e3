"""Storage's configuration rules (``config/storage_settings.py``): FSx sizes, throughput, the file
system's AZ, its data repository, backups and team directories; each refusal with its key path."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform import parse_platform_args
from tests.support.harness import run_main, stack_config
from tests.support.builders import prod_raw
from tests.support.storage_stacks import fsx


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(raw)
    return [str(p) for p in error.value.problems]


def test_export_to_a_read_write_bucket_is_accepted():
    raw = prod_raw()
    fsx(raw)["dataRepository"].update(bucket="gpu-training-prod-checkpoints", autoExport=True, fileSystemPath="/checkpoints")
    assert parse_platform_args(raw).storage.fsx.data_repository.auto_export


REJECTIONS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("capacity off the PERSISTENT_2 steps", lambda r: fsx(r).update(storageCapacityGib=3600), "storage.fsx.storageCapacityGib: 3600 is not 1200, 2400 or a multiple of 2400"),
    ("capacity below the smallest", lambda r: fsx(r).update(storageCapacityGib=600), "storage.fsx.storageCapacityGib: Input should be greater than or equal to 1200"),
    ("throughput FSx does not offer", lambda r: fsx(r).update(throughputMbpsPerTib=300), "storage.fsx.throughputMbpsPerTib: 300 is not one of 125, 250, 500, 1000"),
    ("file system away from the pools", lambda r: fsx(r).update(availabilityZone="us-west-2a"), "storage.fsx.availabilityZone: 'us-west-2a' is not the GPU pools' AZ (us-west-2b)"),
    ("file system in an AZ without a subnet", lambda r: fsx(r).update(availabilityZone="us-west-2d"), "storage.fsx.availabilityZone: 'us-west-2d' has no private subnet in the network"),
    (
        "pools in two AZs and no file system AZ",
        lambda r: (r["karpenter"]["gpuNodePools"][0].update(availabilityZone="us-west-2c"), fsx(r).pop("availabilityZone")),
        "storage.fsx.availabilityZone: is required: the GPU pools are in us-west-2b, us-west-2c; choose one of us-west-2b, us-west-2c",
    ),
    (
        "pools in two AZs and a file system in neither",
        lambda r: (r["karpenter"]["gpuNodePools"][0].update(availabilityZone="us-west-2c"), fsx(r).update(availabilityZone="us-west-2a")),
        "storage.fsx.availabilityZone: 'us-west-2a' is none of the GPU pools' AZs (us-west-2b, us-west-2c): Lustre traffic "
        "would cross AZs for every pool (latency, transfer charges); choose us-west-2b or us-west-2c",
    ),
    ("data repository outside s3Buckets", lambda r: fsx(r)["dataRepository"].update(bucket="other-bucket"), "storage.fsx.dataRepository.bucket: 'other-bucket' is not in s3Buckets (listed: 'gpu-training-prod-datasets', 'gpu-training-prod-checkpoints')"),
    ("export to a read-only bucket", lambda r: fsx(r)["dataRepository"].update(autoExport=True), "storage.fsx.dataRepository.autoExport: writes to 'gpu-training-prod-datasets', which s3Buckets declares read-only"),
    ("prefix with a leading slash", lambda r: fsx(r)["dataRepository"].update(prefix="/datasets"), "storage.fsx.dataRepository.prefix: is a key prefix: no leading '/'"),
    ("mount path that is not absolute", lambda r: fsx(r).update(mountPath="fsx"), "storage.fsx.mountPath: 'fsx' does not match"),
    ("add-on version that is not an EKS build", lambda r: fsx(r).update(csiDriverVersion="1.7.0"), "storage.fsx.csiDriverVersion: '1.7.0' does not match"),
    (
        "protected stack with a file system AZ derived from the pools",
        lambda r: fsx(r).pop("availabilityZone"),
        "storage.fsx.availabilityZone: must be set on a protected stack (cluster.protect): derived from the GPU pools "
        "it is 'us-west-2b' today, and moving a pool (e.g. to a Capacity Block's AZ) would change the file system's "
        "subnet, which replaces the file system and deletes its data; set availabilityZone: us-west-2b",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_storage_rules_reject(mutate, expected):
    raw = prod_raw()
    mutate(raw)
    problems = problems_of(raw)
    assert any(p.startswith(expected) for p in problems), problems


def test_prod_pins_the_file_system_to_the_az_it_derived_and_an_unprotected_stack_may_still_derive_it():
    # Pinned to what fsx_zone derived before the pin, so the next `pulumi up` keeps the same subnet.
    assert fsx(prod_raw())["availabilityZone"] == "us-west-2b"
    raw = prod_raw()
    del fsx(raw)["availabilityZone"]
    args_zone = fsx_zone_of(raw | {"cluster": {**raw["cluster"], "protect": False}})
    assert args_zone == "us-west-2b"
    assert parse_platform_args(prod_raw()).storage.fsx.availability_zone == "us-west-2b"
    # With the pin, moving the pools is refused (the AZ no longer matches) instead of moving the file system.
    moved = prod_raw()
    for pool in (moved["gpuNodeGroups"][0], moved["karpenter"]["gpuNodePools"][0]):
        pool["availabilityZone"] = "us-west-2c"
    assert any(p.startswith("storage.fsx.availabilityZone: 'us-west-2b' is not the GPU pools' AZ (us-west-2c)") for p in problems_of(moved))


def fsx_zone_of(raw: dict[str, Any]) -> str:
    from eks_gpu_training.config import fsx_zone, gpu_pool_zones

    args = parse_platform_args(raw)
    return fsx_zone(args.storage, args.network, gpu_pool_zones(args))


def test_with_pools_in_two_azs_every_az_the_message_offers_is_accepted_and_used():
    raw = prod_raw()
    raw["karpenter"]["gpuNodePools"][0]["availabilityZone"] = "us-west-2c"
    del fsx(raw)["availabilityZone"]
    [problem] = [p for p in problems_of(raw) if p.startswith("storage.fsx.availabilityZone")]
    offered = problem.rsplit("choose one of ", 1)[1].split(", ")
    assert offered == ["us-west-2b", "us-west-2c"]
    for zone in offered:
        fsx(raw)["availabilityZone"] = zone
        graph = run_main({**stack_config("prod"), **{f"eks-gpu-training:{k}": v for k, v in raw.items() if k != "region"}}, stack="prod")
        assert graph.error is None, repr(graph.error)
        subnets = {s.availability_zone: s.id for s in parse_platform_args(raw).network.subnets}
        assert graph.one("aws:fsx/lustreFileSystem:LustreFileSystem").inputs["subnetIds"] == subnets[zone]


def test_backups_of_a_file_system_linked_to_s3_are_refused():
    raw = prod_raw()
    fsx(raw)["automaticBackupRetentionDays"] = 7
    [problem] = [p for p in problems_of(raw) if p.startswith("storage.fsx.automaticBackupRetentionDays")]
    assert "FSx takes no backups of a file system linked to an S3 data repository" in problem


@pytest.mark.parametrize(("days", "expected"), [(91, "less than or equal to 90"), (-1, "greater than or equal to 0")])
def test_backup_retention_outside_what_fsx_allows_is_refused(days, expected):
    raw = prod_raw()
    fsx(raw)["automaticBackupRetentionDays"] = days
    assert any(p.startswith(f"storage.fsx.automaticBackupRetentionDays: Input should be {expected}") for p in problems_of(raw)), problems_of(raw)


def test_team_storage_without_a_teams_id_is_refused():
    from eks_gpu_training.workloads.training_storage import TrainingStorageArgs

    with pytest.raises(ConfigError, match="TrainingStorageArgs.team_ids: has no ID for red"):
        TrainingStorageArgs(volume=None, namespaces=["a"], teams={"red": ["a"]})
