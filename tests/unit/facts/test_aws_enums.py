"""AWS enumerations and limits from botocore's models, and the answers kept per botocore version."""

from __future__ import annotations

import json
import subprocess
import sys

import botocore
import botocore.session
import pytest

from eks_gpu_training.facts import aws_enums

# Asks a question of each kind in a new process, then says whether botocore's loader was imported.
ASK = """
import sys
from eks_gpu_training.facts import aws_enums
answers = [sorted(aws_enums.ec2_instance_types())[:3], aws_enums.string_limits("iam", "roleNameType"),
           "cn-north-1" in aws_enums.aws_regions(), aws_enums.partition_of("us-gov-west-1")]
print(answers)
print("botocore.loaders" in sys.modules)
"""


def ask(tmp_path, **env: str) -> tuple[str, bool]:
    run = subprocess.run(
        [sys.executable, "-c", ASK], capture_output=True, text=True, check=True,
        env={"PATH": "", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), **env},
    )
    answers, loaded = run.stdout.splitlines()
    return answers, loaded == "True"


def test_the_answers_are_what_a_botocore_session_reads_from_the_models():
    session = botocore.session.get_session()
    ec2, iam = session.get_service_model("ec2"), session.get_service_model("iam")
    assert aws_enums.ec2_instance_types() == frozenset(ec2.shape_for("InstanceType").enum)
    role_name = iam.shape_for("roleNameType").metadata
    assert aws_enums.string_limits("iam", "roleNameType") == (role_name["min"], role_name["max"], role_name["pattern"])
    assert "us-east-1" in aws_enums.aws_regions()
    assert "cn-north-1" in aws_enums.aws_regions()
    assert [aws_enums.partition_of(r) for r in ("eu-west-1", "cn-north-1", "us-gov-west-1")] == ["aws", "aws-cn", "aws-us-gov"]


def test_a_later_process_answers_from_the_kept_file_without_loading_a_model(tmp_path):
    first, loaded_first = ask(tmp_path)
    kept = tmp_path / "cache" / "eks-gpu-training" / "aws-models" / f"botocore-{botocore.__version__}.json"
    assert loaded_first
    assert kept.is_file()
    assert ask(tmp_path) == (first, False)


def test_models_from_aws_data_path_are_read_each_time_and_nothing_is_kept(tmp_path):
    (tmp_path / "models").mkdir()
    answers, loaded = ask(tmp_path, AWS_DATA_PATH=str(tmp_path / "models"))
    assert loaded
    assert answers == ask(tmp_path)[0]
    assert ask(tmp_path, AWS_DATA_PATH=str(tmp_path / "models"))[1]


@pytest.mark.parametrize("text", ["{not json", json.dumps({"format": 0, "answers": {"regions": ["nowhere-1"]}})])
def test_an_unreadable_or_older_kept_file_is_read_again_from_the_models_and_replaced(tmp_path, text):
    kept = tmp_path / "cache" / "eks-gpu-training" / "aws-models" / f"botocore-{botocore.__version__}.json"
    kept.parent.mkdir(parents=True)
    kept.write_text(text)
    answers, loaded = ask(tmp_path)
    assert loaded
    assert "True" in answers
    assert json.loads(kept.read_text())["format"] == aws_enums.MEMO_FORMAT
