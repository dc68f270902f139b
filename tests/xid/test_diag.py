"""DCGM diagnostic results turned into the SOP step: RMA on a failed memory/PCIe/diagnostic test, return to
service (uncordon) on an all-pass after the reset, each with the evidence line."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpulib.core.findings import Severity
from gpulib.nvidia import parse_dcgmi_diag
from gpulib.xid import diag_findings, diag_test_class

FIX = Path(__file__).parents[1] / "fixtures" / "dcgmi"
NODE = "dgx-h100-1"


def _diag(name):
    return parse_dcgmi_diag((FIX / name).read_text())


def _doc(statuses: dict[str, str]) -> str:
    cats = {
        "software": "Deployment",
        "memory": "Hardware",
        "pcie": "Integration",
        "diagnostic": "Hardware",
        "targeted_stress": "Stress",
    }
    return json.dumps(
        {
            "DCGM Diagnostic": {
                "test_categories": [
                    {
                        "category": cats[t],
                        "tests": [
                            {
                                "name": t,
                                "test_summary": {"status": s},
                                "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 5, "status": s}],
                            }
                        ],
                    }
                    for t, s in statuses.items()
                ]
            }
        }
    )


def test_failed_memory_test_is_the_rma_step_with_its_evidence_line():
    fs = diag_findings(_diag("dcgm4_schema_memory_fail.json"), NODE)
    (f,) = fs
    assert f.severity is Severity.CRITICAL and f.data["rule"] == "DIAG_RMA" and f.gpu == "1"
    assert "RMA" in f.sop_step and "RMA" in f.title
    assert any(
        e.startswith("dcgmi diag Hardware / memory (GPU 1): Fail — example: GPU 1 memory test found a miscompare")
        for e in f.evidence
    )
    assert "kubectl cordon dgx-h100-1" in f.commands and any("nvidia-bug-report" in c for c in f.commands)


def test_dcgm331_text_gpu_memory_fail_on_gpu0():
    fs = diag_findings(_diag("r2_dcgm331_gpu0_memory_fail_tail.txt"), NODE)
    assert fs[0].data["rule"] == "DIAG_RMA" and fs[0].gpu == "0"
    assert "cuCtxCreate" in " ".join(fs[0].evidence)
    # asking about the GPU that passed: no RMA for it
    other = diag_findings(_diag("r2_dcgm331_gpu0_memory_fail_tail.txt"), NODE, gpu="1")
    assert all(f.data["rule"] != "DIAG_RMA" for f in other)


def test_pcie_and_diagnostic_failures_are_rma_stress_is_not():
    for test in ("pcie", "diagnostic"):
        (f,) = diag_findings(parse_dcgmi_diag(_doc({"software": "Pass", test: "Fail"})), NODE)
        assert f.data["rule"] == "DIAG_RMA" and f.severity is Severity.CRITICAL, test
    (f,) = diag_findings(parse_dcgmi_diag(_doc({"software": "Pass", "targeted_stress": "Fail"})), NODE)
    assert f.data["rule"] == "DIAG_STRESS" and f.severity is Severity.WARNING
    (f,) = diag_findings(parse_dcgmi_diag(_doc({"software": "Fail"})), NODE)
    assert f.data["rule"] == "DIAG_DEPLOYMENT" and "says nothing about the hardware" in f.sop_step


def test_all_pass_after_reset_returns_to_service():
    diag = parse_dcgmi_diag(_doc({"software": "Pass", "memory": "Pass", "pcie": "Pass", "diagnostic": "Pass"}))
    (f,) = diag_findings(diag, NODE, "5", after_reset=True, source="dcgmi-diag-dgx-h100-1.json")
    assert f.data["rule"] == "DIAG_RETURN_TO_SERVICE" and f.severity is Severity.OK
    assert f.commands == ["kubectl uncordon dgx-h100-1"] and "return" in f.title
    assert "dcgmi diag Hardware / memory (GPU 5): Pass" in f.evidence and f.evidence[-1].endswith("dgx-h100-1.json")
    (g,) = diag_findings(diag, NODE, "5", after_reset=False)
    assert g.data["rule"] == "DIAG_PASS" and g.commands == [] and "uncordon" not in " ".join(g.commands)


SMI = Path(__file__).parents[1] / "fixtures" / "smi"


def test_after_reset_is_not_believed_while_nvidia_smi_still_owes_a_reset():
    """``after_reset=true`` is the operator's word; nvidia-smi -q of the node can contradict it: ``GPU Reset
    Status / Reset Required: Yes``, ``Drain and Reset Recommended: Yes``, a ``GPU Recovery Action`` other than
    None or a pending row remap means the reset has not taken effect (or a new one is owed), so no uncordon.
    Input: tests/fixtures/smi/h100x2_incident_q.txt (GPU 0 verbatim nvidia-smi 565 layout, GPU 1 the same
    layout with the incident values: reset required, recovery action "Drain and Reset", remap pending)."""
    from gpulib.nvidia import parse_query

    smi = parse_query((SMI / "h100x2_incident_q.txt").read_text())
    all_pass = {"software": "Pass", "memory": "Pass", "pcie": "Pass", "diagnostic": "Pass"}
    one = json.loads(_doc(all_pass))
    for t in one["DCGM Diagnostic"]["test_categories"]:
        for r in t["tests"][0]["results"]:
            r["entity_id"] = 1
    (f,) = diag_findings(parse_dcgmi_diag(json.dumps(one)), NODE, "1", after_reset=True, smi=smi)
    assert f.data["rule"] == "DIAG_RESET_NOT_SEEN" and f.severity is Severity.WARNING
    assert "kubectl uncordon dgx-h100-1" not in f.commands and "not taken effect" in f.sop_step
    assert "nvidia-smi -q (Thu Nov 14 07:00:14 2024): GPU 1 Reset Required: Yes" in f.evidence
    assert "nvidia-smi -q (Thu Nov 14 07:00:14 2024): GPU 1 GPU Recovery Action: Drain and Reset" in f.evidence
    assert "nvidia-smi -q (Thu Nov 14 07:00:14 2024): GPU 1 Remapped Rows Pending: Yes" in f.evidence
    # GPU 0 of the same report owes nothing: the operator's word stands
    for t in one["DCGM Diagnostic"]["test_categories"]:
        for r in t["tests"][0]["results"]:
            r["entity_id"] = 0
    (g,) = diag_findings(parse_dcgmi_diag(json.dumps(one)), NODE, "0", after_reset=True, smi=smi)
    assert g.data["rule"] == "DIAG_RETURN_TO_SERVICE"
    # the real H200 report (driver 580, reset status N/A, no pending remap) contradicts nothing
    real = parse_query(
        (Path(__file__).resolve().parents[2] / "gpulib/data/captures/h200_580.159.04_smi_q.txt").read_text()
    )
    diag = parse_dcgmi_diag(_doc(all_pass))
    (h,) = diag_findings(diag, NODE, "5", after_reset=True, smi=real.assign(index=5.0))
    assert h.data["rule"] == "DIAG_RETURN_TO_SERVICE"


def test_runbook_keeps_the_xid_step_when_nvidia_smi_contradicts_after_reset(tmp_path, monkeypatch):
    import gpulib.xid.steps as xs

    diag = _doc({"software": "Pass", "memory": "Pass", "pcie": "Pass", "diagnostic": "Pass"})
    # GPU 5 still off the bus at the end: nvidia-smi -q has no block for it
    snap = _snapshot_with_diag(tmp_path / "gone", monkeypatch, diag, smi_after_reset=False)
    fs = xs.findings(xs.collect(snap, NODE, "5", "6h", after_reset=True))
    rules = [f.data.get("rule") or f.data.get("bucket") for f in fs]
    assert "DIAG_RESET_NOT_SEEN" in rules and "DIAG_RETURN_TO_SERVICE" not in rules
    assert fs[0].data.get("bucket") == "RESTART_BM" and fs[0].severity is Severity.CRITICAL  # the XID step stays
    assert xs.remediation_plan(fs, NODE) != []
    nope = next(f for f in fs if f.data.get("rule") == "DIAG_RESET_NOT_SEEN")
    assert any("is missing a GPU's block, so GPU 5 cannot be found in it by index" in e for e in nope.evidence)
    # with the GPU's bus id known (the demo source's DCGM labels), the evidence names it
    import gpulib
    from gpulib.xid.diag import reset_owed

    demo = gpulib.connect("demo")
    inp = xs.collect(demo, NODE, "5", "6h")
    assert reset_owed(inp.smi, "5", pci_bus_id=inp.target.pci_bus_id) == [
        "nvidia-smi -q (Tue Dec 01 08:00:00 2026) has no block for GPU 5 (PCI 0000:68:00.0): the GPU is not back"
    ]
    # GPU 5 back, but its block says what GPU 1 of tests/fixtures/smi/h100x2_incident_q.txt says
    snap = _snapshot_with_diag(tmp_path / "owed", monkeypatch, diag)
    path = tmp_path / "owed" / "snap" / f"nvidia-smi-q-{NODE}.txt"
    head, *blocks = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", path.read_text())
    (i,) = [n for n, blk in enumerate(blocks) if re.search(r"(?m)^    Minor Number\s+: 5$", blk)]
    blocks[i] = re.sub(r"(?m)^(    GPU Recovery Action\s+: )None$", r"\1Drain and Reset", blocks[i])
    path.write_text(head + "".join(blocks))
    fs = xs.findings(xs.collect(type(snap)(path.parent), NODE, "5", "6h", after_reset=True))
    nope = next(f for f in fs if f.data.get("rule") == "DIAG_RESET_NOT_SEEN")
    assert any(e.endswith("GPU 5 GPU Recovery Action: Drain and Reset") for e in nope.evidence)
    assert fs[0].data.get("bucket") == "RESTART_BM" and fs[0].severity is Severity.CRITICAL


def test_level1_pass_tested_no_hardware_and_skips_say_so():
    (f,) = diag_findings(_diag("r2_dcgm331_gpu1_pass_head.txt"), NODE, after_reset=True)
    assert f.data["rule"] == "DIAG_NO_HARDWARE"  # deployment rows only: no return to service on that
    fs = diag_findings(_diag("r3_dcgm3_json_skip.json"), NODE, after_reset=True)
    assert [f.data["rule"] for f in fs] == ["DIAG_SKIP"]


def test_no_diagnostic_no_finding_and_unknown_tests_are_other():
    assert diag_findings(None, NODE) == [] and diag_findings(parse_dcgmi_diag(""), NODE) == []
    assert diag_test_class("GPU Memory") == "memory" and diag_test_class("Page Retirement/Row Remap") == "retirement"
    assert diag_test_class("some new plugin") == "other"


def _snapshot_with_diag(tmp_path, monkeypatch, diag_text, *, smi_after_reset=True):
    """The demo node's files, GPU 5 fallen off the bus (XID 79) 2 h before the end. ``smi_after_reset``: its
    nvidia-smi -q as after a successful reset (GPU 5 back and owing nothing: the demo's report of the node
    before the XID), else the one at the end (``Unable to determine the device handle`` for GPU 5)."""
    import gpulib
    from gpulib.demo.artifacts import render_smi_query

    monkeypatch.setenv("GPUOPS_END", "2026-12-01T08:00:00Z")
    src = gpulib.connect("demo")
    d = tmp_path / "snap"
    d.mkdir(parents=True)
    (d / f"dmesg-{NODE}.txt").write_text(src.kernel_log(NODE))
    smi = render_smi_query(src.sim, NODE, at=src.end.timestamp() - 3 * 3600) if smi_after_reset else src.smi_query(NODE)
    (d / f"nvidia-smi-q-{NODE}.txt").write_text(smi)
    (d / "nodes.json").write_text(json.dumps(src.nodes_json()))
    (d / "pods.json").write_text(json.dumps(src.pods_json()))
    (d / f"dcgmi-diag-{NODE}.json").write_text(diag_text)
    return gpulib.connect("snapshot", path=str(d))


def test_runbook_all_pass_after_reset_tops_the_xid_with_return_to_service(tmp_path, monkeypatch):
    import gpulib.xid.steps as xs

    snap = _snapshot_with_diag(
        tmp_path, monkeypatch, _doc({"software": "Pass", "memory": "Pass", "pcie": "Pass", "diagnostic": "Pass"})
    )
    before = xs.findings(xs.collect(snap, NODE, "5", "6h"))
    assert before[0].data.get("bucket") == "RESTART_BM"  # a pass without the reset does not clear the XID's step
    assert any(f.data.get("rule") == "DIAG_PASS" for f in before)
    after = xs.findings(xs.collect(snap, NODE, "5", "6h", after_reset=True))
    assert all(f.severity in (Severity.INFO, Severity.OK) for f in after)
    rts = next(f for f in after if f.data.get("rule") == "DIAG_RETURN_TO_SERVICE")
    assert rts.commands == ["kubectl uncordon dgx-h100-1"]
    assert xs.remediation_plan(after, NODE) == []  # nothing drains the node any more


def test_runbook_failed_memory_test_stays_rma_after_reset(tmp_path, monkeypatch):
    import gpulib.xid.steps as xs

    snap = _snapshot_with_diag(tmp_path, monkeypatch, _doc({"software": "Pass", "memory": "Fail", "pcie": "Pass"}))
    fs = xs.findings(xs.collect(snap, NODE, "5", "6h", after_reset=True))
    rules = [f.data.get("rule") or f.data.get("bucket") for f in fs if f.severity is Severity.CRITICAL]
    assert "DIAG_RMA" in rules and "RESTART_BM" in rules
    assert any("memory (GPU 5): Fail" in e for f in fs for e in f.evidence)
