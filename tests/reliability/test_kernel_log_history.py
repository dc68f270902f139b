"""node_health reads the XIDs from the kernel log where the source has no DCGM XID series (a snapshot with
a real DBE dmesg and events.json but no scrape was INCOMPLETE, "the verdict needs xid")."""

from __future__ import annotations

import json

import gpulib
import gpulib.reliability.steps as S
from tests.helpers.pinned import ROOT

#: XID 48 (a real line, NVIDIA/gpu-operator#1146) and its follow-up XID 63 (tests/fixtures/xid/README.md)
DMESG = ROOT / "tests" / "fixtures" / "xid" / "dmesg_T.txt"


def _snapshot(tmp_path):
    lines = [ln for ln in DMESG.read_text().splitlines() if "(PCI:0000:8a:00)" in ln]
    assert [ln.split("): ")[1].split(",")[0] for ln in lines] == ["48", "63"]
    (tmp_path / "dmesg-node-a.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "events.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    (tmp_path / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    node = {"metadata": {"name": "node-a", "labels": {}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    return gpulib.connect("snapshot", path=tmp_path, end="2026-09-14T06:00:00Z")


def test_node_health_on_a_snapshot_with_only_a_kernel_log_reads_the_xids_from_it(tmp_path):
    src = _snapshot(tmp_path)
    inp = S.read_history(src, "node-a", "7d")  # raised EmptyResult (INCOMPLETE) before
    assert "kernel log" in inp.history.read["xid"] and "dmesg" in inp.history.read["xid"]
    xids = inp.history.events[inp.history.events["signal"] == "xid"]
    assert sorted(xids["code"]) == ["48", "63"] and set(xids["gpu"]) == {"0000:8a:00.0"}
    S.verdicts(inp)
    faulted = [f for f in S.findings(inp) if f.data.get("verdict") == "faulted"]
    assert len(faulted) == 1 and "XID 48" in " ".join(faulted[0].evidence), [f.title for f in S.findings(inp)]
    assert faulted[0].severity.value == "critical"  # XID 48's one severity (WORKFLOW_XID_48)
