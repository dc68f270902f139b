"""What a run folder says about its run: runbook, status, parameters, verdict, times, report. One reading for the
run index (:func:`gpulib.core.rundir.write_index`, ``gpuops serve``'s ``/runs``) and ``gpuops mcp``'s past runs.

A run folder (:func:`gpulib.core.rundir.new_run_dir`) holds what the run engine wrote: ``status.json`` (runbook,
status, start and end time, written when the run starts and again when it ends), ``findings.json`` (the
notebook's findings and parameters), the HTML report and ``summary.md``; a run of ``gpuops serve`` also has
its ``run.json`` (:mod:`gpulib.serve.store`), which then says the status and times. Every string read is
redacted (:mod:`gpulib.core.redact`).
"""

from __future__ import annotations

import json
import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpulib.core.files import atomic_write
from gpulib.core.findings import load_findings, sort_findings
from gpulib.core.redact import redact_obj
from gpulib.core.summary import verdict_of

#: written by the run engine when a run starts and when it ends
STATUS_FILE = "status.json"
#: written by gpuops serve's run store (gpulib/serve/store.py)
SERVE_FILE = "run.json"
#: a run folder's name: <UTC start>-<runbook>-<6 hex> (gpulib/core/rundir.py new_run_dir)
RUN_ID = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)-(?P<runbook>[a-z0-9_]+)-[0-9a-f]{6}$")
#: statuses of a run that has not ended
ACTIVE = ("queued", "running")


def write_status(folder: Path, **fields: Any) -> None:
    """Merge ``fields`` into ``folder/status.json`` (written atomically); a run that starts also records its process
    and host, so a reader can tell a run still going from one whose process died."""

    path = Path(folder) / STATUS_FILE
    doc = _json(path) or {}
    doc.update(fields)
    if fields.get("status") in ACTIVE:
        doc.update(pid=os.getpid(), host=socket.gethostname())
    atomic_write(path, json.dumps(doc, indent=2, default=str))


def _json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _alive(doc: dict[str, Any]) -> bool:
    """Whether the process that started this run still runs (unknowable for another host: assumed so)."""
    if doc.get("host") != socket.gethostname() or not isinstance(doc.get("pid"), int):
        return True
    try:
        os.kill(doc["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def created_at(run_id: str) -> float | None:
    """The UTC start stamp of a run folder's name as a POSIX time (None for another name)."""
    m = RUN_ID.match(run_id)
    if not m:
        return None
    return datetime.strptime(m["stamp"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp()


def read_run(folder: Path, *, full: bool = False) -> dict[str, Any]:
    """The run in ``folder`` as one record: ``id``, ``runbook``, ``status`` (queued | running | done | incomplete |
    bad parameter | failed | interrupted | unknown), ``params``, ``severity`` (the worst finding; empty for a run
    without findings), ``cause`` (the top finding's title, else the error), ``node``/``gpu`` (of the top finding,
    else the parameters), ``sop_step``, ``commands``, ``errors`` (missing data), ``usage_errors``, ``error``,
    ``created``/``started``/``finished`` (POSIX times or None), ``html`` (the report's file name or None) and
    ``findings`` (their number). ``full``: ``findings`` is the list of findings as dicts instead, and ``summary``
    the text of summary.md."""
    folder = Path(folder)
    parts: tuple[list, dict[str, Any]] | None = None
    if (folder / "findings.json").is_file():
        try:
            parts = load_findings(folder / "findings.json")
        except (ValueError, OSError, KeyError, TypeError) as exc:
            return record(folder, None, full=full, unreadable=f"findings.json unreadable: {exc}")
    return record(folder, parts, full=full)


def record(
    folder: Path, parts: tuple[list, dict[str, Any]] | None, *, full: bool = False, unreadable: str = ""
) -> dict[str, Any]:
    """:func:`read_run` with the run's findings and findings.json document given (``parts``; None: it wrote
    none), for the run engine, which has read them already."""
    folder = Path(folder)
    engine = _json(folder / STATUS_FILE) or {}
    serve = _json(folder / SERVE_FILE) or {}
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
    if not rec["node"]:
        rec["node"] = str(rec["params"].get("node") or "")
    if not rec["gpu"] and rec["node"] == str(rec["params"].get("node") or ""):
        rec["gpu"] = str(rec["params"].get("gpu") or "")
    rec["status"] = _status(serve, engine, doc, rec)
    if rec["status"] == "failed" or not rec["cause"]:
        rec["cause"] = rec["error"] or rec["cause"]
    htmls = sorted(folder.glob("*.html"))
    rec["html"] = htmls[0].name if htmls else None
    if full:
        summary = folder / "summary.md"
        rec["summary"] = summary.read_text(errors="replace") if summary.is_file() else ""
    return redact_obj(rec)


def _status(serve: dict, engine: dict, doc: dict | None, rec: dict[str, Any]) -> str:
    if serve.get("status"):
        return str(serve["status"])
    status = engine.get("status")
    if status in ACTIVE and not _alive(engine):
        rec["error"] = rec["error"] or "interrupted: the process running it ended before the run finished"
        return "interrupted"
    if status:
        return str(status)
    if doc is not None:  # a folder written before status.json existed
        return "bad parameter" if rec["usage_errors"] else ("incomplete" if rec["errors"] else "done")
    return "unknown"
