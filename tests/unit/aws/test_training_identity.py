"""Training pods' AWS credentials: a ServiceAccount in every training namespace, an EKS Pod Identity
role with least-privilege access to the stack's buckets, and jobs that run as it."""

from __future__ import annotations

import json

import pulumi
import pytest

from eks_gpu_training import S3BucketConfig, TrainingIdentity, TrainingIdentityArgs, TrainingJob, TrainingJobArgs
from eks_gpu_training.aws.training_identity import s3_access_policy
from eks_gpu_training.workloads.templates import training_pod_template
from tests.support.harness import ACCOUNT_ID, research_cluster, run_main, run_program, stack_config
from tests.support.builders import NETWORK, p5_job, problems_of

JOB = "kubernetes:batch/v1:Job"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IDENTITY = "eks-gpu-training:index:TrainingIdentity"


def training_job_of(graph):
    (job,) = [r for r in graph.of_type(JOB) if r.inputs["metadata"]["name"].startswith("rl-training")]
    return job


# --- the policy (pure) -----------------------------------------------------------------------------


def test_read_buckets_get_list_and_get_only_on_exactly_those_buckets():
    policy = s3_access_policy("aws", [S3BucketConfig(name="datasets")])
    assert policy["Statement"] == [
        {"Sid": "ReadBuckets", "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": ["arn:aws:s3:::datasets"]},
        {"Sid": "ReadObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::datasets/*"]},
    ]


def test_read_write_buckets_also_write_delete_and_finish_multipart_uploads_but_touch_no_configuration():
    policy = s3_access_policy("aws-us-gov", [S3BucketConfig(name="datasets"), S3BucketConfig(name="checkpoints", access="readWrite")])
    read_write = {s["Sid"]: s for s in policy["Statement"] if s["Sid"].startswith("ReadWrite")}
    assert read_write["ReadWriteBuckets"]["Resource"] == ["arn:aws-us-gov:s3:::checkpoints"]
    assert read_write["ReadWriteObjects"] == {
        "Sid": "ReadWriteObjects",
        "Effect": "Allow",
        "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
        "Resource": ["arn:aws-us-gov:s3:::checkpoints/*"],
    }
    actions = {action for statement in policy["Statement"] for action in statement["Action"]}
    assert not any("*" in action or "Acl" in action or "Policy" in action for action in actions)


def test_each_bucket_is_reached_only_while_its_own_account_owns_it():
    policy = s3_access_policy("aws", [
        S3BucketConfig(name="datasets"),
        S3BucketConfig(name="shared-corpus", account_id="999988887777"),
        S3BucketConfig(name="checkpoints", access="readWrite"),
    ], account_id="444455556666")
    by_sid = {s["Sid"]: (s["Resource"], s["Condition"]["StringEquals"]["s3:ResourceAccount"]) for s in policy["Statement"]}
    assert by_sid == {
        "ReadBuckets": (["arn:aws:s3:::datasets"], "444455556666"),
        "ReadObjects": (["arn:aws:s3:::datasets/*"], "444455556666"),
        "Read999988887777Buckets": (["arn:aws:s3:::shared-corpus"], "999988887777"),
        "Read999988887777Objects": (["arn:aws:s3:::shared-corpus/*"], "999988887777"),
        "ReadWriteBuckets": (["arn:aws:s3:::checkpoints"], "444455556666"),
        "ReadWriteObjects": (["arn:aws:s3:::checkpoints/*"], "444455556666"),
    }


def test_a_bucket_account_that_is_not_twelve_digits_is_refused():
    with pytest.raises(ValueError, match="account_id|accountId"):
        S3BucketConfig.model_validate({"name": "datasets", "accountId": "4444"})


# --- the stacks -------------------------------------------------------------------------------------


def test_every_training_namespace_gets_the_training_service_account_without_api_token(stack_graph):
    _, graph = stack_graph
    accounts = [r for r in graph.of_type(SERVICE_ACCOUNT) if r.inputs["metadata"]["namespace"] == "training"]
    assert [a.inputs["metadata"]["name"] for a in accounts] == ["training"]
    assert accounts[0].inputs["automountServiceAccountToken"] is False


def test_prod_training_pods_get_their_team_role_for_exactly_its_buckets_and_prefix(prod_graph):
    for namespace, team in (("training", "pretraining"), ("research", "research")):
        association = prod_graph.one(ASSOCIATION, f"gpu-training-training-identity-{namespace}")
        assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == (namespace, "training")
        assert association.inputs["roleArn"] == f"arn:aws:iam::{ACCOUNT_ID}:role/gpu-training-training-identity-team-{team}-role-1a2b3c"
        policy = json.loads(prod_graph.one(ROLE_POLICY, f"gpu-training-training-identity-team-{team}-s3-access").inputs["policy"])
        resources = {resource for statement in policy["Statement"] for resource in statement["Resource"]}
        assert resources == {
            "arn:aws:s3:::gpu-training-prod-datasets",
            f"arn:aws:s3:::gpu-training-prod-datasets/teams/{team}/*",
            "arn:aws:s3:::gpu-training-prod-checkpoints",
            f"arn:aws:s3:::gpu-training-prod-checkpoints/teams/{team}/*",
        }
        listing = [statement for statement in policy["Statement"] if "s3:ListBucket" in statement["Action"]]
        assert [statement["Condition"]["StringLike"] for statement in listing] == [{"s3:prefix": [f"teams/{team}/*"]}] * 2
        # Every statement holds only while the stack's own account owns the bucket.
        assert {statement["Condition"]["StringEquals"]["s3:ResourceAccount"] for statement in policy["Statement"]} == {ACCOUNT_ID}
    # With every namespace in a team, no role reaches whole buckets.
    assert [r.name for r in prod_graph.of_type(ROLE_POLICY) if r.name == "gpu-training-training-identity-s3-access"] == []


def test_a_team_role_lists_and_touches_only_keys_under_its_prefix():
    policy = s3_access_policy(
        "aws", [S3BucketConfig(name="datasets"), S3BucketConfig(name="checkpoints", access="readWrite")], prefix="teams/research"
    )
    assert policy["Statement"] == [
        {"Sid": "ReadBucketsLocation", "Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": ["arn:aws:s3:::datasets"]},
        {"Sid": "ReadBuckets", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::datasets"],
         "Condition": {"StringLike": {"s3:prefix": ["teams/research/*"]}}},
        {"Sid": "ReadObjects", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::datasets/teams/research/*"]},
        {"Sid": "ReadWriteBucketsLocation", "Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": ["arn:aws:s3:::checkpoints"]},
        {"Sid": "ReadWriteBuckets", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::checkpoints"],
         "Condition": {"StringLike": {"s3:prefix": ["teams/research/*"]}}},
        {"Sid": "ReadWriteObjects", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
         "Resource": ["arn:aws:s3:::checkpoints/teams/research/*"]},
    ]


def test_a_namespace_in_no_team_keeps_the_whole_bucket_role_and_teams_their_own():
    def program():
        TrainingIdentity(
            "identity",
            TrainingIdentityArgs(
                cluster=research_cluster(NETWORK), namespaces=["a", "b", "shared"], service_account="training",
                s3_buckets=[S3BucketConfig(name="datasets")], teams={"red": ["a"], "blue": ["b"]},
            ),
        )

    graph = run_program(program)
    assert graph.error is None, graph.error
    roles = {r.name: r for r in graph.of_type(ROLE_POLICY)}
    assert sorted(roles) == ["identity-s3-access", "identity-team-blue-s3-access", "identity-team-red-s3-access"]
    assert "teams/" not in roles["identity-s3-access"].inputs["policy"]
    by_namespace = {r.inputs["namespace"]: r.inputs["roleArn"] for r in graph.of_type(ASSOCIATION)}
    assert by_namespace["a"].split("/")[-1].startswith("identity-team-red-role")
    assert by_namespace["b"].split("/")[-1].startswith("identity-team-blue-role")
    assert by_namespace["shared"].split("/")[-1].startswith("identity-role")


def test_a_team_namespace_outside_the_namespaces_is_refused():
    def program():
        TrainingIdentityArgs(cluster=research_cluster(NETWORK), namespaces=["a"], service_account="training", teams={"red": ["x"]})

    assert "TrainingIdentityArgs.teams: names x" in str(run_program(program).error)


def test_the_training_job_runs_as_the_account_and_waits_for_its_association_and_permissions(prod_graph):
    job = training_job_of(prod_graph)
    pod = job.inputs["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "training"
    assert pod["automountServiceAccountToken"] is False
    # Pod Identity injects credentials when a pod is created: the association must exist first.
    for name, kind in (("gpu-training-training-identity-training", ASSOCIATION), ("gpu-training-training-identity-team-pretraining-s3-access", ROLE_POLICY)):
        assert prod_graph.depends_on(job, prod_graph.one(kind, name)), name
    account = next(r for r in prod_graph.of_type(SERVICE_ACCOUNT) if r.inputs["metadata"]["namespace"] == "training")
    assert prod_graph.depends_on(job, account)


def test_without_buckets_or_policies_there_is_no_role(dev_graph):
    assert dev_graph.of_type(IDENTITY) == []
    assert [r.name for r in dev_graph.of_type(ASSOCIATION) if "training-identity" in r.name] == []
    assert training_job_of(dev_graph).inputs["spec"]["template"]["spec"]["serviceAccountName"] == "training"


def test_policy_arns_alone_make_a_role_with_those_policies_and_no_s3_access():
    config = stack_config("dev")
    arn = "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"
    config["eks-gpu-training:scheduling"] = {**config["eks-gpu-training:scheduling"], "serviceAccount": {"name": "trainer", "policyArns": [arn]}}
    graph = run_main(config)
    assert graph.error is None, graph.error
    # Each team's role gets them.
    attachments = [r for r in graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if "training-identity" in r.name]
    assert sorted(a.name for a in attachments) == [
        "gpu-training-training-identity-team-evaluation-policy-0", "gpu-training-training-identity-team-research-policy-0"]
    assert {a.inputs["policyArn"] for a in attachments} == {arn}
    assert [r for r in graph.of_type(ROLE_POLICY) if "training-identity" in r.name] == []
    assert graph.one(ASSOCIATION, "gpu-training-training-identity-training").inputs["serviceAccount"] == "trainer"
    assert training_job_of(graph).inputs["spec"]["template"]["spec"]["serviceAccountName"] == "trainer"


def test_pod_template_names_its_service_account_and_never_mounts_an_api_token():
    pod = training_pod_template(p5_job())["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod
    pod = training_pod_template(p5_job(service_account="training"))["spec"]
    assert pod["serviceAccountName"] == "training"
    assert pod["automountServiceAccountToken"] is False


# --- configuration rules -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["My_Bucket", "ab", "xn--bucket", "a..b", "-bucket"])
def test_rejects_a_bucket_name_s3_would_refuse(name):
    (problem,) = problems_of(lambda config: config.update(s3Buckets=[{"name": name}]))
    assert problem.startswith(f"s3Buckets[0].name: '{name}' is not an S3 bucket name")


def test_rejects_a_bucket_named_twice():
    (problem,) = problems_of(lambda config: config.update(s3Buckets=[{"name": "data"}, {"name": "data", "access": "readWrite"}]))
    assert problem.startswith("s3Buckets: names data more than once")


def test_rejects_an_access_other_than_read_or_read_write():
    (problem,) = problems_of(lambda config: config.update(s3Buckets=[{"name": "data", "access": "write"}]))
    assert problem.startswith("s3Buckets[0].access")


def test_rejects_a_policy_arn_that_is_not_an_iam_policy():
    bad = "arn:aws:iam::123456789012:role/admin"
    (problem,) = problems_of(lambda config: config.update(scheduling={"serviceAccount": {"policyArns": [bad]}}))
    assert problem.startswith(f"scheduling.serviceAccount.policyArns[0]: '{bad}' is not an IAM policy ARN")


def test_a_program_of_its_own_composes_identity_and_job_through_the_public_api():
    def program():
        cluster = research_cluster(NETWORK)
        identity = TrainingIdentity(
            "ti",
            TrainingIdentityArgs(
                cluster=cluster.ref, namespaces=["training"], service_account="training",
                s3_buckets=[S3BucketConfig(name="checkpoints", access="readWrite")],
            ),
        )
        TrainingJob(
            "j",
            TrainingJobArgs(job=p5_job(service_account="training")),
            opts=pulumi.ResourceOptions(depends_on=[identity], providers={"kubernetes": cluster.ref.provider}),
        )

    graph = run_program(program)
    assert graph.error is None, graph.error
    job = graph.one(JOB)
    assert graph.depends_on(job, graph.one(ASSOCIATION, "ti-training"))
    assert graph.depends_on(job, graph.one(ROLE_POLICY, "ti-s3-access"))
