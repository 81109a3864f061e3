"""The "Refused by" table of docs/configuration.md: what the package's source and its configuration
models refuse, under the key paths that reach each refusal."""

from __future__ import annotations

import textwrap

from eks_gpu_training.offline.refusals import source_refusals
from eks_gpu_training.offline.schema_refusals import schema_refusals

SOURCE = source_refusals()
SCHEMA = schema_refusals()


def _rows(rule_start: str, rows=SOURCE):
    return [r for r in rows if r.rule.startswith(rule_start)]


def test_a_pools_instance_type_refusal_lists_every_key_path_that_reaches_it():
    [row] = _rows("`_check_gpu_instance_types`: '…' is not an x86_64 NVIDIA GPU instance type")
    assert row.module == "config/pools.py"
    assert row.paths == (
        "gpuNodeGroups[*].instanceTypes[*]",
        "karpenter.gpuNodePools[*].instanceTypes[*]",
        "GpuNodeGroup(<name>).instanceTypes[*]",
        "GpuNodePool(<name>).instanceTypes[*]",
    )


def test_a_problem_reported_through_a_lambda_sink_is_listed_under_its_section():
    [row] = _rows("`validate_network`: is only used when create is false (this stack creates the VPC)")
    assert (row.paths, row.module) == (("network.vpcId",), "config/network_settings.py")


def test_a_tag_refusal_is_listed_for_the_stack_and_for_each_component_that_checks_tags():
    [row] = _rows("`validate_tags`: tag keys starting with 'aws:' are reserved for AWS")
    assert row.paths == ("tags.<key>", "GpuNodeGroup(<name>).tags.<key>", "GpuNodePool(<name>).tags.<key>")


def test_schema_rows_give_bounds_allowed_values_and_each_message_of_a_validator():
    by_path: dict[str, list[str]] = {}
    for row in SCHEMA:
        by_path.setdefault(row.paths[0], []).append(row.rule)
    assert by_path["gpuNodeGroups[*].rootVolumeSizeGib"] == ["`schema`: at least 100; at most 16384"]
    assert by_path["gpuNodeGroups[*].efa"] == ["`schema`: one of `auto`, `enabled`, `disabled`"]
    assert by_path["gpuNodeGroups[*].capacityType"] == [
        "`_capacity_type`: '…' is not an EKS capacity type (botocore eks CapacityTypes)…",
        "`_capacity_type`: SPOT is refused for training pools: …; use ON_DEMAND or CAPACITY_BLOCK",
    ]
    assert "`ResourceInput`: '…' is not an IAM role or user ARN (arn:<partition>:iam::<account>:role/<name>)" in by_path["cluster.adminPrincipalArns[*]"]


def test_key_paths_follow_assignments_callers_defaults_and_sinks_and_leave_the_rest_as_placeholders(tmp_path):
    (tmp_path / "rules.py").write_text(textwrap.dedent('''
        def _collector(path):
            problems = []
            def problem(key, message):
                problems.append(Problem(f"{path}.{key}", message))
            return problems, problem

        def check_pool(pool, path="pool"):
            problems, problem = _collector(path)
            problem("size", "must be positive")
            for i, label in enumerate(pool.labels):
                problem(f"labels[{i}]", f"'{label}' is not a label")
            return problems

        def check_stack(stack):
            for i, pool in enumerate(stack.pools):
                path = f"pools[{i}]"
                check_pool(pool, path)
            check_pool(stack.extra)
            return [Problem(f"tags.{key}", "is reserved") for key in stack.tags]

        class Component:
            def __init__(self, name):
                check_pool(None, f"Component({name})")
    '''))
    found = {r.rule: r.paths for r in source_refusals(tmp_path)}
    assert found == {
        "`check_pool`: must be positive": ("pool.size", "pools[*].size", "Component(<name>).size"),
        "`check_pool`: '…' is not a label": ("pool.labels[*]", "pools[*].labels[*]", "Component(<name>).labels[*]"),
        "`check_stack`: is reserved": ("tags.<key>",),
    }
