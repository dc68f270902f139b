"""The run index page: one row per run, newest first, with its verdict (severity, cause, node/GPU), runbook,
parameters, local and UTC time, duration and status; filters by runbook, node and severity. The same page for a
run root (``index.html`` of ``gpuops run|demo|report``, :func:`gpulib.run.record.write_index`) and for ``gpuops
serve``'s ``/runs``.

It is a plain HTML table, readable without JavaScript (every run listed, times in UTC and in the writer's zone); a
small inline script (no library) shows the filters, narrows the rows, keeps the choice in the URL's fragment
(``#runbook=xid_ecc_triage&severity=critical``, so a filtered view can be linked) and rewrites the local time in
the reader's zone. Every value is escaped (:func:`html.escape`); the rows come from
:func:`gpulib.run.record.read_run`, which has redacted them.
"""

from __future__ import annotations

import html
import time
from typing import Any, Callable, Iterable

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
    status = str(rec.get("status") or "unknown")
    if status in ("queued", "running"):
        return f"{status}: the report is still rendering"
    return status


def cause_text(rec: dict[str, Any]) -> str:
    if rec.get("status") in ("queued", "running"):
        return ""
    if rec.get("cause"):
        return str(rec["cause"])
    return "no findings written" if rec.get("status") == "done" else ""


def _params(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in (p or {}).items()) or "defaults"


def _where(rec: dict[str, Any]) -> str:
    node, gpu = rec.get("node") or "", rec.get("gpu") or ""
    return f"{node} GPU {gpu}" if node and gpu != "" else node


def _row(rec: dict[str, Any], href: str | None) -> str:
    sev = severity_of(rec)
    status = str(rec.get("status") or "unknown")
    created = rec.get("created")
    link = f"<a href='{_e(href)}'>{_e(rec['id'])}</a>" if href else f"{_e(rec['id'])} <small>(no report yet)</small>"
    active = " class='running'" if status in ("queued", "running") else ""
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
    """The index page of ``records`` (:func:`gpulib.run.record.read_run`); ``href(record)`` is the link of a
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
