"""Admin access entries: one per principal, named after it, the cluster's recorded creator left out
whoever runs `pulumi up`, and taken over from the pulumi-eks children earlier versions made."""

from __future__ import annotations

import copy

import pytest

from tests.support.harness import ACCOUNT_ID, PlausibleMocks, run_main, stack_config

from eks_gpu_training.aws.cluster_access import (
    CREATOR_TAG,
    admin_entries,
    creator_record,
    creator_tag_problems,
)
from eks_gpu_training.aws.ecr_images import ecr_image
from eks_gpu_training.config import ClusterConfig, validate_admin_principals
from eks_gpu_training.facts.iam_principals import iam_principal, same_principal

PROJECT = "eks-gpu-training"
CLUSTER = "gpu-training-prod"
ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"

PLATFORM = "arn:aws:iam::444455556666:role/platform-admin"
ONCALL = "arn:aws:iam::444455556666:role/oncall"
ALICE = "arn:aws:iam::444455556666:user/alice"
CI = "arn:aws:iam::444455556666:role/ci/deployer"
"""CI's role, with a path: EKS's entry for it names the role's full ARN."""
CI_SESSION = "arn:aws:sts::444455556666:assumed-role/deployer/github-run-42"
ALICE_ENTRY = "gpu-training-cluster-admin-444455556666-user-alice"


def prod(admins: list, **cluster) -> dict:
    config = copy.deepcopy(stack_config("prod"))
    config[f"{PROJECT}:cluster"].update(adminPrincipalArns=admins, **cluster)
    return config


LOOPBACK = ecr_image(stack_config("prod")[f"{PROJECT}:healthGate"]["efaLoopbackImage"])
"""Prod's EFA loopback image, which its file has the deployer push to the account's ECR first."""


class Deployment(PlausibleMocks):
    """`pulumi up` run by ``caller`` (an STS ARN, as GetCallerIdentity gives it), on prod's cluster
    running with ``tags``, or on none (``tags=None``: a first deployment), in prod's account, whose
    ECR holds the loopback image prod names."""

    def __init__(self, caller: str, tags: dict | None = None):
        super().__init__()
        self.caller, self.tags = caller, tags

    def call(self, args):
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": "444455556666", "arn": self.caller, "userId": "AIDATEST"}
        if args.token == "aws:ecr/getRepositories:getRepositories":
            return {"names": [LOOPBACK.repository], "id": LOOPBACK.region}
        if args.token == "aws:ecr/getImages:getImages":
            return {"repositoryName": LOOPBACK.repository, "imageIds": [{"imageTag": LOOPBACK.tag, "imageDigest": "sha256:" + "ab" * 32}]}
        if args.token == "aws:eks/getClusters:getClusters":
            return {"names": [] if self.tags is None else [CLUSTER], "id": "us-west-2"}
        if args.token == "aws:eks/getCluster:getCluster":
            return {**super().call(args), "version": "1.35", "tags": self.tags}
        return super().call(args)


def deploy(config: dict, mocks: PlausibleMocks):
    graph = run_main(config, mocks=mocks)
    assert graph.error is None, repr(graph.error)
    return graph


def entries(graph) -> dict[str, str]:
    return {r.name: r.inputs["principalArn"] for r in graph.of_type(ENTRY) if r.name.startswith("gpu-training-cluster-admin-")}


def creator_tag(graph) -> str | None:
    return (graph.one("eks:index:Cluster").inputs.get("clusterTags") or {}).get(CREATOR_TAG)


def child_urn(parent_urn: str, type_: str, name: str) -> str:
    """The URN the Pulumi engine gives a child: the parent's whole type chain, then the child's."""
    stack_and_project, chain = "::".join(parent_urn.split("::")[:2]), parent_urn.split("::")[2]
    return f"{stack_and_project}::{chain}${type_}::{name}"


# -- which principal an ARN names ------------------------------------------------------------------


def test_an_arn_with_another_path_or_case_names_the_same_principal():
    assert iam_principal(CI).key == "444455556666-role-deployer"
    assert iam_principal(CI).arn == "arn:aws:iam::444455556666:role/deployer"
    assert same_principal(CI, "arn:aws:iam::444455556666:role/Deployer")
    assert not same_principal(CI, "arn:aws:iam::444455556666:user/deployer")
    assert not same_principal(CI, "arn:aws:iam::111122223333:role/deployer")
    assert iam_principal(CI_SESSION) is None
    assert iam_principal("arn:aws:iam::444455556666:root") is None


def test_the_same_principal_under_two_paths_is_refused_with_both_positions():
    [problem] = validate_admin_principals(ClusterConfig(name="c", admin_principal_arns=[CI, PLATFORM, "arn:aws:iam::444455556666:role/deployer"]))
    assert problem.path == "cluster.adminPrincipalArns[2]"
    assert f"names the same principal as [0] ('{CI}')" in problem.message


# -- entries, as data -------------------------------------------------------------------------------


def test_entries_are_keyed_by_principal_and_remember_the_index_earlier_versions_named_them_by():
    listed = [PLATFORM, ALICE]
    assert [(e.key, e.principal_arn, e.legacy_key) for e in admin_entries(listed, None)] == [
        ("admin-444455556666-role-platform-admin", PLATFORM, "admin-0"),
        ("admin-444455556666-user-alice", ALICE, "admin-1"),
    ]


def test_the_creator_is_left_out_whatever_path_it_was_recorded_with():
    keys = [e.key for e in admin_entries([PLATFORM, CI, ALICE], "arn:aws:iam::444455556666:role/deployer")]
    assert keys == ["admin-444455556666-role-platform-admin", "admin-444455556666-user-alice"]


# -- the creator record, as data --------------------------------------------------------------------


def cluster(admins=(PLATFORM,), **fields) -> ClusterConfig:
    return ClusterConfig(name=CLUSTER, admin_principal_arns=list(admins), **fields)


def test_a_first_deployment_records_the_caller_without_its_path():
    assert creator_record(cluster(), None, CI) == ("arn:aws:iam::444455556666:role/deployer", [])


def test_a_first_deployment_whose_caller_is_not_answered_leaves_nobody_out():
    # Only a mock answers nothing for GetCallerIdentity; STS always names the caller.
    assert creator_record(cluster(), None, None) == (None, [])


def test_a_running_cluster_keeps_the_creator_its_tag_records_as_written():
    assert creator_record(cluster(), {CREATOR_TAG: CI}, None) == (CI, [])


def test_a_setting_that_contradicts_the_tag_is_refused():
    value, [problem] = creator_record(cluster(creator_principal_arn=ALICE), {CREATOR_TAG: CI}, None)
    assert value == CI
    assert problem.path == "cluster.creatorPrincipalArn"
    assert f"the running cluster records '{CI}' as its creator" in problem.message


def test_a_setting_that_contradicts_the_principal_creating_the_cluster_is_refused():
    _, [problem] = creator_record(cluster(creator_principal_arn=ALICE), None, CI)
    assert problem.path == "cluster.creatorPrincipalArn"
    assert f"does not exist yet: this `pulumi up` creates it as '{CI}'" in problem.message


def test_the_setting_names_the_creator_of_an_untagged_running_cluster():
    assert creator_record(cluster(creator_principal_arn=ALICE), {}, None) == (ALICE, [])


def test_an_untagged_running_cluster_without_the_setting_is_refused_while_a_plain_arn_is_listed():
    value, [problem] = creator_record(cluster(), {"team": "ml"}, None)
    assert value is None
    assert problem.path == "cluster.creatorPrincipalArn"
    assert f"the running cluster '{CLUSTER}' has no {CREATOR_TAG} tag" in problem.message
    assert "409 ResourceInUseException" in problem.message
    assert "aws eks list-access-entries" in problem.message
    # With no admin listed, no entry could collide: nothing to refuse, nothing recorded.
    assert creator_record(cluster(admins=()), {}, None) == (None, [])


def test_a_cluster_named_by_an_output_needs_the_setting_for_its_plain_admins():
    import pulumi

    named_later = ClusterConfig(name=pulumi.Output.from_input(CLUSTER), admin_principal_arns=[PLATFORM])
    _, [problem] = creator_record(named_later, None, None)
    assert "cluster.name is an Output" in problem.message
    with_setting = ClusterConfig(name=pulumi.Output.from_input(CLUSTER), admin_principal_arns=[PLATFORM], creator_principal_arn=CI)
    assert creator_record(with_setting, None, None) == ("arn:aws:iam::444455556666:role/deployer", [])


def test_a_creator_whose_name_eks_tags_cannot_hold_is_refused():
    # IAM names may hold a comma; tag values may not.
    _, [problem] = creator_record(cluster(), None, "arn:aws:iam::444455556666:role/ml,ops")
    assert problem.path == "cluster.creatorPrincipalArn"
    assert "cannot be recorded" in problem.message


def test_stack_tags_may_not_overwrite_the_creator_tag():
    [problem] = creator_tag_problems({CREATOR_TAG: "someone", "team": "ml"})
    assert problem.path == f"tags.{CREATOR_TAG}"


# -- what `pulumi up` plans -------------------------------------------------------------------------


def test_removing_the_first_of_three_admins_leaves_the_other_entries_resources_alone():
    before = deploy(prod([PLATFORM, ONCALL, ALICE]), Deployment(CI_SESSION, {CREATOR_TAG: CI}))
    after = deploy(prod([ONCALL, ALICE]), Deployment(CI_SESSION, {CREATOR_TAG: CI}))

    def urns(graph):
        return {r.inputs["principalArn"]: r.urn for r in [*graph.of_type(ENTRY), *graph.of_type(ASSOCIATION)]
                if r.name.startswith("gpu-training-cluster-admin-")}

    kept = {k: v for k, v in urns(before).items() if k != PLATFORM}
    assert len(kept) == 2
    assert urns(after) == kept
    assert {r.urn for r in after.of_type(ASSOCIATION)} <= {r.urn for r in before.of_type(ASSOCIATION)}


def test_ci_running_up_on_a_cluster_a_listed_person_created_plans_no_entry_for_that_person():
    graph = deploy(prod([PLATFORM, ALICE, CI]), Deployment(CI_SESSION, {CREATOR_TAG: ALICE}))
    # Alice has EKS's own entry; CI's role, listed, gets one, so CI reaches the cluster.
    assert entries(graph) == {
        "gpu-training-cluster-admin-444455556666-role-platform-admin": PLATFORM,
        "gpu-training-cluster-admin-444455556666-role-deployer": CI,
    }
    assert creator_tag(graph) == ALICE
    # Nothing asks who runs `up`: the record decides.
    assert not [t for t, _ in graph.invokes if t == "aws:iam/getSessionContext:getSessionContext"]


def test_a_listed_person_running_up_on_a_cluster_ci_created_keeps_their_own_entry():
    graph = deploy(prod([PLATFORM, ALICE, CI]), Deployment("arn:aws:iam::444455556666:user/alice", {CREATOR_TAG: CI}))
    assert entries(graph) == {
        "gpu-training-cluster-admin-444455556666-role-platform-admin": PLATFORM,
        ALICE_ENTRY: ALICE,
    }
    assert creator_tag(graph) == CI
    # Alice's own first run reaches the cluster through her entry: in-cluster objects wait for it.
    provider = graph.one("pulumi:providers:kubernetes", "gpu-training-cluster-k8s")
    alice = graph.one(ASSOCIATION, f"{ALICE_ENTRY}-cluster-admin")
    assert graph.depends_on(provider, alice)


def test_a_first_deployment_leaves_out_the_caller_and_records_it_as_the_creator():
    graph = deploy(prod([PLATFORM, CI]), Deployment(CI_SESSION))
    assert entries(graph) == {"gpu-training-cluster-admin-444455556666-role-platform-admin": PLATFORM}
    # The session's role, as GetSessionContext names it, without a path (the mocks know none).
    assert creator_tag(graph) == "arn:aws:iam::444455556666:role/deployer"


def test_an_untagged_running_cluster_is_refused_before_anything_registers_until_its_creator_is_set():
    graph = run_main(prod([PLATFORM, ALICE]), mocks=Deployment(CI_SESSION, {}))
    assert graph.resources == []
    [problem] = graph.error.problems
    assert problem.path == "cluster.creatorPrincipalArn"
    assert "has no eks-gpu-training/creator-principal tag" in problem.message

    graph = deploy(prod([PLATFORM, ALICE], creatorPrincipalArn=ALICE), Deployment(CI_SESSION, {}))
    assert entries(graph) == {"gpu-training-cluster-admin-444455556666-role-platform-admin": PLATFORM}
    assert creator_tag(graph) == ALICE


def test_an_adopted_cluster_gets_no_admin_entries_and_no_creator_lookups_but_its_members_entries():
    graph = deploy(prod([PLATFORM], create=False), Deployment(CI_SESSION, {}))
    assert entries(graph) == {}
    assert graph.of_type(ASSOCIATION) == []
    assert not [t for t, _ in graph.invokes if t == "aws:iam/getSessionContext:getSessionContext"]
    assert sorted(member_groups(graph).values()) == [["eks-gpu-training-team-pretraining"], ["eks-gpu-training-team-research"]]


# -- team members' entries, under mocks ----------------------------------------------------------------


PRETRAINING = "arn:aws:iam::444455556666:role/pretraining-engineers"
RESEARCH = "arn:aws:iam::444455556666:role/research-engineers"


def member_groups(graph) -> dict[str, list[str]]:
    return {r.inputs["principalArn"]: r.inputs["kubernetesGroups"] for r in graph.of_type(ENTRY) if "-member-" in r.name}


def with_members(config: dict, pretraining: list, research: list) -> dict:
    teams = config[f"{PROJECT}:scheduling"]["teams"]
    teams[0]["members"], teams[1]["members"] = pretraining, research
    return config


@pytest.fixture(scope="module")
def shipped():
    return deploy(prod([PLATFORM]), Deployment(CI_SESSION, {CREATOR_TAG: CI}))


def test_each_iam_member_gets_a_standard_entry_with_its_teams_group_and_no_access_policy(shipped):
    assert member_groups(shipped) == {PRETRAINING: ["eks-gpu-training-team-pretraining"], RESEARCH: ["eks-gpu-training-team-research"]}
    members = [r for r in shipped.of_type(ENTRY) if "-member-" in r.name]
    assert {r.name for r in members} == {"gpu-training-cluster-member-444455556666-role-pretraining-engineers",
                                         "gpu-training-cluster-member-444455556666-role-research-engineers"}
    assert all(r.inputs["type"] == "STANDARD" and r.delete_before_replace for r in members)
    # Only the admin's entry has a policy; a member's rights are its team's RoleBindings alone.
    assert [a.inputs["principalArn"] for a in shipped.of_type(ASSOCIATION)] == [PLATFORM]
    assert "research-oncall" not in {r.inputs["principalArn"] for r in shipped.of_type(ENTRY)}, "a Kubernetes group needs no entry"


def test_a_member_moved_to_another_team_keeps_its_entry_and_changes_its_group():
    moved = deploy(with_members(prod([PLATFORM]), [], [PRETRAINING, RESEARCH]), Deployment(CI_SESSION, {CREATOR_TAG: CI}))
    [entry] = [r for r in moved.of_type(ENTRY) if r.inputs["principalArn"] == PRETRAINING]
    assert entry.name == "gpu-training-cluster-member-444455556666-role-pretraining-engineers"
    assert entry.inputs["kubernetesGroups"] == ["eks-gpu-training-team-research"]


def test_a_member_who_created_the_cluster_is_refused_with_its_key_path():
    graph = run_main(with_members(prod([PLATFORM]), [CI], []), mocks=Deployment(CI_SESSION, {CREATOR_TAG: CI}))
    assert graph.resources == []
    assert "scheduling.teams[0].members[0]: 'arn:aws:iam::444455556666:role/ci/deployer' created the cluster" in str(graph.error)


def test_a_member_who_is_also_an_admin_is_refused_with_its_key_path():
    graph = run_main(with_members(prod([PLATFORM, ALICE]), [PRETRAINING], ["arn:aws:iam::444455556666:user/Alice"]),
                     mocks=Deployment(CI_SESSION, {CREATOR_TAG: CI}))
    assert graph.resources == []
    assert "scheduling.teams[1].members[0]: 'arn:aws:iam::444455556666:user/Alice' is cluster.adminPrincipalArns[1]" in str(graph.error)


# -- taking over the entries earlier versions had pulumi-eks make ----------------------------------


@pytest.fixture(scope="module")
def upgraded():
    """A stack whose cluster CI created, listing [CI, platform-admin, alice]: earlier versions made
    ``admin-1`` and ``admin-2`` under pulumi-eks (CI ran `up` and was left out)."""
    return deploy(prod([CI, PLATFORM, ALICE], creatorPrincipalArn=CI), Deployment(CI_SESSION, {}))


def test_each_entry_takes_over_the_pulumi_eks_child_its_index_named(upgraded):
    eks_cluster = upgraded.one("eks:index:Cluster")
    for index, arn in ((1, PLATFORM), (2, ALICE)):
        [entry] = [r for r in upgraded.of_type(ENTRY) if r.inputs["principalArn"] == arn]
        old_entry = child_urn(eks_cluster.urn, ENTRY, f"gpu-training-cluster-eks-admin-{index}")
        assert entry.aliases == [old_entry]
        [association] = [r for r in upgraded.of_type(ASSOCIATION) if r.parent == entry.urn]
        assert association.aliases == [child_urn(old_entry, ASSOCIATION, f"gpu-training-cluster-eks-admin-{index}-cluster-admin")]


def test_a_replaced_entry_is_deleted_before_its_successor_is_created(upgraded):
    made = [r for r in [*upgraded.of_type(ENTRY), *upgraded.of_type(ASSOCIATION)] if r.name.startswith("gpu-training-cluster-admin-")]
    assert len(made) == 4
    assert all(r.delete_before_replace for r in made)


def research(region: str, admins: list):
    from eks_gpu_training import EksCluster, EksClusterArgs
    from eks_gpu_training.config import NetworkConfig, SubnetConfig

    return EksCluster(
        "c",
        EksClusterArgs(
            cluster=ClusterConfig(name="research", endpoint_public_access_cidrs=["192.0.2.0/24"], admin_principal_arns=admins),
            network=NetworkConfig(vpc_id="vpc-0123456789abcdef0", subnets=[
                SubnetConfig(id="subnet-0123456789abcdef0", availability_zone=f"{region}a"),
                SubnetConfig(id="subnet-0123456789abcdef1", availability_zone=f"{region}b"),
            ]),
            region=region,
        ),
    )


def test_the_entries_of_a_cluster_in_another_region_go_through_the_provider_pulumi_eks_had():
    from tests.support.harness import run_program

    graph = run_program(lambda: research("us-east-1", [PLATFORM]), {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    eks_provider = graph.one("eks:index:Cluster").providers["aws"]
    made = [*graph.of_type(ENTRY), *graph.of_type(ASSOCIATION)]
    assert len(made) == 2
    assert {r.provider for r in made} == {eks_provider}
    assert {r.inputs["region"] for r in made} == {"us-east-1"}


def test_an_output_arn_from_the_programs_own_role_still_gets_an_entry():
    import pulumi_aws as aws

    from tests.support.harness import run_program

    def program():
        role = aws.iam.Role("oncall", assume_role_policy="{}")
        # The mocks' caller (user/test) creates the cluster and is left out; the role's Output ARN is kept.
        research("us-west-2", [role.arn, f"arn:aws:iam::{ACCOUNT_ID}:user/test"])

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    assert {r.name: r.inputs["principalArn"] for r in graph.of_type(ENTRY)} == {
        "c-admin-output-0": f"arn:aws:iam::{ACCOUNT_ID}:role/oncall-1a2b3c",
    }
    assert graph.one(ENTRY).aliases[0].endswith("::c-eks-admin-0")
