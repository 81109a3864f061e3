"""Training storage: FSx for Lustre (security groups, file system, data repository, CSI driver,
volumes), the instance store (its user data: test_node_config.py), and the pods' storage requests."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from eks_gpu_training.aws.lustre_storage import (
    FSX_CSI_ADDON,
    FSX_CSI_CONTROLLER_SERVICE_ACCOUNT,
    LUSTRE_PORT_RANGES,
    data_repository_path,
)
from eks_gpu_training.config import ConfigError
from eks_gpu_training.config.team_settings import TeamConfig, team_gid
from eks_gpu_training.workloads.training_storage import team_directories_job_name
from eks_gpu_training.facts.instance_store import LOCAL_NVME_GB, ephemeral_storage_request
from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES
from eks_gpu_training.platform import GpuTrainingPlatform, parse_platform_args
from tests.support.harness import run_main, run_program, stack_config, stand_in_ref
from tests.support.builders import prod_raw

NS = "eks-gpu-training"
INGRESS, EGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"
CLUSTER_SG = "sg-0c1a55e7c1a55e7c1"  # the cluster security group PlausibleMocks gives eks.Cluster


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(raw)
    return [str(p) for p in error.value.problems]


# --- Lustre security groups ---------------------------------------------------------------------


def test_lustre_ports_are_open_exactly_between_the_clients_and_the_file_system(prod_graph):
    file_system = prod_graph.one(FILE_SYSTEM)
    (lustre_group,) = file_system.inputs["securityGroupIds"]
    rules = set()
    for type_, direction in ((INGRESS, "ingress"), (EGRESS, "egress")):
        for rule in prod_graph.of_type(type_):
            if lustre_group not in (rule.inputs["securityGroupId"], rule.inputs.get("referencedSecurityGroupId")):
                continue
            assert "cidrIpv4" not in rule.inputs, rule.name
            assert rule.inputs["ipProtocol"] == "tcp", rule.name
            name = {lustre_group: "filesystem", CLUSTER_SG: "clients"}
            rules.add((name[rule.inputs["securityGroupId"]], direction, rule.inputs["fromPort"], rule.inputs["toPort"], name[rule.inputs["referencedSecurityGroupId"]]))
    expected = set()
    for low, high in ((988, 988), (1018, 1023)):
        expected |= {
            ("filesystem", "ingress", low, high, "filesystem"),
            ("filesystem", "ingress", low, high, "clients"),
            ("filesystem", "egress", low, high, "filesystem"),
            ("filesystem", "egress", low, high, "clients"),
            ("clients", "ingress", low, high, "filesystem"),
        }
    assert rules == expected
    assert LUSTRE_PORT_RANGES == ((988, 988), (1018, 1023))


def test_file_system_is_persistent_in_the_pools_az_and_waits_for_its_rules(prod_graph):
    file_system = prod_graph.one(FILE_SYSTEM)
    inputs = file_system.inputs
    assert (inputs["deploymentType"], inputs["storageType"], inputs["fileSystemTypeVersion"]) == ("PERSISTENT_2", "SSD", "2.15")
    assert (inputs["storageCapacity"], inputs["perUnitStorageThroughput"]) == (2400, 250)
    # prod's pools are in us-west-2b, whose adopted private subnet is ...0002
    assert inputs["subnetIds"] == "subnet-0f1e2d3c4b5a60002"
    for rule in prod_graph.of_type(INGRESS) + prod_graph.of_type(EGRESS):
        if "lustre" in rule.name:
            assert prod_graph.depends_on(file_system, rule), rule.name


def test_data_repository_links_the_bucket_named_once_with_import_and_export(prod_graph):
    association = prod_graph.one("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert association.inputs["dataRepositoryPath"] == "s3://gpu-training-prod-datasets/"
    assert association.inputs["fileSystemPath"] == "/datasets"
    assert association.inputs["fileSystemId"] == prod_graph.one(FILE_SYSTEM).id
    # prod's datasets bucket is read-only to training, so the file system only imports from it
    assert association.inputs["s3"] == {"autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}
    assert data_repository_path("b", "/datasets/") == "s3://b/datasets/"


def test_a_bucket_made_in_the_same_program_links_by_identity_and_its_path_stays_an_output():
    import pulumi

    from eks_gpu_training.config import NetworkConfig, S3BucketConfig, StorageConfig, validate_storage

    bucket = pulumi.Output.from_input("datasets")
    network = NetworkConfig.model_validate({"create": True, "availabilityZones": ["us-west-2a", "us-west-2b"]})
    storage = StorageConfig.model_validate(
        {"fsx": {"enabled": True, "availabilityZone": "us-west-2a", "dataRepository": {"bucket": bucket, "autoExport": False}}}
    )
    assert validate_storage(storage, network, ["us-west-2a"], [S3BucketConfig(name=bucket)]) == []
    other = [S3BucketConfig(name=pulumi.Output.from_input("datasets"))]
    assert [str(p) for p in validate_storage(storage, network, ["us-west-2a"], other)] == [
        "storage.fsx.dataRepository.bucket: an Output (known after deployment) is not in s3Buckets "
        "(listed: an Output (known after deployment)); name it there once"
    ]
    assert isinstance(data_repository_path(bucket, "datasets"), pulumi.Output)


def test_csi_driver_is_the_eks_add_on_built_for_the_clusters_version_with_no_aws_role(prod_graph):
    addon = prod_graph.one("aws:eks/addon:Addon", "gpu-training-lustre-csi-driver")
    # The version is the answer of the add-on version lookup (PlausibleMocks answers v1.0.0-eksbuild.1).
    assert (addon.inputs["addonName"], addon.inputs["addonVersion"]) == (FSX_CSI_ADDON, "v1.0.0-eksbuild.1")
    # Static provisioning only: the controller calls no FSx API, so it gets no credentials at all,
    # and an empty list makes EKS delete the association a stack of an earlier version had.
    assert addon.inputs["podIdentityAssociations"] == []
    roles = [r.name for r in prod_graph.resources if r.type == "aws:iam/role:Role" and "lustre" in r.name]
    assert roles == []
    attachments = [r for r in prod_graph.resources if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"]
    assert [a.name for a in attachments if "FSx" in str(a.inputs.get("policyArn"))] == []
    associations = [r for r in prod_graph.resources if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"]
    assert FSX_CSI_CONTROLLER_SERVICE_ACCOUNT not in [a.inputs["serviceAccount"] for a in associations]
    assert "configurationValues" not in addon.inputs


def test_each_training_namespace_gets_a_static_volume_of_its_team_directory_bound_to_its_claim(prod_graph):
    # prod's two namespaces, training (team pretraining) and research (team research), each a volume
    # of its team's directory of the one file system; kube-system one of the whole, for the Job that
    # makes the directories
    volumes = {r.inputs["spec"]["claimRef"]["namespace"]: r for r in prod_graph.resources if r.inputs.get("kind") == "PersistentVolume"}
    claims = {r.inputs["metadata"]["namespace"]: r for r in prod_graph.resources if r.inputs.get("kind") == "PersistentVolumeClaim"}
    assert sorted(volumes) == sorted(claims) == ["kube-system", "research", "training"]
    file_system = prod_graph.one(FILE_SYSTEM)
    addon = prod_graph.one("aws:eks/addon:Addon", "gpu-training-lustre-csi-driver")
    directories = prod_graph.one("kubernetes:batch/v1:Job", "gpu-training-training-storage-team-directories")
    for namespace, team in (("kube-system", None), ("training", "pretraining"), ("research", "research")):
        volume, claim = volumes[namespace], claims[namespace]
        claim_name = "fsx-lustre" if team is None else f"fsx-lustre-{team}"
        spec = volume.inputs["spec"]
        assert spec["csi"]["driver"] == "fsx.csi.aws.com"
        assert spec["csi"]["volumeHandle"] == file_system.id if team is None else f"{file_system.id}:{team}"
        assert spec["csi"]["volumeAttributes"]["mountname"] == "abcdef12" if team is None else f"abcdef12/teams/{team}"
        assert spec["claimRef"] == {"namespace": namespace, "name": claim_name}
        assert spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["accessModes"] == ["ReadWriteMany"]
        # A volume is cluster-wide: each namespace's has a name of its own.
        assert volume.inputs["metadata"]["name"] == f"{namespace}-{claim_name}"
        assert claim.inputs["metadata"] == {"name": claim_name, "namespace": namespace}
        assert claim.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
        # The claim asks for FSx's smallest size, not the file system's (2400 GiB): any size binds it.
        assert claim.inputs["spec"]["storageClassName"] == ""
        assert claim.inputs["spec"]["resources"] == {"requests": {"storage": "1200Gi"}}
        assert spec["capacity"] == {"storage": "2400Gi"}
        assert prod_graph.depends_on(volume, addon)
        assert prod_graph.depends_on(claim, volume)
        # A team's directory exists before its volume can be mounted.
        assert (team is None) or prod_graph.depends_on(claim, directories)


def test_the_directories_job_gives_each_team_its_directory_and_nothing_else(prod_graph):
    job = prod_graph.one("kubernetes:batch/v1:Job", "gpu-training-training-storage-team-directories")
    pod = job.inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    script = container["command"][2]
    for team in ("pretraining", "research"):
        gid = team_gid(TeamConfig(name=team, namespaces=["x"]))
        assert f"mkdir -p /fsx/teams/{team}\nchown {gid}:{gid} /fsx/teams/{team}\nchmod 2770 /fsx/teams/{team}" in script
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-lustre"}}]
    assert job.inputs["metadata"]["namespace"] == "kube-system"


def test_the_directories_job_is_a_new_one_when_the_teams_or_their_ids_change():
    assert team_directories_job_name({"a": 100000}) == team_directories_job_name({"a": 100000})
    assert team_directories_job_name({"a": 100000}) != team_directories_job_name({"a": 100001})
    assert team_directories_job_name({"a": 100000}) != team_directories_job_name({"a": 100000, "b": 100002})


def test_training_job_mounts_the_claim_and_requests_half_the_instance_store(prod_graph):
    # prod's rl-training (a Job in training) and finetune (a TrainJob in research, whose pod template
    # is its runtime's): both on p5-training
    job = next(r for r in prod_graph.resources if r.inputs.get("kind") == "Job" and r.inputs["metadata"]["name"] == "rl-training")
    runtime = next(r for r in prod_graph.resources if r.inputs.get("kind") == "TrainingRuntime")
    (replicated,) = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]
    pods = {"rl-training": job.inputs["spec"]["template"]["spec"], "finetune": replicated["template"]["spec"]["template"]["spec"]}
    for (app, pod), team in zip(pods.items(), ("pretraining", "research"), strict=True):
        (trainer,) = pod["containers"]
        assert {"name": "shared-fs", "mountPath": "/fsx"} in trainer["volumeMounts"]
        assert {"name": "shared-fs", "persistentVolumeClaim": {"claimName": f"fsx-lustre-{team}"}} in pod["volumes"], app
        # CHECKPOINT_DIR: the app's folder of its team's directory.
        assert {"name": "shared-fs", "mountPath": "/checkpoints", "subPath": f"checkpoints/{'training' if team == 'pretraining' else 'research'}/{app}"} in trainer["volumeMounts"]
        # p5.48xlarge: 8 x 3.8 TB = 30400 GB; half of it in GiB
        assert trainer["resources"]["requests"]["ephemeral-storage"] == "14156Gi"
        assert "ephemeral-storage" not in trainer["resources"]["limits"]
    # A dependency on a component is one on its children: the job registers once its claim exists
    # (a TrainJob's component waits for its runtime's needs only, the TrainJob itself for the claim).
    storage = prod_graph.one("eks-gpu-training:index:TrainingStorage")
    training_jobs = prod_graph.of_type("eks-gpu-training:index:TrainingJob")
    assert len(training_jobs) == 2
    for training_job in training_jobs:
        made_pods = [r for r in prod_graph.children(training_job) if r.inputs.get("kind") in ("Job", "TrainJob")]
        assert len(made_pods) == 1
        assert all(prod_graph.depends_on(training_job, child) or prod_graph.depends_on(made_pods[0], child)
                   for child in prod_graph.children(storage))


def test_the_claim_ignores_its_request_so_a_claim_made_at_another_size_never_fails_an_update(prod_graph):
    # The API server refuses a request change on a statically bound claim, and pulumi-kubernetes
    # sends one as an update: a claim created at another size would fail every `pulumi up`.
    claims = [r for r in prod_graph.resources if r.inputs.get("kind") == "PersistentVolumeClaim"]
    assert [c.ignore_changes for c in claims] == [["spec.resources"]] * 3  # kube-system's, training's and research's
    volumes = [r for r in prod_graph.resources if r.inputs.get("kind") == "PersistentVolume"]
    assert len(volumes) == 3
    assert not any(v.ignore_changes for v in volumes)  # the volume's capacity follows the file system


def test_export_to_a_read_write_bucket_is_accepted():
    raw = prod_raw()
    fsx(raw)["dataRepository"].update(bucket="gpu-training-prod-checkpoints", autoExport=True, fileSystemPath="/checkpoints")
    assert parse_platform_args(raw).storage.fsx.data_repository.auto_export


def test_mount_path_is_configurable():
    raw = prod_raw()
    raw["storage"]["fsx"]["mountPath"] = "/data"
    from eks_gpu_training.workloads.scheduling_policies import training_job_spec
    from eks_gpu_training.workloads.templates import training_pod_template

    args = parse_platform_args(raw)
    pod = training_pod_template(training_job_spec(args.scheduling.training_apps[0], args))["spec"]
    assert {"name": "shared-fs", "mountPath": "/data"} in pod["containers"][0]["volumeMounts"]


def test_dev_has_no_file_system_but_requests_its_l40s_instance_store(dev_graph):
    assert dev_graph.of_type(FILE_SYSTEM) == []
    assert [r for r in dev_graph.resources if r.inputs.get("kind") in ("PersistentVolume", "PersistentVolumeClaim")] == []
    job = next(r for r in dev_graph.resources if r.inputs.get("kind") == "Job")
    (trainer,) = job.inputs["spec"]["template"]["spec"]["containers"]
    assert trainer["resources"]["requests"]["ephemeral-storage"] == "116Gi"  # g6e.xlarge: 250 GB / 2
    # Its checkpoint directory is on the instance store too, an emptyDir that lasts as long as the pod.
    assert [m["name"] for m in trainer["volumeMounts"]] == ["dshm", "checkpoints"]


def test_instance_store_none_requests_no_ephemeral_storage():
    raw = prod_raw()
    raw["storage"]["instanceStore"] = "none"
    # Without the array, the pools' parallel image pulls would be refused (test_image_pull.py).
    raw["gpuNodeGroups"][0]["fastImagePull"] = raw["karpenter"]["gpuNodePools"][0]["fastImagePull"] = False
    from eks_gpu_training.workloads.scheduling_policies import training_job_spec

    args = parse_platform_args(raw)
    assert training_job_spec(args.scheduling.training_apps[0], args).ephemeral_storage is None


def test_growing_the_file_system_changes_its_capacity_and_the_volumes_but_never_the_claim():
    """FSx grows a file system in place (UpdateFileSystem StorageCapacity); the graph shows the
    change reaches the file system's capacity and the volumes' sizes, nothing else: the claim's
    request is not tied to the size, so pulumi-kubernetes sends it no update the API server would refuse."""

    def graph(capacity: int):
        raw = prod_raw(topologyLabeler={"enabled": False})
        raw["storage"]["fsx"]["storageCapacityGib"] = capacity
        args = parse_platform_args(raw)
        result = run_program(lambda: GpuTrainingPlatform("gpu", args))
        assert result.error is None, repr(result.error)
        return {r.name: r.inputs for r in result.resources}

    before, after = graph(2400), graph(4800)
    changed = sorted(name for name in before if before[name] != after[name])
    # prod's namespaces, training and research, have a volume each, and kube-system one of the whole
    assert changed == ["gpu-lustre-file-system", "gpu-training-storage-kube-system-volume",
                       "gpu-training-storage-research-research-volume", "gpu-training-storage-training-pretraining-volume"]
    assert after["gpu-lustre-file-system"]["storageCapacity"] == 4800


# --- configuration rules ---------------------------------------------------------------------------


def fsx(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["storage"]["fsx"]


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


# --- instance store ------------------------------------------------------------------------------


def test_every_catalog_type_has_its_instance_store_size():
    assert sorted(LOCAL_NVME_GB) == sorted(GPU_INSTANCE_TYPES)
    assert ephemeral_storage_request(["p5.48xlarge", "p4de.24xlarge"]) == "3725Gi"  # p4de's 8000 GB / 2
    assert ephemeral_storage_request(["m7i.large"]) is None


def test_instance_store_sizes_match_karpenters_instance_type_reference(instance_type_docs):
    docs = instance_type_docs
    for instance_type, size in LOCAL_NVME_GB.items():
        assert int(docs[instance_type]["karpenter.k8s.aws/instance-local-nvme"]) == size, instance_type


def test_karpenter_pools_ask_for_the_raid0_instance_store_policy(prod_graph):
    node_class = prod_graph.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    assert node_class.inputs["spec"]["instanceStorePolicy"] == "RAID0"


def test_instance_store_none_leaves_karpenter_nodes_disks_alone():
    from eks_gpu_training.addons.gpu_node_pool import ec2_node_class_spec

    pool = parse_platform_args(prod_raw()).karpenter.gpu_node_pools[0]
    assert "instanceStorePolicy" not in ec2_node_class_spec(pool, node_role_name="r", subnet_ids=["subnet-1"], security_group_ids=["sg-1"])


def test_lustre_storage_refuses_a_size_fsx_does_not_offer_before_registering_anything():
    from eks_gpu_training import LustreStorage, LustreStorageArgs
    from eks_gpu_training.config import FsxLustreConfig

    config = FsxLustreConfig(enabled=True, storage_capacity_gib=3000)
    graph = run_program(lambda: LustreStorage("fs", LustreStorageArgs(config=config, cluster=stand_in_ref(), subnet_id="subnet-1")))
    assert isinstance(graph.error, ConfigError)
    assert "LustreStorage(fs).config.storageCapacityGib: 3000 is not 1200, 2400 or a multiple of 2400" in str(graph.error)
    assert graph.resources == []


def test_kueue_admits_jobs_without_counting_their_ephemeral_storage():
    # Kueue refuses a workload requesting a resource its ClusterQueue does not cover; the queues count
    # what the quota counts, and neither counts the instance-store ephemeral storage.
    from eks_gpu_training.addons.kueue import kueue_manager_config

    args = parse_platform_args(prod_raw())
    excluded = kueue_manager_config(args.kueue, ["training"])["resources"]["excludeResourcePrefixes"]
    assert "ephemeral-storage" in excluded


# --- the file system's data survives -------------------------------------------------------------


def test_prod_file_system_is_protected_and_linked_to_s3_so_it_takes_no_backups(prod_graph):
    file_system = prod_graph.one(FILE_SYSTEM)
    inputs = file_system.inputs
    assert file_system.protect
    # Prod's file system is linked to its datasets bucket, and FSx backs up no linked file system
    # (API CreateBackup): asking for backups would fail the create, a final backup the delete.
    assert inputs["skipFinalBackup"] is True
    assert "finalBackupTags" not in inputs
    assert (inputs["automaticBackupRetentionDays"], inputs["copyTagsToBackups"]) == (0, False)
    # Set at creation only: a file system made without it must not be replaced to get it.
    assert file_system.ignore_changes == ["copyTagsToBackups"]


def test_an_unlinked_file_system_keeps_a_week_of_backups_and_takes_a_final_one():
    raw = prod_raw(topologyLabeler={"enabled": False})
    del fsx(raw)["dataRepository"]
    result = run_program(lambda: GpuTrainingPlatform("gpu", parse_platform_args(raw)))
    assert result.error is None, repr(result.error)
    file_system = result.one(FILE_SYSTEM)
    inputs = file_system.inputs
    assert file_system.protect
    # pulumi-aws defaults skipFinalBackup to true: without this a delete would keep nothing.
    assert inputs["skipFinalBackup"] is False
    stack_tags = {k: v for k, v in inputs["tags"].items() if k != "Name"}
    assert inputs["finalBackupTags"] == stack_tags
    assert stack_tags["environment"] == "prod"
    assert stack_tags["owner"] == "ml-platform"
    assert (inputs["automaticBackupRetentionDays"], inputs["copyTagsToBackups"]) == (7, True)


def test_an_unprotected_stack_leaves_the_file_system_deletable_and_retention_is_configurable():
    raw = prod_raw(topologyLabeler={"enabled": False})
    raw["cluster"]["protect"] = False
    del fsx(raw)["dataRepository"]
    fsx(raw)["automaticBackupRetentionDays"] = 0
    result = run_program(lambda: GpuTrainingPlatform("gpu", parse_platform_args(raw)))
    assert result.error is None, repr(result.error)
    file_system = result.one(FILE_SYSTEM)
    assert not file_system.protect
    assert file_system.inputs["automaticBackupRetentionDays"] == 0
    assert file_system.inputs["skipFinalBackup"] is False


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
