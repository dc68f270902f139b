"""The run index: a run folder read back as one record (:func:`read_run`), and the index page of those records,
one row per run, newest first, with its verdict (severity, cause, node/GPU), runbook,
parameters, local and UTC time, duration and status; filters by runbook, node and severity. The same page for a
run root (``index.html`` of ``gpuops run|demo|report``, :func:`write_index`) and for ``gpuops
serve``'s ``/runs``.

It is a plain HTML table, readable without JavaScript (every run listed, times in UTC and in the writer's zone); a
small inline script (no library) shows the filters, narrows the rows, keeps the choice in the URL's fragment
(``#node=gpu-node-7&severity=critical``, so a filtered view can be linked) and rewrites the local time in
the reader's zone. Every value is escaped (:func:`html.escape`); the rows come from
:func:`read_run`, which has redacted them (:mod:`gpulib.core.redact`). What each file of a run folder is, and
which status a folder shows, :mod:`gpulib.run.record` says.
"""

from __future__ import annotations

import fcntl
import html
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from gpulib.core.files import atomic_write
from gpulib.core.findings import load_findings, sort_findings
from gpulib.core.redact import redact_obj
from gpulib.run.record import (
    ACTIVE,
    FINDINGS_FILE,
    INDEX_FILE,
    INDEX_LOCK,
    RUN_ID,
    SERVE_FILE,
    STATUS_FILE,
    SUMMARY_FILE,
    VERDICT_FILE,
    Status,
    created_at,
    folder_status,
    read_doc,
    shown_severity,
    verdict_of,
)

#: the filters: (row field, label)
FILTERS = (("runbook", "runbook"), ("node", "node"), ("severity", "severity"))
#: severities in the order the filter lists them
SEVERITY_ORDER = ("critical", "warning", "info", "ok", "none")

_STYLE = (
    "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
    "padding:4px 8px;vertical-align:top}th{background:#f4f4f4;text-align:left}.critical{color:#b00020;"
    "font-weight:bold}.warning{color:#b36b00;font-weight:bold}.ok,.info{color:#1b7f3b}.running{color:#555;"
    "font-style:italic}form{margin:0 0 1em}label{margin-right:1em}small{color:#555}"
)
_SCRIPT = """
(function () {
  var form = document.getElementById('filters'), rows = document.querySelectorAll('#runs tbody tr');
  var keys = ['runbook', 'node', 'severity'];
  function want() {
    var w = {};
    keys.forEach(function (k) { w[k] = document.getElementById('f-' + k).value; });
    return w;
  }
  function apply() {
    var w = want(), shown = 0;
    rows.forEach(function (tr) {
      var ok = keys.every(function (k) { return !w[k] || tr.getAttribute('data-' + k) === w[k]; });
      tr.hidden = !ok;
      if (ok) { shown += 1; }
    });
    document.getElementById('shown').textContent = shown + ' of ' + rows.length + ' runs shown';
    var h = keys.filter(function (k) { return w[k]; })
      .map(function (k) { return k + '=' + encodeURIComponent(w[k]); }).join('&');
    try {
      if (h) { history.replaceState(null, '', '#' + h); }
      else if (location.hash) { history.replaceState(null, '', location.pathname + location.search); }
    } catch (e) { /* a page opened where history is read-only keeps its address */ }
  }
  location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
    var p = kv.split('='), el = document.getElementById('f-' + p[0]);
    if (el && p.length === 2) { el.value = decodeURIComponent(p[1]); }
  });
  document.querySelectorAll('td.local[data-ts]').forEach(function (td) {
    td.textContent = new Date(1000 * Number(td.getAttribute('data-ts'))).toLocaleString();
  });
  keys.forEach(function (k) { document.getElementById('f-' + k).addEventListener('change', apply); });
  form.hidden = false;
  apply();
})();
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _utc(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else ""


def _local(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ts)) if ts else ""


def duration(rec: dict[str, Any]) -> str:
    """``42 s`` / ``3 min 05 s`` from a record's start and end; empty for a run that has not ended."""
    start, end = rec.get("started"), rec.get("finished")
    if not start or not end or end < start:
        return ""
    s = round(end - start)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def severity_of(rec: dict[str, Any]) -> str:
    """The value the severity filter matches: the worst finding, ``none`` for a run without findings."""
    return str(rec.get("severity") or "none")


def status_text(rec: dict[str, Any]) -> str:
    """A record's status as the index says it; a run that has not ended says that its report is not there yet."""
    status = str(rec.get("status") or Status.UNKNOWN)
    if status in ACTIVE:
        return f"{status}: the report is still rendering"
    return status


def cause_text(rec: dict[str, Any]) -> str:
    if rec.get("status") in ACTIVE:
        return ""
    if rec.get("cause"):
        return str(rec["cause"])
    return "no findings written" if rec.get("status") == Status.DONE else ""


def _params(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in (p or {}).items()) or "defaults"


def _where(rec: dict[str, Any]) -> str:
    node, gpu = rec.get("node") or "", rec.get("gpu") or ""
    return f"{node} GPU {gpu}" if node and gpu != "" else node


def _row(rec: dict[str, Any], href: str | None) -> str:
    sev = severity_of(rec)
    status = str(rec.get("status") or Status.UNKNOWN)
    created = rec.get("created")
    link = f"<a href='{_e(href)}'>{_e(rec['id'])}</a>" if href else f"{_e(rec['id'])} <small>(no report yet)</small>"
    if rec.get("diff") and href and href.endswith(".html"):  # its diff with the run before (gpulib.run.diff)
        link += f" <a href='{_e(href.rsplit('/', 1)[0] + '/' + rec['diff'])}'>diff</a>"
    active = " class='running'" if status in ACTIVE else ""
    return (
        f"<tr data-runbook='{_e(rec.get('runbook'))}' data-node='{_e(rec.get('node'))}' data-severity='{_e(sev)}' "
        f"data-status='{_e(status)}'{active}>"
        f"<td class='local' data-ts='{_e(created or '')}'>{_e(_local(created))}</td>"
        f"<td><time datetime='{_e(_utc(created).replace(' UTC', 'Z').replace(' ', 'T'))}'>{_e(_utc(created))}</time>"
        f"</td><td>{_e(rec.get('runbook'))}</td><td class='{_e(sev)}'>{_e(sev if sev != 'none' else '')}</td>"
        f"<td class='cause'>{_e(cause_text(rec))}</td><td>{_e(_where(rec))}</td>"
        f"<td>{_e(_params(rec.get('params')))}</td>"
        f"<td>{_e(duration(rec))}</td><td>{_e(status_text(rec))}</td><td>{link}</td></tr>"
    )


def _options(name: str, values: Iterable[str]) -> str:
    opts = "".join(f"<option value='{_e(v)}'>{_e(v)}</option>" for v in values)
    return f"<label>{_e(name)} <select id='f-{_e(name)}'><option value=''>all</option>{opts}</select></label>"


def render(records: list[dict[str, Any]], href: Callable[[dict[str, Any]], str | None], *, title: str) -> str:
    """The index page of ``records`` (:func:`read_run`); ``href(record)`` is the link of a
    run's report (None: no report yet). Rows newest first (start time, then run id)."""
    recs = sorted(records, key=lambda r: (r.get("created") or 0, r.get("id") or ""), reverse=True)
    sevs = {severity_of(r) for r in recs}
    values = {
        "runbook": sorted({str(r.get("runbook") or "") for r in recs} - {""}),
        "node": sorted({str(r.get("node") or "") for r in recs} - {""}),
        "severity": [s for s in SEVERITY_ORDER if s in sevs] + sorted(sevs - set(SEVERITY_ORDER)),
    }
    filters = "".join(_options(name, values[key]) for key, name in FILTERS)
    rows = "".join(_row(r, href(r)) for r in recs)
    head = "".join(
        f"<th>{h}</th>"
        for h in ("local time", "UTC time", "runbook", "verdict", "cause", "node / GPU", "parameters", "duration")
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{_e(title)}</h1><form id='filters' hidden>{filters}<span id='shown'></span></form>"
        "<noscript><p>The filters need JavaScript; the table lists every run.</p></noscript>"
        f"<p>{len(recs)} runs, newest first. Local time is the reader's with JavaScript, else the writer's "
        f"({_e(time.strftime('%Z'))}).</p>"
        f"<table id='runs'><thead><tr>{head}<th>status</th><th>run</th></tr></thead><tbody>{rows}</tbody></table>"
        f"<script>{_SCRIPT}</script></body></html>"
    )


# ------------------------------------------------------------------------------------------ reading a folder
def read_run(folder: Path, *, full: bool = False) -> dict[str, Any]:
    """The run in ``folder`` as one record: ``id``, ``runbook``, ``status`` (:class:`Status`), ``params``,
    ``severity`` (the worst finding; empty for a run without findings or without a verdict), ``cause`` (the top
    finding's title, else the error), ``node``/``gpu`` (of the top finding, else the parameters), ``sop_step``,
    ``commands``, ``errors`` (missing data), ``usage_errors``, ``error``, ``created``/``started``/``finished``
    (POSIX times or None), ``html`` (the report's file name or None) and ``findings`` (their number). ``full``:
    ``findings`` is the list of findings as dicts instead, and ``summary`` the text of summary.md.

    A serve run whose notebook has written no findings (still rendering, or its render was cut short) shows the
    verdict its record holds: the fast verdict."""
    folder = Path(folder)
    parts: tuple[list, dict[str, Any]] | None = None
    if (folder / FINDINGS_FILE).is_file():
        try:
            parts = load_findings(folder / FINDINGS_FILE)
        except (ValueError, OSError, KeyError, TypeError) as exc:
            return record(folder, None, full=full, unreadable=f"findings.json unreadable: {exc}")
    return record(folder, parts, full=full)


def record(
    folder: Path, parts: tuple[list, dict[str, Any]] | None, *, full: bool = False, unreadable: str = ""
) -> dict[str, Any]:
    """:func:`read_run` with the run's findings and findings.json document given (``parts``; None: it wrote
    none), for the run engine, which has read them already."""
    folder = Path(folder)
    engine = read_doc(folder / STATUS_FILE) or {}
    serve = read_doc(folder / SERVE_FILE) or {}
    m = RUN_ID.match(folder.name)
    rec: dict[str, Any] = {
        "id": folder.name,
        "runbook": serve.get("runbook") or engine.get("runbook") or (m["runbook"] if m else ""),
        "params": serve.get("params") or engine.get("params") or {},
        "created": serve.get("created") or created_at(folder.name),
        "started": serve.get("started") or engine.get("started"),
        "finished": serve.get("finished") or engine.get("finished"),
        "error": serve.get("error") or engine.get("error"),
        "severity": "",
        "cause": "",
        "node": "",
        "gpu": "",
        "sop_step": "",
        "commands": [],
        "errors": [],
        "usage_errors": [],
        "findings": [] if full else 0,
        "diff": "diff.html" if (folder / "diff.html").is_file() else "",
    }
    findings, doc = parts if parts is not None else ([], None)
    if unreadable:
        rec["errors"] = [unreadable]
    if doc is not None:
        v = verdict_of(findings, doc)
        rec.update(
            severity=v["severity"],
            cause=v["cause"],
            sop_step=v["sop_step"],
            commands=v["commands"],
            errors=list(doc.get("errors", [])),
            usage_errors=list(doc.get("usage_errors", [])),
            params=doc.get("parameters") or rec["params"],
            runbook=doc.get("runbook") or rec["runbook"],
            findings=[f.to_dict() for f in sort_findings(findings)] if full else len(findings),
            node=v["node"],
            gpu=v["gpu"],
        )
    elif isinstance(serve.get("verdict"), dict) and serve["verdict"] and not unreadable:
        _known_verdict(rec, serve, folder, full)
    if not rec["node"]:
        rec["node"] = str(rec["params"].get("node") or "")
    if not rec["gpu"] and rec["node"] == str(rec["params"].get("node") or ""):
        rec["gpu"] = str(rec["params"].get("gpu") or "")
    rec["status"] = folder_status(serve, engine, doc, rec)
    rec["severity"] = shown_severity(rec["status"], rec["severity"]) or ""
    if rec["status"] == Status.FAILED or not rec["cause"]:
        rec["cause"] = rec["error"] or rec["cause"]
    htmls = sorted(folder.glob("*.html"))
    rec["html"] = htmls[0].name if htmls else None
    if full:
        summary = folder / SUMMARY_FILE
        rec["summary"] = summary.read_text(errors="replace") if summary.is_file() else ""
    return redact_obj(rec)


def _known_verdict(rec: dict[str, Any], serve: dict[str, Any], folder: Path, full: bool) -> None:
    """The verdict a serve record holds (the fast one) for a run whose notebook wrote no findings."""
    v = serve["verdict"]
    fast: list = []
    if full and (folder / VERDICT_FILE).is_file():
        try:
            fast = [f.to_dict() for f in sort_findings(load_findings(folder / VERDICT_FILE)[0])]
        except (ValueError, OSError, KeyError, TypeError):
            fast = []
    rec.update(
        severity=serve.get("severity") or v.get("severity") or "",
        cause=serve.get("cause") or v.get("cause") or "",
        sop_step=v.get("sop_step") or "",
        commands=list(v.get("commands") or []),
        errors=list(v.get("errors") or []),
        node=str(v.get("node") or ""),
        gpu=str(v.get("gpu") or ""),
        findings=fast if full else int(v.get("findings") or 0),
    )


def write_index(out_root: Path, known: dict[str, dict] | None = None) -> Path:
    """``index.html`` of every run folder under ``out_root`` (:func:`render`: newest first, verdict,
    cause, node/GPU, parameters, times, duration, status, filters; a run still going is listed as such).
    ``known``: records (:func:`record`) of folders the caller has already read, by folder name; the others are read
    from their files. Written atomically (tmp + rename) under an exclusive lock on ``out_root/.index.lock``
    (``fcntl.flock``), so of runs finishing together the last writer lists them all (each run writes its HTML before
    taking the lock)."""
    out_root = Path(out_root)
    with open(out_root / INDEX_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            known = known or {}
            recs = [known.get(d.name) or read_run(d) for d in out_root.iterdir() if d.is_dir() and RUN_ID.match(d.name)]
            page = render(
                recs, lambda r: f"{r['id']}/{r['html']}" if r.get("html") else None, title="gpu-runbooks runs"
            )
            idx = out_root / INDEX_FILE
            atomic_write(idx, page)
            return idx
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
