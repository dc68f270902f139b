"""What changed between two runs of a runbook: findings new, gone and changed (severity, cause), and the key figures
the runbook declares (``Runbook.figures``: idle GPU-hours and cost, zombie pods, incidents per 1,000 GPU-days,
health score) with their change. ``gpuops diff RUN_A RUN_B``, ``gpuops diff --last N --runbook R``; a report run
after an earlier one of the same runbook and parameters opens with "Since last time" (:func:`since_last_time`,
called by the run engine) and the run index links the run to its ``diff.html``.

Notebook tools diff the notebook JSON (nbdime, https://nbdime.readthedocs.io/), not the results; this compares the
results a run recorded: ``findings.json`` and ``key_figures.json`` (written by :func:`save_figures` when the run's
session finishes).

A finding is the same finding in both runs when its category, node, GPU, namespace/pod and title with the numbers
taken out are: "Fleet health score 55/100" and "Fleet health score 61/100" are one finding whose cause changed.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulib.core.errors import InvalidParameter
from gpulib.core.files import atomic_write
from gpulib.core.settings import FINDINGS_ENV
from gpulib.run.record import FINDINGS_FILE, RUN_ID, STATUS_FILE, read_doc

FIGURES_FILE = "key_figures.json"
DIFF_JSON = "diff.json"
DIFF_HTML = "diff.html"
SECTION_ID = "gpuops-since-last-time"
_NUM = re.compile(r"[-+]?\d[\d,.]*")


# ------------------------------------------------------------------------------------------ recording
def _clean(v: Any) -> Any:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def save_figures(runbook: Any, ctx: Any) -> Path | None:
    """Write the runbook's key figures beside the run's findings.json (where the run engine says); None when the
    run has no findings path."""
    path = os.environ.get(FINDINGS_ENV)
    if not path:
        return None
    figs = runbook.figures(ctx) or {}
    src = ctx["src"] if "src" in ctx else None
    end = src.end if src is not None else None
    doc = {
        "schema": 1,
        "runbook": runbook.name,
        "window_end": end.isoformat() if end is not None else None,
        "figures": {k: {**dict(v), "value": _clean(v.get("value"))} for k, v in figs.items()},
    }
    out = Path(path).parent / FIGURES_FILE
    atomic_write(out, json.dumps(doc, indent=2, default=str))
    return out


# ------------------------------------------------------------------------------------------ reading
@dataclass
class RunView:
    id: str
    folder: Path
    runbook: str
    params: dict[str, Any]
    findings: list[dict[str, Any]]
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    window_end: str | None = None


def load_run(folder: str | Path) -> RunView:
    folder = Path(folder)
    doc = read_doc(folder / FINDINGS_FILE)
    if doc is None:
        raise InvalidParameter(f"{folder} has no readable {FINDINGS_FILE}", hint="give a finished run's folder")
    status = read_doc(folder / STATUS_FILE) or {}
    figs = read_doc(folder / FIGURES_FILE) or {}
    return RunView(
        id=folder.name,
        folder=folder,
        runbook=str(doc.get("runbook") or status.get("runbook") or ""),
        params=dict(doc.get("parameters") or status.get("params") or {}),
        findings=list(doc.get("findings") or []),
        figures=dict(figs.get("figures") or {}),
        window_end=figs.get("window_end"),
    )


def finding_key(f: dict[str, Any]) -> tuple:
    data = f.get("data") or {}
    title = _NUM.sub("#", str(f.get("title") or ""))
    return (f.get("category") or "", f.get("node") or "", str(f.get("gpu") or ""), data.get("namespace") or "",
            data.get("pod") or "", title)  # fmt: skip


# ------------------------------------------------------------------------------------------ comparing
def _brief(f: dict[str, Any]) -> dict[str, Any]:
    return {"severity": f.get("severity"), "title": f.get("title"), "node": f.get("node"), "gpu": f.get("gpu")}


def diff_runs(a: RunView, b: RunView) -> dict[str, Any]:
    """``b`` against ``a`` (the earlier): findings new, gone, changed; every key figure with its change."""
    if a.runbook != b.runbook:
        raise InvalidParameter(f"{a.id} is a run of {a.runbook}, {b.id} of {b.runbook}: compare runs of one runbook")
    fa = {finding_key(f): f for f in a.findings}
    fb = {finding_key(f): f for f in b.findings}
    changed = []
    for k in fa.keys() & fb.keys():
        x, y = fa[k], fb[k]
        what = [w for w in ("severity", "title") if x.get(w) != y.get(w)]
        if what:
            changed.append({"what": ["cause" if w == "title" else w for w in what], "before": _brief(x),
                            "after": _brief(y)})  # fmt: skip
    figures = []
    for key in list(dict.fromkeys([*a.figures, *b.figures])):
        x, y = a.figures.get(key, {}), b.figures.get(key, {})
        va, vb = _clean(x.get("value")), _clean(y.get("value"))
        change = vb - va if va is not None and vb is not None else None
        better = y.get("better") or x.get("better") or "lower"
        verdict = (
            "missing" if change is None
            else "same" if abs(change) < 1e-9
            else ("better" if (change < 0) == (better == "lower") else "worse")
        )  # fmt: skip
        label, unit = y.get("label") or x.get("label") or key, y.get("unit") or x.get("unit") or ""
        figures.append(
            {"key": key, "label": label, "unit": unit, "before": va, "after": vb, "change": change, "verdict": verdict}
        )
    order = {"critical": 0, "warning": 1, "info": 2, "ok": 3}

    def by_sev(f: dict) -> tuple:
        return (order.get(str(f.get("severity")), 9), str(f.get("title")))

    return {
        "runbook": b.runbook,
        "before": {"id": a.id, "window_end": a.window_end, "params": a.params},
        "after": {"id": b.id, "window_end": b.window_end, "params": b.params},
        "new": [_brief(fb[k]) for k in sorted(fb.keys() - fa.keys(), key=lambda k: by_sev(fb[k]))],
        "gone": [_brief(fa[k]) for k in sorted(fa.keys() - fb.keys(), key=lambda k: by_sev(fa[k]))],
        "changed": sorted(changed, key=lambda c: by_sev(c["after"])),
        "figures": figures,
    }


def _num(v: float | None) -> str:
    return "no data" if v is None else f"{v:,.1f}" if abs(v) < 1e6 else f"{v:,.0f}"


def _signed(v: float | None) -> str:
    return "" if v is None else f"{v:+,.1f}"


def _where(f: dict) -> str:
    return f" ({f['node']}{' GPU ' + str(f['gpu']) if f.get('gpu') not in (None, '') else ''})" if f.get("node") else ""


def lines(d: dict[str, Any]) -> list[str]:
    """The diff as text lines (the CLI, summary.md)."""
    b, a = d["before"], d["after"]
    out = [
        f"{d['runbook']}: {a['id']} against {b['id']} (window end {b['window_end'] or '?'} -> {a['window_end'] or '?'})"
    ]
    out.append("Key figures:" if d["figures"] else "Key figures: none recorded")
    for f in d["figures"]:
        ch = "" if f["change"] is None else f" ({f['change']:+,.1f}, {f['verdict']})"
        out.append(f"  {f['label']}: {_num(f['before'])} -> {_num(f['after'])} {f['unit']}{ch}")
    for name, items in (("New", d["new"]), ("Gone", d["gone"])):
        out.append(f"{name} findings: {len(items)}")
        out += [f"  [{f['severity']}] {f['title']}{_where(f)}" for f in items]
    out.append(f"Changed findings: {len(d['changed'])}")
    for c in d["changed"]:
        x, y = c["before"], c["after"]
        sev = f"{x['severity']} -> {y['severity']}" if "severity" in c["what"] else y["severity"]
        cause = f"{x['title']!r} -> {y['title']!r}" if "cause" in c["what"] else repr(y["title"])
        out.append(f"  [{sev}] {cause}{_where(y)}")
    return out


def section_html(d: dict[str, Any], href: str = "") -> str:
    """The "Since last time" section a report opens with."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(f['label'])}</td><td>{e(_num(f['before']))}</td><td>{e(_num(f['after']))}</td>"
        f"<td>{e(f['unit'])}</td><td class='{e(f['verdict'])}'>"
        f"{e(_signed(f['change']))} {e(f['verdict'])}</td></tr>"
        for f in d["figures"]
    )
    items = "".join(f"<li>{e(t)}</li>" for t in lines(d)[2 + len(d["figures"]) :])
    link = f" <a href='{e(href)}'>the full diff</a>" if href else ""
    return (
        f"<section id='{SECTION_ID}' style='border:1px solid #888;padding:0.5em 1em;margin:1em 0'>"
        f"<h2>Since last time</h2><p>Against run {e(d['before']['id'])} (window end "
        f"{e(str(d['before']['window_end'] or '?'))}); this run's window ends "
        f"{e(str(d['after']['window_end'] or '?'))}."
        f"{link}</p><table><tr><th>key figure</th><th>then</th><th>now</th><th>unit</th><th>change</th></tr>{rows}"
        f"</table><ul>{items}</ul></section>"
    )


# ------------------------------------------------------------------------------------------ runs of a root
def runs_of(root: Path, runbook: str, params: dict[str, Any] | None = None, exact: bool = True) -> list[Path]:
    """Finished run folders of ``runbook`` under ``root`` with findings, oldest first; ``params``: equal to the
    run's parameters (``exact``) or a subset of them."""
    out = []
    for d in sorted(Path(root).iterdir()) if Path(root).is_dir() else []:
        m = RUN_ID.match(d.name)
        if not m or m["runbook"] != runbook or not (d / FINDINGS_FILE).is_file():
            continue
        if params is not None:
            have = (read_doc(d / FINDINGS_FILE) or {}).get("parameters") or {}
            want = {k: str(v) for k, v in params.items()}
            got = {k: str(v) for k, v in have.items()}
            if (got != want) if exact else any(got.get(k) != v for k, v in want.items()):
                continue
        out.append(d)
    return out


def since_last_time(root: Path, run_dir: Path, report_html: Path | None) -> dict[str, Any] | None:
    """When an earlier run of this run's runbook with the same parameters is under ``root``: write ``diff.json``
    and ``diff.html`` in ``run_dir`` and open the report's HTML with the "Since last time" section."""
    me = load_run(run_dir)
    earlier = [d for d in runs_of(root, me.runbook, me.params) if d.name < run_dir.name]
    if not earlier:
        return None
    d = diff_runs(load_run(earlier[-1]), me)
    atomic_write(run_dir / DIFF_JSON, json.dumps(d, indent=2, default=str))
    page = section_html(d)
    atomic_write(run_dir / DIFF_HTML, f"<!doctype html><html><head><meta charset='utf-8'><title>diff</title></head>"
                 f"<body>{page}</body></html>")  # fmt: skip
    if report_html is not None and report_html.is_file():
        text = report_html.read_text()
        m = re.search(r"<body[^>]*>", text)
        if m and SECTION_ID not in text:
            cut = m.end()
            atomic_write(report_html, text[:cut] + section_html(d, DIFF_HTML) + text[cut:])
    return d


# ------------------------------------------------------------------------------------------ gpuops diff
def _folder(ref: str, root: Path) -> Path:
    p = Path(ref)
    if p.is_dir():
        return p
    if RUN_ID.match(ref) and (root / ref).is_dir():
        return root / ref
    raise InvalidParameter(f"no run folder {ref!r} (nor {root / ref})", hint="give a run folder or its id under --out")


def pairs(runs: list[str], last: int | None, runbook: str | None, params: list[str], root: Path) -> list:
    """The (earlier, later) run folders ``gpuops diff`` compares: RUN_A RUN_B, or the last N of a runbook."""
    if last is None:
        if len(runs) != 2:
            raise InvalidParameter("give two runs (RUN_A RUN_B), or --last N --runbook R")
        return [(_folder(runs[0], root), _folder(runs[1], root))]
    if runs or not runbook or last < 2:
        raise InvalidParameter("--last N (N >= 2) takes --runbook and no run arguments")
    want = {}
    for p in params:
        k, sep, v = p.partition("=")
        if not sep:
            raise InvalidParameter(f"-p {p!r}: write KEY=VALUE")
        want[k] = v
    found = runs_of(root, runbook, want, exact=False)[-last:]
    if len(found) < 2:
        raise InvalidParameter(f"{len(found)} run(s) of {runbook} with those parameters under {root}: need two")
    return list(zip(found, found[1:]))
