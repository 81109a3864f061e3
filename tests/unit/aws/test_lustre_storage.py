"""``LustreStorage`` on AWS (``aws/lustre_storage.py``): the security groups, the file system, its data
repository, the CSI driver add-on, backups and deletion protection; Karpenter's RAID0 instance store."""

from __future__ import annotations



from eks_gpu_training.aws.lustre_storage import (
    FSX_CSI_ADDON,
    FSX_CSI_CONTROLLER_SERVICE_ACCOUNT,
    LUSTRE_PORT_RANGES,
    data_repository_path,
)
from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform import GpuTrainingPlatform, parse_platform_args
from tests.support.harness import run_program, stand_in_ref
from tests.support.builders import prod_raw
from tests.support.storage_stacks import FILE_SYSTEM, fsx


INGRESS, EGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
CLUSTER_SG = "sg-0c1a55e7c1a55e7c1"  # the cluster security group PlausibleMocks gives eks.Cluster


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
