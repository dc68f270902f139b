"""The steps of ``reports/gpu_reliability_report.ipynb`` and its definition (:data:`RUNBOOK`): :func:`load` reads the
fleet's history once, :func:`build` computes every section (:mod:`gpulib.reliability.fleet`), and
:func:`report_findings` gives the report's findings in one call over it. What each step shows is in
:mod:`gpulib.reliability.view`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpulib.core.errors import EmptyResult
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import settings
from gpulib.core.runbook import DIR, Param, Runbook, Step
from gpulib.core.sop import sop
from gpulib.core.timeutil import parse_window
from gpulib.reliability import fleet as F
from gpulib.reliability.findings import change_findings, score_finding


@dataclass
class ReliabilityReport:
    window: str
    fh: F.FleetHistory
    incidents: pd.DataFrame
    rates: pd.DataFrame
    between: pd.DataFrame
    out_of_service: pd.DataFrame
    offenders: pd.DataFrame
    alerts: pd.DataFrame
    changes: list = field(default_factory=list)
    score: F.Score | None = None


def load(src, window: str) -> F.FleetHistory:
    """The history of every node over ``history_factor`` windows, and the node list; EmptyResult without XIDs."""
    cfg = settings("reliability_settings")
    win = pd.Timedelta(parse_window(window))
    hist = src.node_history((win * int(cfg["history_factor"])).to_pytimedelta())
    if "xid" not in hist.read:
        raise EmptyResult(
            "the report needs the XID history (" + hist.missing.get("xid", "not read") + ")",
            hint="export DCGM_FI_DEV_XID_ERRORS (dcgm-exporter) to the Prometheus the source reads",
        )
    nodes = F.node_table(src.nodes(), cfg.text("pool_label"))
    return F.FleetHistory(hist.events, nodes, hist.end - win, hist.end, hist.read, hist.missing, hist.start)


def build(fh: F.FleetHistory, window: str) -> ReliabilityReport:
    inc = F.fleet_incidents(fh)
    win = inc[inc["time"] >= fh.start]
    oos = F.out_of_service(fh)
    off = F.repeat_offenders(win)
    rep = ReliabilityReport(
        window,
        fh,
        win,
        F.rates_table(fh, win),
        F.time_between(fh, win),
        oos,
        off,
        F.alert_outcomes(fh),
        F.changes(fh, inc),
    )
    rep.score = F.health_score(fh, win, oos, off)
    return rep


def report_findings(rep: ReliabilityReport | None) -> list[Finding]:
    """Regressions after a change, the repeat offenders (RMA candidates) and the fleet health score."""
    if rep is None:
        return []
    out = [f for f in change_findings(rep.changes) if f.severity != Severity.OK]
    for _, r in rep.offenders.iterrows():
        s = sop(
            "reliability_sop",
            "repeat_offender",
            node=r["node"],
            gpu=r["gpu"],
            node_ref=f"node/{r['node']}",
            count=int(r["incidents"]),
            lookback=rep.window,
            what=r["what"],
        )
        out.append(
            Finding(
                Severity.WARNING,
                f"{r['node']} GPU {r['gpu']}: repeat offender, RMA candidate",
                summary=s.summary,
                sop_step=s.sop_step,
                commands=s.commands,
                escalation=s.escalation,
                category="reliability",
                node=r["node"],
                gpu=r["gpu"],
                runbook="node_health",
                data={"verdict": "repeat_offender", "count": int(r["incidents"])},
            )
        )
    out.append(score_finding(rep.score.score, rep.window))
    return out


# ------------------------------------------------------------------------------------------------- the runbook
def gather_report(c) -> None:
    """Read the fleet's history (:func:`load`) and compute every section (:func:`build`)."""
    c.rep = build(load(c.src, c.window), c.window)


def gather_changes(c) -> None:
    c.table = F.changes_table(c.rep.changes)


def _start(c) -> dict[str, Any]:
    return {"rep": None}


def _findings(c) -> list[Finding]:
    return report_findings(c.rep)


_VIEW = "gpulib.reliability.view:"
_HISTORY = ("node history", "DCGM_FI_DEV_XID_ERRORS", "nodes")
RUNBOOK = Runbook(
    name="gpu_reliability_report",
    domain="reliability",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param(
            "snapshot_dir",
            "",
            "folder with nodes.json and events.json (kubectl get events -A -o json) when source: snapshot",
            kind=DIR,
        ),
        Param("window", "30d", "report window, Prometheus duration: 7d, 30d, 90d"),
        Param("charts", "", "plotly.js in the HTML: inline, cdn or shared; empty: the run's way (inline by default)"),
    ),
    steps=(
        Step("Load the fleet history", gather_report, needs=("src",), inputs=_HISTORY),
        Step("Fleet health score", None, _VIEW + "show_score", needs=("rep",)),
        Step("Incident rates", None, _VIEW + "show_rates", needs=("rep",)),
        Step("Time between incidents", None, _VIEW + "show_between", needs=("rep",)),
        Step("Time out of service", None, _VIEW + "show_out_of_service", needs=("rep",)),
        Step("Repeat offenders", None, _VIEW + "show_offenders", needs=("rep",)),
        Step("Alert outcomes", None, _VIEW + "show_alerts", needs=("rep",)),
        Step("Before/after changes", gather_changes, _VIEW + "show_changes", needs=("rep",)),
        Step("Method", None, _VIEW + "show_method"),
    ),
    findings=_findings,
    start=_start,
    figures=lambda c: _key_figures(c),
)


def _key_figures(c) -> dict[str, dict[str, Any]]:
    """The figures ``gpuops diff`` compares run to run: hardware incidents per 1,000 GPU-days and the health score."""
    if c.rep is None or c.rep.score is None:
        return {}
    sc = c.rep.score
    return {
        "hw_incidents_per_1000_gpu_days": {
            "label": "Hardware incidents per 1,000 GPU-days", "unit": "/1,000 GPU-days", "value": sc.hw_rate,
            "better": "lower",
        },
        "incidents": {"label": "Incidents in the window", "unit": "incidents", "value": len(c.rep.incidents),
                      "better": "lower"},
        "health_score": {"label": "Fleet health score", "unit": "/100", "value": sc.score, "better": "higher"},
    }  # fmt: skip
