"""nccl_check verdicts are about the host the results came from, a capture is never judged against a band
measured on itself, and no finding sends the reader to the runbook they are reading."""

from __future__ import annotations

from pathlib import Path

import gpulib.nccl as nccl
import gpulib.nccl.steps as ns
from gpulib.demo.artifacts import DEMO_NCCL_TESTS, demo_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = demo_file(DEMO_NCCL_TESTS)  # the real 2xH200 capture the 2-GPU H200 bands were measured on


def _verdicts(text):
    results = [r for r in nccl.parse_nccl_tests_all(text) if len(r.table)]
    return ns.verdicts(results, text=text, gpu_model="H200", interconnect="NVLink4")


def test_packaged_capture_is_a_reference_not_a_healthy_verdict():
    vs = _verdicts(demo_file(DEMO_NCCL_TESTS).read_text())
    assert vs and all(v.status == "reference" for v in vs), [str(v) for v in vs]
    for v in vs:
        assert v.finding.severity.value == "info" and v.finding.node == "vm"
        assert "host vm" in v.finding.summary and "healthy" not in v.finding.title.lower()


def test_same_capture_under_another_name_is_still_a_reference(tmp_path):
    copy = tmp_path / "mine.txt"
    copy.write_text(FIXTURE.read_text())
    assert all(v.status == "reference" for v in _verdicts(copy.read_text()))


def test_another_run_is_judged_against_the_band():
    text = FIXTURE.read_text()
    # a slower run of the same machine: every row from 256 MiB up at 60 % of its algbw/busbw
    changed = "\n".join(_slowed(line) for line in text.splitlines())
    assert changed != text
    vs = {v.collective: v for v in _verdicts(changed)}
    assert vs["all_reduce"].status == "degraded", str(vs["all_reduce"])
    assert vs["all_reduce"].finding.node == "vm"


def _slowed(line: str) -> str:
    cols = line.split()
    if len(cols) >= 13 and cols[0].isdigit() and int(cols[0]) >= 2**28 and cols[2] == "float":
        for i in (6, 7, 10, 11):
            cols[i] = f"{float(cols[i]) * 0.6:.2f}"
        return "  " + "  ".join(cols)
    return line


def test_next_runbook_never_points_at_itself(monkeypatch):
    from gpulib.core.findings import Finding, Severity
    from gpulib.runbook import Runbook

    rb = Runbook("nccl_check", source="demo")
    rb.add(
        [
            Finding(Severity.WARNING, "NVLink traffic far below peers", runbook="nccl_check"),
            Finding(Severity.WARNING, "XID 74", runbook="xid_ecc_triage"),
        ]
    )
    fl = rb.finish()
    assert {f.title: f.runbook for f in fl} == {"NVLink traffic far below peers": None, "XID 74": "xid_ecc_triage"}
