"""HTML of the run index, the progress page and the banner above a finished run's report (html-escaped); a finished
run's report is streamed from its file in chunks (:func:`report`), never read whole, so many readers of a large page
cost the server a chunk each."""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any, Iterator

from gpulib.run import index_page
from gpulib.run.record import FINDINGS_FILE, SUMMARY_FILE, Render

_STYLE = (
    "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
    "padding:4px 8px}.critical{color:#b00020}.warning{color:#b36b00}.ok{color:#1b7f3b}</style>"
)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else ""


def _params(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items()) or "defaults"


def index(runs: list[dict[str, Any]]) -> str:
    """``/runs``: the run index of :mod:`gpulib.run.index_page` over the run folders' records
    (:func:`gpulib.run.index_page.read_run`), each linking to ``/runs/{id}`` (the progress page until it ends)."""
    return index_page.render(runs, lambda r: f"/runs/{r['id']}", title="gpuops runs")


def progress(rec: dict[str, Any]) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='2'>"
        f"<title>{html.escape(rec['runbook'])} {html.escape(rec['status'])}</title>{_STYLE}</head><body>"
        f"<h1 id='status' data-status='{html.escape(rec['status'])}'>{html.escape(rec['runbook'])}: "
        f"{html.escape(rec['status'])}</h1><p>{html.escape(_params(rec['params']))} · run "
        f"{html.escape(rec['id'])} · queued {_when(rec['created'])}{_gpus(rec)}</p><p>This page reloads every 2 s "
        f"and shows the report when the run finishes.</p><p>{_attached(rec)}</p></body></html>"
    )


def rendering(rec: dict[str, Any]) -> str:
    """A run whose verdict is known while its notebook, the evidence, still renders: the verdict, and which part is
    not there yet."""
    state = "waiting for a kernel" if rec.get("render") == Render.QUEUED else "rendering"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='2'>"
        f"<title>{html.escape(rec['runbook'])} verdict</title>{_STYLE}</head><body>{banner(rec)}"
        f"<p id='evidence' data-render='{html.escape(rec.get('render') or '')}'>Verdict computed "
        f"{_when(rec.get('verdict_at'))}. Still to come: the notebook with its charts and tables ({state}). This "
        "page reloads every 2 s and shows the report when it is rendered.</p></body></html>"
    )


def _gpus(rec: dict[str, Any]) -> str:
    """The alerted GPUs of a run that looks at every GPU of its node (alerts of one node grouped)."""
    gpus = rec.get("gpus") or []
    if len(gpus) < 2:
        return ""
    return f" · alerted GPUs: {html.escape(', '.join(map(str, gpus)))} (every GPU of the node is checked)"


def _attached(rec: dict[str, Any]) -> str:
    rows = rec.get("attached") or []
    if not rows:
        return ""
    items = "".join(
        f"<li>{_when(a.get('time'))} {html.escape(a.get('alertname', ''))} "
        f"{html.escape(', '.join(f'{k}={v}' for k, v in (a.get('params') or {}).items()))}</li>"
        for a in rows
    )
    return f"<br>later alerts of this incident ({len(rows)}):<ul id='attached'>{items}</ul>"


def banner(rec: dict[str, Any]) -> str:
    sev = rec.get("severity") or rec["status"]
    cmd = f"<br>next: <code>{html.escape(rec['command'])}</code>" if rec.get("command") else ""
    err = f"<br>error: {html.escape(rec['error'])}" if rec.get("error") else ""
    if rec.get("render_error"):
        err += f"<br>evidence: the notebook could not be rendered: {html.escape(rec['render_error'])}"
    if rec.get("verdict_changed"):
        err += "<br>the notebook's verdict replaced the first (fast) one"
    err += _gpus(rec) + _attached(rec)
    return (
        f"<div id='gpuops-verdict' data-status='{html.escape(rec['status'])}' data-severity='{html.escape(sev)}' "
        "style='border:2px solid #444;padding:8px;margin:8px;font-family:sans-serif'>"
        f"<b class='{html.escape(sev)}'>{html.escape(sev.upper())}</b> {html.escape(rec.get('cause') or '')}"
        f"{cmd}{err}<br><small>{html.escape(rec['runbook'])} {html.escape(_params(rec['params']))} · run "
        f"{html.escape(rec['id'])} · <a href='/runs/{html.escape(rec['id'])}/{SUMMARY_FILE}'>{SUMMARY_FILE}</a> · "
        f"<a href='/runs/{html.escape(rec['id'])}/{FINDINGS_FILE}'>{FINDINGS_FILE}</a> · "
        "<a href='/runs'>all runs</a> · dry run: nothing was applied</small></div>"
    )


def unreadable(rec: dict[str, Any]) -> str:
    """A run folder whose run.json cannot be read (:mod:`gpulib.serve.retention`): what is known, and why."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(rec['id'])} unreadable</title>"
        f"{_STYLE}</head><body><h1 id='status' data-status='unreadable'>{html.escape(rec['runbook'])}: unreadable</h1>"
        f"<p>run {html.escape(rec['id'])} · started {_when(rec.get('created'))}</p><p class='critical'>"
        f"{html.escape(rec['error'])}; its files are in the run folder.</p><p><a href='/runs'>all runs</a></p>"
        "</body></html>"
    )


def failed(rec: dict[str, Any]) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(rec['runbook'])} failed</title>"
        f"{_STYLE}</head><body>{banner(rec)}</body></html>"
    )


#: bytes of a report read at once while it is streamed
CHUNK = 64 * 1024
_BODY = b"<body"
#: longest ``<body ...>`` tag looked for; a "<body" without its ">" within this many bytes is not taken for the tag
TAG_MAX = 4096


def report(path: Path, insert: str, chunk: int = CHUNK) -> Iterator[bytes]:
    """The report at ``path`` in chunks of at most ``chunk`` bytes, with ``insert`` (the banner) right after its
    ``<body ...>`` tag (at its end when it has none). Only the bytes that may be the start of that tag are held back
    between chunks, so the memory is a chunk whatever the size of the report."""
    banner, done, held = insert.encode(), False, b""
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            if done:
                yield block
                continue
            buf, held = held + block, b""
            i = buf.find(_BODY)
            j = buf.find(b">", i) if i >= 0 else -1
            if j >= 0:  # the tag is here whole: the banner goes after it
                done = True
                yield buf[: j + 1] + banner + buf[j + 1 :]
            elif i >= 0:  # the tag starts here, its ">" comes later
                yield buf[:i]
                held = buf[i:]
                if len(held) > TAG_MAX:  # an unclosed "<body": no tag after all
                    yield held
                    held = b""
            else:  # keep what could be the start of "<body"
                keep = next((k for k in range(len(_BODY) - 1, 0, -1) if buf.endswith(_BODY[:k])), 0)
                yield buf[: len(buf) - keep]
                held = buf[len(buf) - keep :]
    if not done:
        yield held + banner
