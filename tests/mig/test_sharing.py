"""Sharing-strategy advisor and the device-plugin configs (NVIDIA/k8s-device-plugin: api/config/v1/ @ 1b826acc)."""

from __future__ import annotations

import pytest
import yaml

import gpulib.mig.sharing as sharing
from gpulib.core.errors import InvalidParameter


@pytest.mark.parametrize(
    "kw,strategy",
    [
        (dict(gpu_model="A100-80GB", workload="inference", multi_tenant=True, production=True, memory_gib=12), "mig"),
        (dict(gpu_model="H100-80GB", workload="training"), "whole"),
        (dict(gpu_model="H100-80GB", workload="inference", memory_gib=60), "whole"),  # 60/79.6 > half a GPU
        (dict(gpu_model="NVIDIA-L4", workload="dev", production=False), "time-slicing"),
        (dict(gpu_model="A100-40GB", workload="dev", production=False, replicas=4), "time-slicing"),
        (dict(gpu_model="Tesla-T4", workload="inference", memory_gib=3, replicas=4), "mps"),
        (dict(gpu_model="Tesla-T4", workload="inference", isolation="hard"), "whole"),  # no MIG: dedicate GPUs
        (dict(gpu_model="H100-80GB", workload="inference", memory_gib=8), "mig"),
        (dict(gpu_model="A100-40GB", workload="inference", load=0.9), "whole"),
    ],
)
def test_decision_tree(kw, strategy):
    f = sharing.recommend(**kw)
    assert f.data["strategy"] == strategy
    assert f.summary and f.evidence  # reasons and caveats present


def test_caveats_users_get_wrong_are_stated():
    ts = sharing.recommend("A100-40GB", workload="dev", production=False)
    assert any("no memory or fault isolation" in e for e in ts.evidence)
    assert any("replicas do not add memory" in e for e in ts.evidence)
    m = sharing.recommend("H100-80GB", multi_tenant=True, memory_gib=10)
    assert any("no P2P and no NCCL" in e for e in m.evidence) and any("GPU_UTIL is absent" in e for e in m.evidence)
    mps = sharing.recommend("NVIDIA-L4", memory_gib=2)
    assert any("per client" in e for e in mps.evidence)


def test_time_slicing_config_shape():
    doc = yaml.safe_load(sharing.time_slicing_config(4, rename_by_default=True))
    assert doc == {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {
            "timeSlicing": {
                "renameByDefault": True,
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
            }
        },
    }
    mig_ts = yaml.safe_load(sharing.time_slicing_config(2, resource="nvidia.com/mig-1g.10gb", mig_strategy="mixed"))
    assert mig_ts["sharing"]["timeSlicing"]["resources"][0]["name"] == "nvidia.com/mig-1g.10gb"
    mps = yaml.safe_load(sharing.mps_config(3))
    assert list(mps["sharing"]) == ["mps"] and mps["sharing"]["mps"]["resources"][0]["replicas"] == 3


def test_bad_sharing_parameters():
    with pytest.raises(InvalidParameter, match="replicas"):
        sharing.time_slicing_config(1)
    with pytest.raises(InvalidParameter, match="MPS"):
        sharing._sharing_doc("mps", 2, "nvidia.com/mig-1g.10gb", False, True, "none")
    with pytest.raises(InvalidParameter, match="workload"):
        sharing.recommend("A100-40GB", workload="gaming")


def test_configmap_validates_against_kubernetes_schema():
    kv = pytest.importorskip("kubernetes_validate")
    cm = sharing.device_plugin_configmap({"any": sharing.time_slicing_config(4), "mps-3": sharing.mps_config(3)})
    kv.validate(cm, "1.30", strict=True)
    assert yaml.safe_load(cm["data"]["any"])["version"] == "v1"
    patch = sharing.clusterpolicy_patch("time-slicing-config", "any")
    assert patch["spec"]["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "any"}
    cmds = sharing.sharing_commands("time-slicing-config", "any", node="gpu-1", node_key="mps-3")
    assert "kubectl label node gpu-1 nvidia.com/device-plugin.config=mps-3 --overwrite" in cmds
