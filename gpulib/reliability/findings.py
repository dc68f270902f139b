"""Findings of the reliability domain: a node's verdict (``node_health``) and the report's before/after
verdicts, with SOP text, commands and escalation from ``gpulib/data/reliability/reliability_sop.csv``."""

from __future__ import annotations

from gpulib.core.findings import Finding, Severity
from gpulib.core.sop import sop

#: the runbook each verdict's SOP step opens (none: this runbook is the last word)
NEXT_RUNBOOK = {"faulted": "xid_ecc_triage", "degrading": "fleet_overview"}
TITLES = {
    "faulted": "{node} GPU {gpu}: open hardware fault",
    "repeat_offender": "{node} GPU {gpu}: repeat offender, RMA candidate",
    "degrading": "{node}: incident rate rising",
    "recovering": "{node} GPU {gpu}: recovering after a {how}",
    "healthy": "{node}: healthy",
}


def node_findings(v) -> list[Finding]:
    """One finding per rule hit of a :class:`gpulib.reliability.verdict.NodeVerdict`; an OK finding when none."""
    lookback = f"{v.lookback.days}d"
    if not v.hits:
        s = sop("reliability_sop", "healthy", node=v.node, lookback=lookback)
        return [
            Finding(
                Severity.OK,
                TITLES["healthy"].format(node=v.node),
                summary=s.summary,
                sop_step=s.sop_step,
                category="reliability",
                node=v.node,
                data={"verdict": "healthy", "rule": "healthy"},
            )
        ]
    out = []
    for h in v.hits:
        vals = {"node": v.node, "gpu": h.gpu, "node_ref": f"node/{v.node}", "lookback": lookback, **h.values}
        s = sop("reliability_sop", h.verdict, **vals)
        data = {"verdict": h.verdict, "rule": h.rule, **{k: v2 for k, v2 in h.values.items() if k != "test"}}
        if h.test is not None:
            data.update(test=h.test.test, rate_ratio=h.test.ratio, ci=[h.test.low, h.test.high], p=h.test.p_value)
        out.append(
            Finding(
                Severity(h.severity),
                TITLES[h.verdict].format(**vals),
                summary=s.summary,
                sop_step=s.sop_step,
                commands=s.commands,
                evidence=h.evidence,
                escalation=s.escalation,
                category="reliability",
                node=v.node,
                gpu=h.gpu or None,
                runbook=NEXT_RUNBOOK.get(h.verdict),
                data=data,
            )
        )
    return out


def incomplete_finding(node: str, share: float, lookback: str) -> Finding:
    """Too little data for a verdict: the run is INCOMPLETE (the step raises; this finding says why)."""
    s = sop("reliability_sop", "incomplete", node=node, coverage=share, lookback=lookback)
    return Finding(
        Severity.WARNING,
        f"{node}: not enough data for a verdict",
        summary=s.summary,
        sop_step=s.sop_step,
        commands=s.commands,
        category="reliability",
        node=node,
        data={"verdict": "incomplete", "coverage": share},
    )


def change_findings(changes) -> list[Finding]:
    """One finding per driver/GPU Operator change of the report: a regression (warning) or none (OK)."""
    out = []
    for c in changes:
        key = "regression" if c.regression else "no_regression"
        s = sop(
            "reliability_sop",
            key,
            what=c.what,
            scope=c.scope,
            after=c.after_text,
            before=c.before_text,
            test=c.test.text(" GPU-days"),
            kind=c.kind.replace("_change", ""),
        )
        out.append(
            Finding(
                Severity.WARNING if c.regression else Severity.OK,
                f"{c.kind.replace('_', ' ')} {c.detail} on {c.scope}: "
                + (f"{c.what} rate x{c.test.ratio:.1f}" if c.regression else "no rise"),
                summary=s.summary,
                sop_step=s.sop_step,
                escalation=s.escalation,
                category="reliability-change",
                evidence=[c.test.text(" GPU-days")],
                data={
                    "verdict": "regression" if c.regression else "none",
                    "scope": c.scope,
                    "kind": c.kind,
                    "change": c.detail,
                    "class": c.what,
                    "rate_ratio": c.test.ratio,
                    "ci": [c.test.low, c.test.high],
                    "p": c.test.p_value,
                    "test": c.test.test,
                },
            )
        )
    return out


def score_finding(score: float, window: str) -> Finding:
    s = sop("reliability_sop", "fleet_score", score=score, window=window)
    sev = Severity.OK if score >= 80 else Severity.INFO if score >= 60 else Severity.WARNING
    return Finding(
        sev,
        f"Fleet health score {score:.0f}/100",
        summary=s.summary,
        sop_step=s.sop_step,
        category="reliability-score",
        data={"score": score},
    )
