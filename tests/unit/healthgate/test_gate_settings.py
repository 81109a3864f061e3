"""The gate's settings as the stack writes them into its ConfigMap, and the EFA device count check
its pods run."""

from __future__ import annotations

import pytest

from eks_gpu_training.healthgate import efa
from eks_gpu_training.healthgate.gate_settings import GateSettings, PoolDevices, SettingsError, pool_of


def test_settings_round_trip_through_their_json():
    settings = GateSettings("health-gate", {"p5": PoolDevices(8, 32)}, {"spec": {}}, 900,
                            quarantine_ignored_reasons=("DCGMError",), karpenter_pools=("kp",))
    assert GateSettings.from_json(settings.to_json()) == settings


@pytest.mark.parametrize(("text", "says"), [
    ("not json", "is not JSON"),
    ('{"namespace": "g", "pools": {}, "checkPod": {}}', "checkSeconds"),
    ('{"namespace": "g", "pools": {}, "checkPod": {}, "checkSeconds": 0}', "positive"),
])
def test_settings_that_lack_or_mistype_a_key_are_refused_naming_it(text, says):
    with pytest.raises(SettingsError, match=says):
        GateSettings.from_json(text)


def test_a_nodes_pool_is_its_managed_pools_label_else_its_karpenter_pools():
    assert pool_of({"eks-gpu-training/pool": "p5", "karpenter.sh/nodepool": "kp"}) == "p5"
    assert pool_of({"karpenter.sh/nodepool": "kp"}) == "kp"
    assert pool_of(None) is None


def test_the_efa_check_counts_the_devices_the_plugin_mounted(tmp_path, monkeypatch):
    for n in range(4):
        (tmp_path / f"uverbs{n}").touch()
    monkeypatch.setattr(efa, "DEVICES", tmp_path)
    monkeypatch.setattr(efa, "TERMINATION_LOG", tmp_path / "termination-log")
    assert efa.main([], {"EXPECTED_EFA_DEVICES": "4"}) == 0
    assert efa.main([], {"EXPECTED_EFA_DEVICES": "32"}) == 1
    assert (tmp_path / "termination-log").read_text() == "4 EFA devices in the pod, 32 expected"
