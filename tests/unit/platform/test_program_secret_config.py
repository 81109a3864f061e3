"""A key set with ``pulumi config set --secret`` stays secret in the resource inputs it reaches."""

from __future__ import annotations

import copy
import json

import pulumi
import pytest
from pulumi.runtime import rpc

from eks_gpu_training.platform.program import stack_program
from tests.support.harness import run_program, stack_config

PROJECT = "eks-gpu-training"
TOKEN = "hf_token_value_never_in_plain_text"


def _with_env(config: dict, env: dict) -> dict:
    config = copy.deepcopy(config)
    app = config[f"{PROJECT}:scheduling"]["trainingApps"][0]
    app["job"]["env"] = env
    return config


def _run(config: dict, secret_keys: list[str]):
    def program():
        # What the CLI hands a program: every value as text, and the keys whose values are secrets.
        texts = {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}
        pulumi.runtime.set_all_config(texts, secret_keys)
        stack_program()

    return run_program(program, config)


def _job(graph, name: str):
    return next(r for r in graph.of_type("kubernetes:batch/v1:Job") if r.inputs["metadata"]["name"] == name)


def test_a_secret_env_value_reaches_the_job_as_a_secret():
    config = _with_env(stack_config("dev"), {"HF_TOKEN": TOKEN})
    graph = _run(config, [f"{PROJECT}:scheduling"])
    assert graph.error is None, graph.error
    job = _job(graph, "rl-training")
    assert rpc.is_rpc_secret(job.inputs["spec"])
    env = rpc.unwrap_rpc_secret(job.inputs["spec"])["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "value": TOKEN} in env


def test_a_value_of_a_key_not_set_secret_stays_plain():
    config = _with_env(stack_config("dev"), {"LOG_LEVEL": "info"})
    graph = _run(config, [])
    assert graph.error is None, graph.error
    job = _job(graph, "rl-training")
    assert not rpc.is_rpc_secret(job.inputs["spec"])
    assert {"name": "LOG_LEVEL", "value": "info"} in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]


def test_an_env_entry_from_a_secret_names_the_secret_key_only():
    config = _with_env(stack_config("dev"), {"HF_TOKEN": {"secretKeyRef": {"name": "hugging-face", "key": "token"}}})
    graph = _run(config, [])
    assert graph.error is None, graph.error
    env = _job(graph, "rl-training").inputs["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hugging-face", "key": "token"}}} in env


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_stack_whose_every_key_is_secret_builds_as_it_does_in_plain_text(stack):
    """Keeping secretness must leave the rules alone: a key the loader makes secret is not one the
    stack set (the network's create-only keys stay unset on an adopted network, for one)."""
    config = stack_config(stack)
    graph = _run(config, [key for key in config if key.startswith(f"{PROJECT}:")])
    assert graph.error is None, graph.error
    assert len(graph.resources) == len(run_program(stack_program, config).resources)
