"""The verdict block a runbook page opens with: Impact names the pods and teams hit (the
escalation has its own line), a heading with nothing to say is left out instead of filled, commands are code blocks
with a copy button (plain ``<pre><code>`` without JavaScript), the page opens with one line per critical and warning
finding, and the top finding is rendered once per page."""

from __future__ import annotations

import re

from gpulib.core.findings import Finding, Severity
from gpulib.runbook import verdict_html


class _RB:
    name = "xid_ecc_triage"

    def rerun_command(self):
        return "gpuops run xid_ecc_triage --source demo"


def _text(h: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", h).split())


def _section(h: str, name: str) -> str:
    start = h.index(f"<h4>{name}</h4>")
    nxt = h.find("<h4>", start + 4)
    return h[start : nxt if nxt > 0 else len(h)]


def test_impact_names_the_pods_and_teams_hit_not_the_escalation():
    f = Finding(
        Severity.CRITICAL,
        "XID 79 on dgx-h100-1 GPU 5",
        escalation="RMA: open a case with the board serial",
        node="dgx-h100-1",
        gpu="5",
        data={
            "pods": [
                {"namespace": "ml", "pod": "train-0", "owner_kind": "Job", "owner_name": "train"},
                {"namespace": "search", "pod": "embed-1", "owner_kind": "", "owner_name": ""},
            ]
        },
    )
    h = verdict_html(f, _RB())
    impact = _text(_section(h, "Impact"))
    assert "ml/train-0" in impact and "search/embed-1" in impact
    assert "teams (namespaces): ml, search" in impact
    assert "RMA" not in impact  # failed before: Impact was the escalation text
    assert "RMA: open a case with the board serial" in _text(h)


def test_pods_named_as_strings_or_one_pod_count_too():
    a = Finding(Severity.WARNING, "t", data={"pods": ["ads/scorer-0", "ads/scorer-1"]})
    b = Finding(Severity.WARNING, "t", data={"pod": "legacy-transcoder-0", "namespace": "media"})
    assert "ads/scorer-0" in _text(_section(verdict_html(a, _RB()), "Impact"))
    assert "media/legacy-transcoder-0" in _text(_section(verdict_html(b, _RB()), "Impact"))


def test_no_filler_for_an_empty_field():
    h = verdict_html(Finding(Severity.WARNING, "Bare title"), _RB())
    for filler in ("No evidence lines", "carries no explanation", "No SOP step", "No node or GPU is named"):
        assert filler not in h, filler  # failed before: every empty heading printed a sentence
    assert "<h4>Diagnosis</h4>" not in h and "<h4>Meaning</h4>" not in h


def test_commands_are_code_blocks_with_a_copy_button():
    f = Finding(Severity.CRITICAL, "t", sop_step="Cordon it.", commands=["kubectl cordon dgx-h100-1"])
    h = verdict_html(f, _RB())
    assert "<pre><code>kubectl cordon dgx-h100-1</code></pre>" in h
    assert "$ kubectl" not in h  # failed before: prose with a '$' that a copy carries along
    assert re.search(r"<button[^>]*clipboard", h)


def test_the_page_opens_with_one_line_per_critical_and_warning_finding():
    fs = [
        Finding(Severity.CRITICAL, "XID 79 on n1", node="n1"),
        Finding(Severity.CRITICAL, "Row remap failure on n2", node="n2"),
        Finding(Severity.WARNING, "GPU hot on n3", node="n3"),
        Finding(Severity.INFO, "Idle GPUs"),
    ]
    h = verdict_html(fs[0], _RB(), others=fs[1:])
    head = h[: h.index("<h4>")]
    for t in ("XID 79 on n1", "Row remap failure on n2", "GPU hot on n3"):
        assert t in head, t
    assert "Idle GPUs" not in head
    assert "2 critical · 1 warning" in _text(head)


def test_a_report_opens_with_its_actions_ranked_by_money():
    """A report's reader is a manager: the page opens with the top actions by saving, each with its owner namespace
    and USD/month, before the severity lines (failed before: the weekly report opened on a pod finding and a
    jsonpath command, the 40,191 USD/month below)."""
    fs = [
        Finding(Severity.CRITICAL, "Pod media/legacy-transcoder-0 uses a GPU it never requested",
                data={"namespace": "media", "pod": "legacy-transcoder-0"}),
        Finding(Severity.WARNING, "Idle notebook dev-bob", data={"monthly_saving": 286.0, "currency": "USD",
                                                                  "namespace": "notebooks"}),
        Finding(Severity.INFO, "Unallocated GPUs", data={"monthly_saving": 40191.0, "currency": "USD",
                                                         "namespace": ""}),
    ]
    h = verdict_html(fs[0], _RB(), others=fs[1:], report=True)
    head = _text(h[: h.index("<h4>")])
    assert "Top actions by money" in head
    first, second = head.index("40,191 USD/month"), head.index("286 USD/month")
    assert first < second < head.index("legacy-transcoder-0")
    assert "notebooks" in head[max(0, second - 80) : second + 80]
    assert "Top actions by money" not in verdict_html(fs[0], _RB(), others=fs[1:])  # a runbook stays severity-first
