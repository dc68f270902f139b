"""DCGM diagnostic results turned into the SOP step: RMA on a failed memory/PCIe/diagnostic test, return to
service (uncordon) on an all-pass after the reset, each with the evidence line."""
from __future__ import annotations

import json
from pathlib import Path

from gpulib.core.findings import Severity
from gpulib.nvidia import parse_dcgmi_diag
from gpulib.xid import diag_findings, diag_test_class

FIX = Path(__file__).parent / "fixtures" / "dcgmi"
NODE = "dgx-h100-1"


def _diag(name):
    return parse_dcgmi_diag((FIX / name).read_text())


def _doc(statuses: dict[str, str]) -> str:
    cats = {"software": "Deployment", "memory": "Hardware", "pcie": "Integration", "diagnostic": "Hardware",
            "targeted_stress": "Stress"}
    return json.dumps({"DCGM Diagnostic": {"test_categories": [
        {"category": cats[t], "tests": [{"name": t, "test_summary": {"status": s},
                                         "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 5, "status": s}]}]}
        for t, s in statuses.items()]}})


def test_failed_memory_test_is_the_rma_step_with_its_evidence_line():
    fs = diag_findings(_diag("dcgm4_schema_memory_fail.json"), NODE)
    (f,) = fs
    assert f.severity is Severity.CRITICAL and f.data["rule"] == "DIAG_RMA" and f.gpu == "1"
    assert "RMA" in f.sop_step and "RMA" in f.title
    assert any(e.startswith("dcgmi diag Hardware / memory (GPU 1): Fail — example: GPU 1 memory test found a miscompare")
               for e in f.evidence)
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


def test_level1_pass_tested_no_hardware_and_skips_say_so():
    (f,) = diag_findings(_diag("r2_dcgm331_gpu1_pass_head.txt"), NODE, after_reset=True)
    assert f.data["rule"] == "DIAG_NO_HARDWARE"  # deployment rows only: no return to service on that
    fs = diag_findings(_diag("r3_dcgm3_json_skip.json"), NODE, after_reset=True)
    assert [f.data["rule"] for f in fs] == ["DIAG_SKIP"]


def test_no_diagnostic_no_finding_and_unknown_tests_are_other():
    assert diag_findings(None, NODE) == [] and diag_findings(parse_dcgmi_diag(""), NODE) == []
    assert diag_test_class("GPU Memory") == "memory" and diag_test_class("Page Retirement/Row Remap") == "retirement"
    assert diag_test_class("some new plugin") == "other"


def _snapshot_with_diag(tmp_path, monkeypatch, diag_text):
    import gpulib

    monkeypatch.setenv("GPUOPS_END", "2026-12-01T08:00:00Z")
    src = gpulib.connect("demo")
    d = tmp_path / "snap"
    d.mkdir()
    (d / f"dmesg-{NODE}.txt").write_text(src.kernel_log(NODE))
    (d / f"nvidia-smi-q-{NODE}.txt").write_text(src.smi_query(NODE))
    (d / "nodes.json").write_text(json.dumps(src.nodes_json()))
    (d / "pods.json").write_text(json.dumps(src.pods_json()))
    (d / f"dcgmi-diag-{NODE}.json").write_text(diag_text)
    return gpulib.connect("snapshot", path=str(d))


def test_runbook_all_pass_after_reset_tops_the_xid_with_return_to_service(tmp_path, monkeypatch):
    import gpulib.xid.runbook as xr

    snap = _snapshot_with_diag(tmp_path, monkeypatch, _doc({"software": "Pass", "memory": "Pass", "pcie": "Pass", "diagnostic": "Pass"}))
    before = xr.findings(xr.collect(snap, NODE, "5", "6h"))
    assert before[0].data.get("bucket") == "RESTART_BM"  # a pass without the reset does not clear the XID's step
    assert any(f.data.get("rule") == "DIAG_PASS" for f in before)
    after = xr.findings(xr.collect(snap, NODE, "5", "6h", after_reset=True))
    assert all(f.severity in (Severity.INFO, Severity.OK) for f in after)
    rts = next(f for f in after if f.data.get("rule") == "DIAG_RETURN_TO_SERVICE")
    assert rts.commands == ["kubectl uncordon dgx-h100-1"]
    assert xr.remediation_plan(after, NODE) == []  # nothing drains the node any more


def test_runbook_failed_memory_test_stays_rma_after_reset(tmp_path, monkeypatch):
    import gpulib.xid.runbook as xr

    snap = _snapshot_with_diag(tmp_path, monkeypatch, _doc({"software": "Pass", "memory": "Fail", "pcie": "Pass"}))
    fs = xr.findings(xr.collect(snap, NODE, "5", "6h", after_reset=True))
    rules = [f.data.get("rule") or f.data.get("bucket") for f in fs if f.severity is Severity.CRITICAL]
    assert "DIAG_RMA" in rules and "RESTART_BM" in rules
    assert any("memory (GPU 5): Fail" in e for f in fs for e in f.evidence)
