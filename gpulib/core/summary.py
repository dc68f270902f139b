"""``summary.md`` of a run (verdict, cause, next commands) and the same facts for the run index and notifications."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpulib.core.findings import Finding, load_findings, sort_findings
from gpulib.core.money import money


def verdict_of(findings: list[Finding], doc: dict[str, Any]) -> dict[str, Any]:
    """severity, cause (top finding), where (its node and GPU), its SOP step and commands, from a run's findings
    and its findings.json document (``worst``, ``errors``)."""
    fs = sort_findings(findings)
    top = fs[0] if fs else None
    return {
        "severity": doc.get("worst", "ok"),
        "cause": top.title if top else "no finding",
        "node": (top.node or "") if top else "",
        "gpu": (top.gpu or "") if top else "",
        "sop_step": top.sop_step if top else "",
        "commands": list(top.commands) if top else [],
        "findings": len(fs),
        "errors": doc.get("errors", []),
        "actions": _actions_by_money(fs),
    }


def _actions_by_money(fs: list[Finding], most: int = 5) -> list[str]:
    """``"40,191 USD/month · namespace · title"`` of the findings with a monthly saving, largest first (a report's
    front page: :mod:`gpulib.core.verdict_block` shows the same ranking)."""
    priced = [f for f in fs if float((f.data or {}).get("monthly_saving") or 0) > 0]
    priced.sort(key=lambda f: -float(f.data["monthly_saving"]))
    return [
        " · ".join(
            x
            for x in (
                money(f.data["monthly_saving"], f.data.get("currency") or "USD") + "/month",
                str(f.data.get("namespace") or ""),
                f.title,
            )
            if x
        )
        for f in priced[:most]
    ]


def read_verdict(folder: Path) -> dict[str, Any]:
    """:func:`verdict_of` the folder's findings.json (empty if none): for a run that was not made by
    :func:`gpulib.execute.execute`, which hands its verdict over instead."""
    fj = folder / "findings.json"
    if not fj.is_file():
        return {}
    return verdict_of(*load_findings(fj))


def status_of(failed: str | None, usage_errors: list, errors: list) -> str:
    """A run's status word, as ``gpuops run`` prints it."""
    return "failed" if failed else ("bad parameter" if usage_errors else ("incomplete" if errors else "done"))


def write_summary(folder: Path, rec: dict[str, Any], link: str, v: dict[str, Any], *, rendering: bool = False) -> Path:
    """``folder/summary.md`` for the run ``rec`` (runbook, status, params, error) with verdict ``v``
    (:func:`verdict_of`; empty when the run wrote no findings) and a link to its report; ``rendering``: the verdict
    is known and the notebook behind it (the evidence) is still being rendered. A render that failed after the
    verdict (``rec["render_error"]``) is said below the verdict."""
    lines = [f"# {rec['runbook']}: {rec['status'].upper()}", ""]
    lines.append("Parameters: " + (", ".join(f"`{k}={val}`" for k, val in rec["params"].items()) or "defaults"))
    if rec.get("error"):
        lines += ["", f"**Error:** {rec['error']}"]
    if v.get("actions"):
        lines += ["", "## Top actions by money", ""] + [f"{i}. {a}" for i, a in enumerate(v["actions"], 1)]
    if v:
        lines += ["", f"**Verdict:** {v['severity']}", "", f"**Cause:** {v['cause']}"]
        if v["sop_step"]:
            lines += ["", f"**Next step:** {v['sop_step']}"]
        if v["commands"]:
            lines += ["", "Commands (dry run: nothing was applied):", "", "```"] + v["commands"] + ["```"]
    if rendering:
        lines += ["", "Evidence: the notebook (charts, tables) is still rendering; the report link shows it when done."]
    if rec.get("render_error"):
        lines += ["", f"**Evidence:** the notebook could not be rendered: {rec['render_error']}"]
    if rec.get("verdict_changed"):
        lines += ["", "The notebook's verdict differs from the first (fast) one and replaces it."]
    lines += ["", f"Report: {link}", ""]
    p = folder / "summary.md"
    p.write_text("\n".join(lines))
    return p
