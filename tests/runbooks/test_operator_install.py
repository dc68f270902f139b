"""operator_install runbook executed with papermill: demo (healthy and a broken operator), live (API double
serving the kubectl fixtures' broken operator + real Prometheus), and a contradictory install choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulib.catalogue import find_notebook

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run(tmp_path, monkeypatch, demo_end, kept_execute):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's gpulib
    monkeypatch.setenv("GPUOPS_END", demo_end.isoformat())

    def go(params, sub="out"):
        res = kept_execute(find_notebook("operator_install"), params, tmp_path / sub, progress=False)
        assert res.failed is None, res.failed
        doc = json.loads((res.out_dir / "findings.json").read_text())
        return res, doc

    return go


def checks(doc):
    return {f["data"].get("check") for f in doc["findings"]}


@pytest.mark.notebook
def test_demo_driver_crashloop_leads_with_the_driver_sop(shared_runs):
    res = shared_runs.run("operator_install", demo_operator_state="driver_crashloop")
    assert res.failed is None, res.failed
    doc = res.doc
    assert doc["errors"] == []
    assert {"driver_crashloop", "validator_init", "policy_not_ready"} <= checks(doc)
    drv = next(f for f in doc["findings"] if f["data"].get("check") == "driver_crashloop")
    assert drv["node"] == "dgx-h100-0" and "Secure Boot" in drv["sop_step"]
    html = res.html.read_text()
    assert "Recommended SOP step" in html and "helm upgrade --install gpu-operator nvidia/gpu-operator" in html
    # healthy demo: no operator check fails; the only DCGM gaps are the GPUs that fell off the bus (XID 79)
    healthy = shared_runs.run("operator_install").doc
    assert not {"driver_crashloop", "policy_not_ready", "daemonset_not_ready", "allocatable_zero"} & checks(healthy)
    gaps = [(f["node"], f["data"]["gpus"]) for f in healthy["findings"] if f["data"].get("check") == "dcgm_missing"]
    assert gaps == [("dgx-h100-1", "5"), ("h100-dra-0", "1")]


@pytest.mark.notebook
def test_contradictory_choice_is_recorded_and_the_rest_still_runs(run):
    res, doc = run({"driver_preinstalled": True}, "bad")
    assert any("Install plan" in e and "host driver" in e for e in doc["errors"])
    assert any(f["title"].startswith("Runbook incomplete") for f in doc["findings"])
    assert "could not run" in res.html.read_text()
    assert "gfd" not in " ".join(doc["errors"])  # verification still ran


@pytest.mark.notebook
@pytest.mark.prometheus
def test_live_operator_from_kubectl_fixtures(live_env, run):
    """The double serves tests/fixtures/k8s daemonsets + ClusterPolicy (device plugin 4/5, notReady) with the
    demo fleet's nodes; DCGM comes from the real Prometheus."""
    _, doc = run({"source": "live"}, "live")
    assert doc["errors"] == []
    pol = next(f for f in doc["findings"] if f["data"].get("check") == "policy_not_ready")
    assert pol["data"]["reason"] == "OperandNotReady"
    dp = [f["title"] for f in doc["findings"] if f["data"].get("check") == "daemonset_not_ready"]
    assert dp == ["DaemonSet nvidia-device-plugin-daemonset: 4/5 pods ready"]
    gaps = [(f["node"], f["data"]["gpus"]) for f in doc["findings"] if f["data"].get("check") == "dcgm_missing"]
    assert gaps == [("dgx-h100-1", "5"), ("h100-dra-0", "1")]
