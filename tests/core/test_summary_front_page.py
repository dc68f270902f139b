"""A report's ``summary.md`` is its front page in text: the top actions ranked by money, each with its owner
namespace and USD/month, before the verdict; a runbook's summary has no such section."""

from __future__ import annotations

from gpulib.core.findings import Finding, Severity
from gpulib.run.record import verdict_of, write_summary


def _findings():
    return [
        Finding(Severity.CRITICAL, "Pod media/legacy-transcoder-0 uses a GPU it never requested"),
        Finding(Severity.WARNING, "Idle notebook dev-bob",
                data={"monthly_saving": 286.0, "currency": "USD", "namespace": "notebooks"}),
        Finding(Severity.INFO, "Unallocated GPUs", data={"monthly_saving": 40191.0, "currency": "USD"}),
    ]


def test_a_reports_summary_opens_with_its_actions_ranked_by_money(tmp_path):
    rec = {"runbook": "gpu_utilization_report", "status": "done", "params": {}}
    text = write_summary(tmp_path, rec, "r.html", verdict_of(_findings(), {"worst": "critical"})).read_text()
    assert "## Top actions by money" in text  # failed before: no money anywhere in summary.md
    a, b, v = text.index("40,191 USD/month"), text.index("286 USD/month · notebooks"), text.index("**Verdict:**")
    assert a < b < v


def test_a_runbooks_summary_has_no_money_section(tmp_path):
    rec = {"runbook": "xid_ecc_triage", "status": "done", "params": {}}
    fs = [Finding(Severity.CRITICAL, "XID 79")]
    text = write_summary(tmp_path, rec, "r.html", verdict_of(fs, {"worst": "critical"})).read_text()
    assert "Top actions by money" not in text
