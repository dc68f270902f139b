"""Node evidence collected from a pod reaches the same verdict as the demo (snapshot path and live path)."""
from __future__ import annotations

import json
import os

import pytest

import gpulib
import gpulib.xid.runbook as xr
from collect_logs import demo_sections, framed

NODE, GPU = "dgx-h100-1", "5"


@pytest.fixture
def demo_src(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T08:00:00Z")
    return gpulib.connect("demo")


def _snapshot(tmp_path, src, *, metrics: bool = False):
    d = tmp_path / "snap"
    d.mkdir()
    (d / f"dmesg-{NODE}.txt").write_text(src.kernel_log(NODE))
    (d / f"nvidia-smi-q-{NODE}.txt").write_text(src.smi_query(NODE))
    (d / "nodes.json").write_text(json.dumps(src.nodes_json()))
    (d / "pods.json").write_text(json.dumps(src.pods_json()))
    return d


def _verdict(fs):
    top = fs[0]
    return top.severity, top.data.get("bucket"), top.data.get("rule"), top.sop_step


def test_kernel_log_xid_on_a_gpu_nvidia_smi_cannot_see_is_not_dropped(tmp_path, demo_src):
    """XID 79 (fell off the bus): nvidia-smi has no block for that GPU, and a snapshot has no DCGM labels to
    map its PCI bus id to index 5. Asking about GPU 5 must not answer 'no XID'."""
    snap = gpulib.connect("snapshot", path=str(_snapshot(tmp_path, demo_src)))
    fs = xr.findings(xr.collect(snap, NODE, GPU, "6h"))
    demo = xr.findings(xr.collect(demo_src, NODE, GPU, "6h"))
    assert demo[0].severity.value == "critical" and demo[0].data.get("bucket") == "RESTART_BM"
    assert _verdict(fs) == _verdict(demo)
    assert "0000:68:00" in " ".join(fs[0].evidence) + fs[0].title
