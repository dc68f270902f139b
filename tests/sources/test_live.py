"""``connect("live")``: Prometheus + the real kubernetes client against the API double, same answers as demo."""

from __future__ import annotations

import pytest

import gpulib
from gpulib.core.errors import UnknownGPU, UnknownNode


@pytest.mark.prometheus
def test_live_nodes_pods_and_series_match_demo(live_env, demo_pinned):
    live = gpulib.connect("live")
    assert live.end == demo_pinned.end
    assert sorted(live.nodes()["node"]) == sorted(demo_pinned.nodes()["node"])
    lp = live.pods().set_index(["namespace", "pod"]).sort_index()
    dp = demo_pinned.pods().set_index(["namespace", "pod"]).sort_index()
    assert lp["gpu_request"].tolist() == dp["gpu_request"].tolist()
    a = live.summary("DCGM_FI_DEV_FB_USED", "6h", "max", node="a100-80-0").sort_values("gpu")["value"].tolist()
    b = demo_pinned.summary("DCGM_FI_DEV_FB_USED", "6h", "max", node="a100-80-0").sort_values("gpu")["value"].tolist()
    assert a == b and len(a) == 8


@pytest.mark.prometheus
def test_live_rejects_unknown_node_and_gpu(live_env):
    live = gpulib.connect("live")
    with pytest.raises(UnknownNode) as e:
        live.series("DCGM_FI_DEV_GPU_TEMP", "1h", node="gpu-node-99")
    assert "gpu-node-99" in str(e.value) and "dgx-h100-0" in str(e.value)
    with pytest.raises(UnknownGPU) as e2:
        live.series("DCGM_FI_DEV_GPU_TEMP", "1h", node="l4-spot-0", gpu=7)
    assert "0..3" in str(e2.value)


def test_live_without_kubeconfig_still_answers_dcgm_and_names_the_missing_config(
    prometheus, monkeypatch, tmp_path, demo_end
):
    from gpulib.core.errors import KubeconfigMissing

    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", prometheus.url)
    monkeypatch.setenv("GPUOPS_END", demo_end.isoformat())
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    live = gpulib.connect("live")
    fb = live.summary("DCGM_FI_DEV_FB_USED", "1h", "max", node="a100-80-0")
    assert len(fb) == 8  # node validated against the DCGM host labels instead
    with pytest.raises(KubeconfigMissing) as e:
        live.nodes()
    assert "no-such-kubeconfig" in str(e.value)


@pytest.mark.prometheus
def test_live_reads_the_mig_manager_configmap_the_cluster_policy_names(live_env):
    cur = gpulib.connect("live").current_mig_config()
    assert cur.text == live_env.configmaps[0]["data"]["config.yaml"] and "a100-40gb-mixed-3-2-1-1" in cur.text
    assert (cur.namespace, cur.configmap) == ("gpu-operator", "default-mig-parted-config")
    assert live_env.requests_to("GET", "/apis/nvidia.com/v1/clusterpolicies")
    assert [r.path for r in live_env.requests_to("GET", "/api/v1/namespaces/*/configmaps/*")] == [
        "/api/v1/namespaces/gpu-operator/configmaps/default-mig-parted-config"
    ]
