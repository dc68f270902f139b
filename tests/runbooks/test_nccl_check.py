"""runbooks/nccl_check.ipynb: verdicts on the real 2xH200 capture, a degraded input, the demo NVLink incident.

Expected values: the capture's best busbw at >= 1 GiB is its 4 GiB row (all_reduce 346.80 out-of-place,
all_gather 303.57 in-place, reduce_scatter 295.92 in-place), inside the measured band of
nccl_expected_busbw.csv; the synthetic p2p-off run peaks at 120 GB/s (35 % of 343.3); the demo scenario
slows dgx-h100-0 GPU 3's NVLink bandwidth (MB/s) to 12 % for the last 5 h.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import gpulib.nccl as nccl
import gpulib.nccl.steps as ns
from gpulib.core.errors import InvalidParameter
from gpulib.demo.artifacts import DEMO_NCCL_TESTS, demo_file

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "runbooks" / "nccl_check.ipynb"
DEGRADED = Path(__file__).parents[1] / "fixtures" / "nb_nccl" / "all_reduce_2xH200_p2p_off.txt"


@pytest.fixture
def run_nb(run_notebook):
    return run_notebook(NOTEBOOK)


def _references(doc):
    """The packaged capture judged against a band measured on itself is reported as a reference, not a verdict."""
    return [
        f
        for f in doc["findings"]
        if f["title"].startswith("Reference capture, not judged") and f["data"].get("status") == "reference"
    ]


def _statuses(doc):
    return {
        f["title"]: f["data"]["status"]
        for f in doc["findings"]
        if f["title"].startswith("NCCL ") and "status" in f["data"]
    }


# ------------------------------------------------------------------ pure functions (no kernel)


def test_capture_healthy_against_measured_band():
    res = nccl.parse_nccl_tests_all(demo_file(DEMO_NCCL_TESTS).read_text())
    vs = ns.verdicts(res)
    got = {v.collective: (v.status, v.measured_busbw, v.band.low, v.band.high) for v in vs}
    assert got == {
        "all_reduce": ("healthy", 346.80, 343.3, 346.8),
        "all_gather": ("healthy", 303.57, 285.7, 303.6),
        "reduce_scatter": ("healthy", 295.92, 289.6, 295.9),
    }
    assert all(v.finding.node == "vm" for v in vs)  # the capture's host, from its rank lines


def test_expected_override_and_bad_value():
    res = nccl.parse_nccl_tests_all(demo_file(DEMO_NCCL_TESTS).read_text())[:1]
    v = ns.verdicts(res, expected="400-420")[0]
    assert v.status == "degraded" and (v.band.low, v.band.high) == (400.0, 420.0)
    assert ns.verdicts(res, expected="300")[0].status == "healthy"
    with pytest.raises(InvalidParameter, match="expected='fast'"):
        ns.parse_expected("fast", "all_reduce")
    with pytest.raises(InvalidParameter, match="below the low end"):
        ns.parse_expected("340-300", "all_reduce")


def test_nvlink_rates_are_dcgm_mbs_in_gbs():
    """DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL is a bandwidth in MB/s (DCGM's field table, cited in
    gpulib/fleet/health.py): each sample is the GB/s of its time, a drop is a drop (not a counter reset)."""
    import pandas as pd

    ts = pd.to_datetime(
        ["2026-11-29 10:00:00", "2026-11-29 10:00:30", "2026-11-29 10:01:00", "2026-11-29 10:01:30"], utc=True
    )
    s = pd.DataFrame({"timestamp": ts, "node": "n", "gpu": "0", "value": [0.0, 3000.0, 60.0, 3060.0]})
    r = ns.nvlink_rates(s)
    assert r["gbs"].tolist() == [0.0, 3.0, 0.06, 3.06]


# ------------------------------------------------------------------ notebook executions


@pytest.mark.notebook
def test_demo_defaults(shared_runs):
    doc, nb_text = shared_runs.notebook("nccl_check")
    assert doc["errors"] == []
    # the demo's capture is the one the bands were measured on: never judged against itself (3 collectives)
    assert _statuses(doc) == {} and len(_references(doc)) == 3
    top = doc["findings"][0]
    assert top["title"] == "NVLink traffic far below peers on dgx-h100-0 GPU 3"
    assert top["severity"] == "warning" and top["node"] == "dgx-h100-0" and top["gpu"] == "3"
    assert not any(f["gpu"] not in (None, "3") for f in doc["findings"] if f["title"].startswith("NVLink"))
    summary = next(f for f in doc["findings"] if f["title"] == "NCCL communicator summary")
    assert summary["data"]["version"] == "2.28.9" and summary["data"]["transports"] == ["P2P/CUMEM"]


@pytest.mark.notebook
def test_degraded_input(run_nb):
    doc, _ = run_nb(nccl_tests_file=str(DEGRADED), node="")
    assert doc["errors"] == []
    top = doc["findings"][0]
    assert top["title"] == "NCCL bandwidth degraded (all_reduce)" and top["severity"] == "warning"
    assert top["data"]["measured_busbw"] == 120.0 and top["data"]["band"]["low"] == 343.3
    assert "nvidia-smi nvlink -e" in top["commands"]


@pytest.mark.notebook
@pytest.mark.prometheus
def test_live_nvlink_finding(live_env, run_nb):
    doc, _ = run_nb(source="live")
    assert doc["errors"] == []
    top = doc["findings"][0]
    assert top["title"] == "NVLink traffic far below peers on dgx-h100-0 GPU 3"


@pytest.mark.notebook
def test_unknown_node_is_recorded(run_nb):
    doc, nb_text = run_nb(node="gpu-node-7")
    assert (
        len(doc["errors"]) == 1 and "gpu-node-7" in doc["errors"][0] and doc["errors"][0].startswith("NVLink traffic")
    )
    assert len(_references(doc)) == 3  # the capture is still read (as the reference)
    assert "could not run" in nb_text
