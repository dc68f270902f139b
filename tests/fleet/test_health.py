"""Fleet overview checks find exactly the demo scenario's injected incidents."""

from __future__ import annotations

import pandas as pd
import pytest

import gpulib.fleet as fleet
import gpulib.fleet.steps as fleet_steps


@pytest.fixture(scope="module")
def hf(demo_pinned):
    return fleet.health_frames(demo_pinned, "6h")


def _where(findings, category=None):
    return sorted((f.node, f.gpu) for f in findings if category is None or f.category == category)


def test_health_findings_match_injected_incidents(hf):
    fs = fleet.health_findings(hf)
    assert _where(fs, "xid") == [("a100-80-0", "1"), ("dgx-h100-1", "5"), ("h100-dra-0", "1")]  # + the DRA node
    assert _where(fs, "memory") == [("a100-80-0", "1")]
    assert _where(fs, "thermal") == [("h200-infer-0", "2")]
    assert _where(fs, "nvlink") == [("dgx-h100-0", "3")]
    xid79 = next(f for f in fs if f.gpu == "5")
    assert xid79.severity.value == "critical" and "RESTART_BM" in xid79.summary
    assert any("embed-batch" in e for e in xid79.evidence)


def test_idle_zombie_stale_and_unrequested(demo_pinned, hf):
    act = fleet.activity(demo_pinned, "6h", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    idle = {f.title: f for f in fleet.idle_findings(fleet_steps.idle_inputs(demo_pinned, "6h"))}
    z = idle["Zombie GPU workload notebooks/jupyter-alice-0"]
    assert z.severity.value == "warning" and "59." in z.evidence[1]
    assert not any("llm-pretrain" in t for t in idle)  # busy training is never idle
    stale = fleet.stale_telemetry(act, demo_pinned.end)
    assert _where(stale) == [("dgx-h100-1", "5"), ("h100-dra-0", "1")]  # both fell off the bus (XID 79)
    unreq = fleet.unrequested_gpu_use(act, demo_pinned.pods())
    assert [f.title for f in unreq] == ["media/legacy-transcoder-0 uses a GPU it never requested"]


def test_inventory_counts_gpus_and_mig_slices(demo_pinned):
    inv = fleet.inventory(demo_pinned.nodes(), demo_pinned.pods()).set_index("node")
    assert inv.loc["a100-40-mig-0", "allocatable"] == 16 and inv.loc["a100-40-mig-0", "requested"] == 4
    assert inv.loc["dgx-h100-0", "allocated_pct"] == 100.0 and inv.loc["a100-80-1", "free"] == 4
    assert bool(inv.loc["l4-spot-0", "spot"]) is True


def test_utilisation_matrix_buckets():
    ts = pd.to_datetime(["2026-11-29T10:00Z", "2026-11-29T10:05Z", "2026-11-29T10:20Z"])
    act = pd.DataFrame({"timestamp": ts, "node": ["n1", "n1", "n1"], "pct": [10.0, 30.0, 50.0]})
    m = fleet.utilisation_matrix(act)
    assert m.loc["n1"].tolist() == [20.0, 50.0]
