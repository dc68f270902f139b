"""Other agents' node conditions and Events: the table, the three known false positives, unknown conditions,
and one XID flagged by NVSentinel and by gpulib being one finding.

Condition messages are the ones published in the reports the false-positive table cites:
https://github.com/NVIDIA/aicr/issues/2641 (IMEX on idle GB300), https://github.com/NVIDIA/NVSentinel/issues/1471
(IMEX on a single-node NVSwitch p5.48xlarge), https://github.com/NVIDIA/NVSentinel/issues/1701 (NVLink down after
a planned GB200 NVL72 reboot).
"""

from __future__ import annotations

import pandas as pd
import pytest

from gpulib.core.findings import Finding
from gpulib.core.knowledge import load_table
from gpulib.kube import agents

IMEX_MSG = (
    "ErrorCode:DCGM_FR_IMEX_UNHEALTHY GPU:0 PCI:0000:9d:00.0 GPU_UUID:GPU-bb3e1419 IMEX daemon status is -3 "
    "(not READY) Check IMEX installation, configuration, domain and daemon status, and network connectivity. "
    "Recommended Action=CONTACT_SUPPORT;"
)
NVLINK_DOWN_MSG = (
    "ErrorCode:DCGM_FR_NVLINK_DOWN GPU 3's NvLink link 16 is currently down ... link 17 is currently down "
    "Recommended Action=RESTART_VM;"
)
#: words that mean a drain, a GPU/node reset or an RMA in a command or escalation
DISRUPTIVE_WORDS = ("drain", "cordon", "nvidia-smi -r", "reset", "reboot", "rma", "replace", "restart_vm")


def _node(name, conditions, labels=None, ready_at="2026-09-01T10:00:00Z"):
    conds = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}] + conditions
    return {"metadata": {"name": name, "labels": labels or {}}, "status": {"conditions": conds}}


def _cond(ctype, status, message="", at="2026-09-01T10:42:00Z", reason=""):
    return {"type": ctype, "status": status, "message": message, "reason": reason, "lastTransitionTime": at}


def _nodes(*items):
    return {"kind": "NodeList", "items": list(items)}


def _no_disruptive_step(f: Finding):
    text = " ".join(f.commands + [f.escalation, f.sop_step]).lower()
    assert not any(w in text for w in DISRUPTIVE_WORDS), (f.title, text)


def test_table_has_status_action_and_source_for_every_row():
    t = agents.condition_table()
    assert {
        "NVSentinel",
        "EKS node monitoring agent",
        "AKS Node Problem Detector",
        "Meta GCM",
        "Crusoe AutoClusters",
    } <= set(t["agent"])
    for r in t.itertuples():
        assert r.source.strip() and r.meaning.strip() and r.action.strip(), r.type
        if r.kind == "condition":
            assert r.bad_status in ("True", "False"), r.type
    fp = load_table("kube/agent_false_positives")
    assert set(fp["id"]) == {
        "imex_idle_no_compute_domain",
        "imex_single_node_nvswitch",
        "nvlink_down_after_planned_reboot",
    }


def test_imex_on_idle_gb300_without_compute_domain_is_not_a_fault():
    label = {"nvidia.com/gpu.clique": "dc6e40c4-d722-4357-9ba6-5291dd461278.2"}
    nodes = _nodes(_node("gb300-0", [_cond("GpuNvlinkWatch", "True", IMEX_MSG)], labels=label))
    rows = agents.agent_conditions(nodes, compute_domains={"items": []})
    r = rows.iloc[0]
    assert (r["bad"], r["false_positive"], r["error_code"]) == (True, "yes", "DCGM_FR_IMEX_UNHEALTHY")
    (f,) = agents.agent_findings(rows)
    assert f.severity.value == "ok" and f.title.startswith("Not a fault")
    assert "https://github.com/NVIDIA/aicr/issues/2641" in " ".join(f.evidence)
    _no_disruptive_step(f)


def test_imex_with_a_compute_domain_on_the_node_is_no_false_positive():
    label = {"nvidia.com/gpu.clique": "dc6e40c4-d722-4357-9ba6-5291dd461278.2"}
    nodes = _nodes(_node("gb300-0", [_cond("GpuNvlinkWatch", "True", IMEX_MSG)], labels=label))
    cds = {"items": [{"status": {"status": "NotReady", "nodes": [{"name": "gb300-0", "cliqueID": "x.2"}]}}]}
    rows = agents.agent_conditions(nodes, compute_domains=cds)
    assert rows.iloc[0]["false_positive"] == ""
    (f,) = agents.agent_findings(rows)
    assert f.severity.value == "warning"  # CONTACT_SUPPORT: a real IMEX problem, still no drain/reset/RMA step
    assert "CONTACT_SUPPORT" in f.title
    _no_disruptive_step(f)


def test_imex_unread_compute_domains_is_a_possible_false_positive_without_disruptive_steps():
    label = {"nvidia.com/gpu.clique": "dc6e40c4-d722-4357-9ba6-5291dd461278.2"}
    nodes = _nodes(_node("gb300-0", [_cond("GpuNvlinkWatch", "True", IMEX_MSG)], labels=label))
    (f,) = agents.agent_findings(agents.agent_conditions(nodes))
    assert f.severity.value == "warning" and f.title.startswith("Possible false positive")
    assert any("computedomains" in c for c in f.commands)
    _no_disruptive_step(f)


def test_imex_on_single_node_nvswitch_is_not_a_fault():
    nodes = _nodes(_node("p5-0", [_cond("GpuNvlinkWatch", "True", IMEX_MSG)]))  # no clique label
    cds = {"items": [{"status": {"nodes": [{"name": "p5-0"}]}}]}  # even a ComputeDomain listing it
    (f,) = agents.agent_findings(agents.agent_conditions(nodes, compute_domains=cds))
    assert f.severity.value == "ok"
    assert "https://github.com/NVIDIA/NVSentinel/issues/1471" in " ".join(f.evidence)
    _no_disruptive_step(f)


def test_nvlink_down_right_after_planned_reboot_is_not_a_fault_but_later_is():
    early = _nodes(_node("gb200-3", [_cond("GpuNvlinkWatch", "True", NVLINK_DOWN_MSG, at="2026-09-01T10:03:00Z")]))
    (f,) = agents.agent_findings(agents.agent_conditions(early))
    assert f.severity.value == "ok" and "RESTART_VM" in f.title
    assert "https://github.com/NVIDIA/NVSentinel/issues/1701" in " ".join(f.evidence)
    _no_disruptive_step(f)
    late = _nodes(_node("gb200-3", [_cond("GpuNvlinkWatch", "True", NVLINK_DOWN_MSG, at="2026-09-01T13:00:00Z")]))
    (g,) = agents.agent_findings(agents.agent_conditions(late))
    assert g.severity.value == "critical"  # links still down three hours after the boot: a real fault
    assert g.gpu == "3"


def test_title_reads_like_on_call_speaks():
    nodes = _nodes(_node("gb200-3", [_cond("GpuNvlinkWatch", "True", NVLINK_DOWN_MSG, at="2026-09-01T13:00:00Z")]))
    (f,) = agents.agent_findings(agents.agent_conditions(nodes))
    assert f.title.startswith("flagged by NVSentinel at 13:00 UTC, GpuNvlinkWatch, RESTART_VM")


def test_unknown_gpu_looking_condition_is_shown_not_dropped_and_kubelet_ones_ignored():
    nodes = _nodes(
        _node(
            "n0",
            [
                _cond("GpuMemWatch", "False"),
                _cond("SomeVendorGPUHealthy", "False"),
                _cond("KernelDeadlock", "False"),
                _cond("MemoryPressure", "False"),
            ],
        )
    )
    rows = agents.agent_conditions(nodes)
    assert set(rows["type"]) == {"GpuMemWatch", "SomeVendorGPUHealthy"}
    assert not rows["known"].any()
    fs = agents.agent_findings(rows)
    assert {f.data["condition"] for f in fs} == {"GpuMemWatch", "SomeVendorGPUHealthy"}
    assert all(f.severity.value == "info" for f in fs)


@pytest.mark.parametrize(
    ("ctype", "status", "bad"),
    [
        ("AcceleratedHardwareReady", "False", True),
        ("AcceleratedHardwareReady", "True", False),
        ("GcmXidErrorsProblem", "True", True),
        ("GPUMissing", "False", False),
        ("GPUDCGMUnhealthy", "True", True),
    ],
)
def test_which_status_means_bad_follows_the_table(ctype, status, bad):
    rows = agents.agent_conditions(_nodes(_node("n0", [_cond(ctype, status, reason="DCGMDiagnosticFailure")])))
    assert bool(rows.iloc[0]["bad"]) is bad and rows.iloc[0]["known"]


def test_eks_events_are_read():
    events = {
        "items": [
            {
                "reason": "DCGMHealthCode112",
                "message": "nvlink",
                "lastTimestamp": "2026-09-01T10:42:00Z",
                "involvedObject": {"kind": "Node", "name": "n0"},
            },
            {"reason": "Scheduled", "involvedObject": {"kind": "Pod", "name": "p"}},
        ]
    }
    rows = agents.agent_conditions(_nodes(_node("n0", [])), events_json=events)
    assert list(rows["type"]) == ["DCGMHealthCode112"]
    assert rows.iloc[0]["agent"] == "EKS node monitoring agent" and rows.iloc[0]["kind"] == "event"


def test_nvsentinel_xid_and_our_xid_are_one_finding():
    msg = "ErrorCode:79 GPU:5 XID 79 GPU has fallen off the bus Recommended Action=RESTART_BM;"
    rows = agents.agent_conditions(_nodes(_node("dgx-h100-1", [_cond("SysLogsXIDError", "True", msg)])))
    agent = agents.agent_findings(rows)
    ours = [
        Finding(
            "critical",
            "XID 79 (GPU_HAS_FALLEN_OFF_THE_BUS) on dgx-h100-1 GPU 5",
            node="dgx-h100-1",
            gpu="5",
            category="xid",
        )
    ]
    merged = agents.fold_agent_findings(ours, agent)
    assert len(merged) == 1
    assert merged[0].data["also_flagged_by"][0]["agent"] == "NVSentinel"
    assert any("flagged by NVSentinel at 10:42 UTC, SysLogsXIDError, RESTART_BM" in e for e in merged[0].evidence)
    other = [Finding("critical", "XID 48 (DBE) on dgx-h100-1 GPU 5", node="dgx-h100-1", gpu="5", category="xid")]
    assert len(agents.fold_agent_findings(other, agent)) == 2  # another XID is another fault


def test_timeline_rows():
    nodes = _nodes(
        _node(
            "gb300-0",
            [_cond("GpuNvlinkWatch", "True", IMEX_MSG)],
            labels={"nvidia.com/gpu.clique": "dc6e40c4-d722-4357-9ba6-5291dd461278.2"},
        )
    )
    tl = agents.timeline(agents.agent_conditions(nodes, compute_domains={"items": []}))
    assert list(tl.columns) == ["time", "node", "gpu", "signal", "detail"]
    assert tl.iloc[0]["time"] == pd.Timestamp("2026-09-01T10:42:00Z")
    assert tl.iloc[0]["detail"].endswith("(not a fault)")


def test_snapshot_node_history_shows_agent_conditions_on_the_timeline(tmp_path):
    import json
    import os

    import gpulib
    from gpulib.demo import gb200_rack
    from gpulib.reliability.timeline import node_timeline

    end = pd.Timestamp("2026-11-29T12:00:00Z")
    (tmp_path / "nodes.json").write_text(json.dumps(gb200_rack.nodes_json(end)))
    (tmp_path / "computedomains.json").write_text(json.dumps(gb200_rack.compute_domains_json()))
    (tmp_path / "events.json").write_text(json.dumps({"kind": "List", "items": []}))
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "List", "items": []}))
    (tmp_path / "metrics.txt").write_text("")
    for f in tmp_path.iterdir():
        os.utime(f, (end.timestamp(), end.timestamp()))
    src = gpulib.connect("snapshot", path=tmp_path)
    hist = src.node_history("30d", node="gb300-r7-n0")
    assert "agent_condition" in hist.read
    rows = hist.events[hist.events["signal"] == "agent_condition"]
    assert list(rows["code"]) == ["NVSentinel/GpuNvlinkWatch"]
    assert "not a fault" in rows.iloc[0]["detail"] and "aicr/issues/2641" in rows.iloc[0]["detail"]
    tl = node_timeline(hist.events, "gb300-r7-n0", end - pd.Timedelta("30d"), end)
    assert "Other agents" in set(tl["lane"])


def test_malformed_lists_are_skipped_not_fatal():
    rows = agents.agent_conditions(
        {"items": ["x", None, _node("n0", [_cond("GcmSmiEccProblem", "True")])]},
        events_json={"items": ["oops", {"reason": 3}]},
    )
    assert list(rows["type"]) == ["GcmSmiEccProblem"]
    assert agents.agent_conditions({"items": "nope"}).empty and agents.agent_conditions(["x"]).empty
