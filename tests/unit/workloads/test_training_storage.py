"""The Kubernetes side of training storage (``workloads/training_storage.py``): each training namespace's
static FSx volume and claim, the team directories Job, and what training pods mount and request."""

from __future__ import annotations



from eks_gpu_training.config.team_settings import TeamConfig, team_gid
from eks_gpu_training.workloads.training_storage import team_directories_job_name
from eks_gpu_training.platform import GpuTrainingPlatform, parse_platform_args
from tests.support.harness import run_program
from tests.support.builders import prod_raw
from tests.support.storage_stacks import FILE_SYSTEM


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
