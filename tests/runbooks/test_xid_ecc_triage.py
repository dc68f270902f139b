"""runbooks/xid_ecc_triage.ipynb executed with papermill: the SOP for each injected incident, demo and live.

Expected verdicts come from the scenario (gpulib/data/demo/demo_fleet.yaml) and NVIDIA's catalog:
XID 79 (GPU fallen off the bus) -> bucket RESTART_BM (reboot the node); a100-80-0 GPU 1 has a DBE
and a row-remap failure -> the row-remap-failure rule (drain, RMA).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "runbooks" / "xid_ecc_triage.ipynb"

pytestmark = pytest.mark.notebook


@pytest.fixture
def run_nb(run_notebook):
    return run_notebook(NOTEBOOK)


def _check_xid79(doc):
    top = doc["findings"][0]
    assert top["severity"] == "critical" and top["data"]["bucket"] == "RESTART_BM"
    assert top["node"] == "dgx-h100-1" and top["gpu"] == "5" and 79 in top["data"]["xids"]
    assert "kubectl cordon dgx-h100-1" in top["commands"]
    assert [p["pod"] for p in top["data"]["pods"]] == ["embed-batch-7f9c2-xk2lq"]
    assert top["data"]["pods"][0]["owner_kind"] == "Job"


def _check_rma(doc):
    top = doc["findings"][0]
    assert top["severity"] == "critical" and top["data"]["rule"] == "ROW_REMAP_FAILURE"
    assert top["node"] == "a100-80-0" and top["gpu"] == "1"
    assert "RMA" in top["title"] or "RMA" in top["escalation"]
    assert [p["pod"] for p in top["data"]["pods"]] == ["recsys-train-0"]
    # only GPU 1 is triaged: GPU 3's rising SBE belongs to another GPU
    assert {f["gpu"] for f in doc["findings"]} <= {"1", None}


def test_demo_xid79_reboot_node(shared_runs):
    doc, nb_text = shared_runs.notebook("xid_ecc_triage")  # defaults: dgx-h100-1 GPU 5
    assert doc["errors"] == []
    _check_xid79(doc)
    assert "PLAN (no cluster; nothing sent): drain dgx-h100-1" in nb_text
    assert "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in nb_text  # Meaning table from the catalog
    # GPU 5's ECC and row-remap counters never moved: a sentence, not a flat chart (gpulib.xid.view.memory_chart)
    assert "No SBE/DBE ECC errors and no remapped rows on dgx-h100-1 GPU 5 over the last 6h" in nb_text
    assert "ECC errors and remapped rows on" not in nb_text


def test_demo_dbe_row_remap_failure_rma(shared_runs):
    doc, nb_text = shared_runs.notebook("xid_ecc_triage", node="a100-80-0", gpu="1")
    assert doc["errors"] == []
    _check_rma(doc)
    xid = next(f for f in doc["findings"] if f["data"].get("bucket"))
    assert set(xid["data"]["xids"]) == {48, 64}  # from the kernel log and the XID gauge
    assert "nvidia-smi -q from demo" in nb_text


@pytest.mark.prometheus
@pytest.mark.parametrize("node,gpu,check", [("dgx-h100-1", "5", _check_xid79), ("a100-80-0", "1", _check_rma)])
def test_live_same_verdicts_from_dcgm(live_env, run_nb, node, gpu, check):
    doc, nb_text = run_nb(source="live", node=node, gpu=gpu)
    assert doc["errors"] == []
    check(doc)
    assert "has no kernel log" in nb_text and "chroot /host dmesg -T" in nb_text
    assert "DRY RUN (server-side, nothing changed): drain " + node in nb_text


def test_unknown_node_is_recorded(run_nb):
    doc, nb_text = run_nb(node="gpu-node-7")
    assert len(doc["errors"]) == 1 and "gpu-node-7" in doc["errors"][0]
    assert doc["findings"][0]["title"].startswith("Runbook incomplete")
    assert "could not run" in nb_text
