"""A run's home: every file name of a run folder, the one status rule, and :class:`RunRecord`, the life of a run of
``gpuops serve`` as a sequence of named transitions (papermill's ``NotebookExecutionManager`` shape:
https://github.com/nteract/papermill/blob/main/papermill/engines.py, one method per event, each saying what the
event changes in the record).

A run folder (:func:`new_run_dir`) holds what the run wrote: ``status.json`` (runbook, status, start and end time,
each status with its time; the run engine's record, moved by :class:`EngineRecord` through :class:`RunRecord`'s
events), ``findings.json`` (the notebook's findings and parameters), ``verdict.json`` (the fast verdict's findings,
:mod:`gpulib.run.verdict`), the notebook and its HTML report, ``summary.md``; a run of ``gpuops serve`` also has its
``run.json`` (:mod:`gpulib.serve.store`), which then says the status and times, and a render Job's run its
``params.json`` and ``outcome.json``. :mod:`gpulib.run.index_page` reads a folder back as one record (the run index,
``/runs``, ``gpuops mcp``'s past runs) with :func:`folder_status`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import threading
import time
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import Any

from gpulib.core.files import atomic_write
from gpulib.core.findings import Finding, load_findings, save_findings, sort_findings
from gpulib.core.money import actions_by_money
from gpulib.core.redact import redact

# ------------------------------------------------------------------------------------------ file names
#: the notebook's findings and parameters (:mod:`gpulib.run.notebook` writes it where FINDINGS_ENV says)
FINDINGS_FILE = "findings.json"
#: the fast verdict's findings (gpuops serve, before the notebook)
VERDICT_FILE = "verdict.json"
#: the run engine's status of the run, written when it starts and when it ends
STATUS_FILE = "status.json"
#: gpuops serve's record of the run (gpulib/serve/store.py)
SERVE_FILE = "run.json"
#: the run's verdict, cause and next commands in text
SUMMARY_FILE = "summary.md"
#: a render Job's parameters (written by the server) and outcome (written by ``gpuops run --run-dir``)
PARAMS_FILE = "params.json"
OUTCOME_FILE = "outcome.json"
#: the index of every run folder under a run root, and the lock its writers take
INDEX_FILE = "index.html"
INDEX_LOCK = ".index.lock"
#: a run folder's name: <UTC start>-<runbook>-<6 hex> (:func:`new_run_dir`)
RUN_ID = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)-(?P<runbook>[a-z0-9_]+)-[0-9a-f]{6}$")


# ------------------------------------------------------------------------------------------ status
class Status(StrEnum):
    """Where a run is. ``bad parameter``: a value matched nothing (a usage error), so the run has no verdict and no
    severity; ``interrupted``: the process running it ended before it finished."""

    QUEUED = "queued"
    RUNNING = "running"
    RENDERING = "rendering"  # the fast verdict is out; the notebook, its evidence, is still being rendered
    DONE = "done"
    INCOMPLETE = "incomplete"
    BAD_PARAMETER = "bad parameter"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    UNKNOWN = "unknown"


class Render(StrEnum):
    """Where the notebook of a serve run is (``run.json``'s ``render``)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


#: statuses of a run that has not ended
ACTIVE = (Status.QUEUED, Status.RUNNING)
#: statuses of a run that has ended (in serve; ``interrupted`` is the engine's word for a run whose process died)
FINISHED = (Status.DONE, Status.INCOMPLETE, Status.BAD_PARAMETER, Status.FAILED)
#: statuses whose run has no verdict: no severity is shown, counted or filtered on
NO_VERDICT = (Status.BAD_PARAMETER, Status.FAILED, Status.INTERRUPTED)
#: the transitions of a serve run; any run may fail (a server error after it finished included)
TRANSITIONS: dict[Status, tuple[Status, ...]] = {
    Status.QUEUED: (Status.RUNNING, *FINISHED),  # without a fast verdict the notebook finishes a queued run
    Status.RUNNING: (Status.RENDERING, *FINISHED),
    Status.RENDERING: FINISHED,
    **{s: (Status.FAILED,) for s in FINISHED},
}


def status_of(failed: str | None, usage_errors: list, errors: list) -> Status:
    """The one status rule: failed (the run did not finish), bad parameter (a value matched nothing), incomplete
    (a step could not get its data), else done."""
    if failed:
        return Status.FAILED
    if usage_errors:
        return Status.BAD_PARAMETER
    return Status.INCOMPLETE if errors else Status.DONE


def error_of(failed: str | None, usage_errors: list, errors: list) -> str | None:
    """The error a run's record shows beside :func:`status_of` (cut to 1000 characters)."""
    if failed:
        return failed
    if usage_errors:
        return "bad parameter: " + "; ".join(map(str, usage_errors))[:1000]
    return "; ".join(map(str, errors))[:1000] if errors else None


def outcome(
    failed: str | None, usage_errors: list, errors: list, verdict: dict[str, Any], warm: bool | None = None
) -> dict[str, Any]:
    """A finished run (the notebook's or the fast verdict's) as gpuops serve records it: ``status``, ``error``,
    ``verdict`` (:func:`verdict_of`) and, for a notebook, whether its kernel was warm."""
    out = {"status": status_of(failed, usage_errors, errors), "error": error_of(failed, usage_errors, errors)}
    out["verdict"] = verdict
    if warm is not None:
        out["warm"] = warm
    return out


def shown_severity(status: str, severity: str | None) -> str | None:
    """The severity a run's record shows: none for a run without a verdict (:data:`NO_VERDICT`)."""
    return None if status in NO_VERDICT else severity


# ------------------------------------------------------------------------------------------ verdict
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
        "actions": actions_by_money(fs),
    }


def read_verdict(folder: Path) -> dict[str, Any]:
    """:func:`verdict_of` the folder's findings.json (empty if none): for a run that was not made by the run engine,
    which hands its verdict over instead."""
    fj = Path(folder) / FINDINGS_FILE
    if not fj.is_file():
        return {}
    return verdict_of(*load_findings(fj))


def save_verdict(folder: Path, findings: list[Finding], **doc: Any) -> Path:
    """The fast verdict's findings, as ``verdict.json`` in the run folder (``doc``: :func:`save_findings`'s
    fields)."""
    return save_findings(findings, Path(folder) / VERDICT_FILE, **doc)


def findings_file(folder: Path) -> Path | None:
    """The findings a reader of the run gets: the notebook's, else the fast verdict's; None when there are none."""
    for name in (FINDINGS_FILE, VERDICT_FILE):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    return None


# ------------------------------------------------------------------------------------------ render Jobs
def write_params(folder: Path, params: dict[str, Any]) -> Path:
    """The run's parameters (already checked by the server) where its render Job reads them."""
    p = Path(folder) / PARAMS_FILE
    p.write_text(json.dumps(params, indent=2, default=str))
    return p


def write_outcome(folder: Path, out: dict[str, Any]) -> Path:
    """The outcome (:func:`outcome`) of a render Job's run, for the server that started it."""
    p = Path(folder) / OUTCOME_FILE
    p.write_text(json.dumps(out, indent=2, default=str))
    return p


def read_outcome(folder: Path) -> dict[str, Any] | None:
    """The outcome a render wrote to its run folder, or None when there is none (it never got that far)."""
    try:
        return json.loads((Path(folder) / OUTCOME_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return None


# ------------------------------------------------------------------------------------------ the engine's status
def write_status(folder: Path, **fields: Any) -> None:
    """Merge ``fields`` into ``folder/status.json`` (written atomically); a run that starts also records its process
    and host, so a reader can tell a run still going from one whose process died."""

    path = Path(folder) / STATUS_FILE
    doc = read_doc(path) or {}
    doc.update({k: (str(v) if isinstance(v, StrEnum) else v) for k, v in fields.items()})
    if fields.get("status") in ACTIVE:
        doc.update(pid=os.getpid(), host=socket.gethostname())
    atomic_write(path, json.dumps(doc, indent=2, default=str))


def read_doc(path: Path) -> dict[str, Any] | None:
    """A JSON object read from ``path``; None when it is missing, unreadable or not an object."""
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


def folder_status(serve: dict, engine: dict, doc: dict | None, rec: dict[str, Any]) -> str:
    """The status a run folder shows (:func:`gpulib.run.index_page.read_run`): serve's record (``run.json``), else
    the engine's (``status.json``; a run whose process died is interrupted and ``rec["error"]`` says so), else
    :func:`status_of` its findings."""
    if serve.get("status"):
        return str(serve["status"])
    status = engine.get("status")
    if status in ACTIVE and not _alive(engine):
        rec["error"] = rec["error"] or "interrupted: the process running it ended before the run finished"
        return Status.INTERRUPTED
    if status:
        return str(status)
    if doc is not None:  # a folder written before status.json existed
        return status_of(None, rec["usage_errors"], rec["errors"])
    return Status.UNKNOWN


# ------------------------------------------------------------------------------------------ run folders
def new_run_dir(out_root: Path, name: str) -> Path:
    """``<out_root>/<UTC timestamp>-<name>-<random>``, created exclusively (``mkdir`` without ``exist_ok`` fails
    if it exists), so two runs started in the same second never share a folder."""
    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for _ in range(20):
        d = out_root / f"{stamp}-{name}-{secrets.token_hex(3)}"
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise OSError(f"could not create a unique run folder under {out_root}")


# ------------------------------------------------------------------------------------------ summary.md
def write_summary(folder: Path, rec: dict[str, Any], link: str, v: dict[str, Any], *, rendering: bool = False) -> Path:
    """``folder/summary.md`` for the run ``rec`` (runbook, status, params, error) with verdict ``v``
    (:func:`verdict_of`; empty when the run wrote no findings) and a link to its report; ``rendering``: the verdict
    is known and the notebook behind it (the evidence) is still being rendered. A render that failed after the
    verdict (``rec["render_error"]``) is said below the verdict."""
    lines = [f"# {rec['runbook']}: {str(rec['status']).upper()}", ""]
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
    p = Path(folder) / SUMMARY_FILE
    p.write_text("\n".join(lines))
    return p


def read_summary(folder: Path) -> str | None:
    """The text of the run's summary.md, None when it has none (yet)."""
    p = Path(folder) / SUMMARY_FILE
    return p.read_text() if p.is_file() else None


# ------------------------------------------------------------------------------------------ a serve run's life
def write_serve_record(folder: Path, rec: dict[str, Any]) -> None:
    """``folder/run.json`` replaced whole by ``rec`` (tmp + rename; a temporary file of this process and thread, so
    writers of other replicas use theirs); OSError, with no temporary file left, when it cannot be written."""
    tmp = Path(folder) / f"{SERVE_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        tmp.write_text(json.dumps(rec, indent=2, default=str))
        os.replace(tmp, Path(folder) / SERVE_FILE)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def read_serve_record(folder: Path) -> dict[str, Any] | None:
    """``folder/run.json``, or None when it is missing, unreadable or names another run."""
    rec = read_doc(Path(folder) / SERVE_FILE)
    return rec if rec is not None and rec.get("id") == Path(folder).name else None


class RunRecord:
    """The life of one gpuops serve run (``run.json``), one method per event; each returns the changes the event
    makes to the record (the store writes them) after checking that the status may move that way
    (:data:`TRANSITIONS`; ValueError otherwise)."""

    def __init__(self, rec: dict[str, Any]):
        self.rec = rec

    @staticmethod
    def new(run_id: str, replica: str | None, runbook: str, params: dict[str, Any], trigger: dict) -> dict[str, Any]:
        """A run just accepted: queued."""
        return {
            "id": run_id,
            "replica": replica,
            "runbook": runbook,
            "params": params,
            "status": Status.QUEUED.value,
            "created": time.time(),
            "started": None,
            "finished": None,
            "verdict": None,
            "severity": None,
            "cause": None,
            "command": None,
            "error": None,
            "trigger": trigger,
        }

    def _to(self, status: str, **changes: Any) -> dict[str, Any]:
        old, new = Status(self.rec["status"]), Status(status)
        if new != old and new not in TRANSITIONS.get(old, ()):
            run = self.rec.get("id") or self.rec.get("runbook")
            raise ValueError(f"run {run}: {old.value} cannot become {new.value}")
        return {"status": new.value, **changes}

    @staticmethod
    def facts(v: dict[str, Any], status: str) -> dict[str, Any]:
        """What the record shows of verdict ``v``: its severity (none without a verdict), cause, first command."""
        cmd = v.get("commands", [None])[0] if v.get("commands") else None
        return {
            "severity": shown_severity(status, v.get("severity")),
            "cause": v.get("cause"),
            "command": cmd,
            "sop_step": v.get("sop_step"),
            "verdict": v or None,
        }

    def started(self, now: float) -> dict[str, Any]:
        """A verdict worker took the run."""
        return self._to(Status.RUNNING, started=now)

    def refused(self, error: str, now: float, status: str = Status.FAILED) -> dict[str, Any]:
        """The run ends without a notebook: it cannot run here (failed) or a value matched nothing (bad
        parameter)."""
        return self._to(status, error=error, finished=now, verdict_at=now, render=Render.SKIPPED.value, severity=None)

    def decided(self, out: dict[str, Any], now: float) -> dict[str, Any]:
        """The fast verdict ``out`` (:func:`outcome`) is out; the notebook, its evidence, follows."""
        return self._to(
            Status.RENDERING,
            verdict_at=now,
            verdict_by="fast",
            verdict_status=str(out["status"]),
            error=out.get("error"),
            render=Render.QUEUED.value,
            **self.facts(out["verdict"], out["status"]),
        )

    def render_started(self, now: float) -> dict[str, Any]:
        """The notebook started (a run without a fast verdict starts with it)."""
        fast = self.rec.get("verdict_by") == "fast"
        return {"render": Render.RUNNING.value, "render_started": now, **({} if fast else {"started": now})}

    def rendered(self, out: dict[str, Any], v: dict[str, Any], now: float) -> tuple[dict[str, Any], bool]:
        """The notebook ended with ``out`` (:func:`outcome`) and verdict ``v``: the changes, and whether the verdict
        the record shows changed (to be notified again)."""
        status = str(out["status"])
        render = (Render.FAILED if status == Status.FAILED else Render.DONE).value
        if self.rec.get("verdict_by") != "fast":  # the notebook's verdict is the run's
            return self._to(
                status,
                error=out.get("error"),
                finished=now,
                verdict_at=now,
                verdict_by="notebook",
                render=render,
                render_finished=now,
                render_warm=out.get("warm"),
                **self.facts(v, status),
            ), True
        if status == Status.FAILED and not v:  # no evidence; the fast verdict stands, the failure is shown
            return self._to(
                self.rec["verdict_status"],
                finished=now,
                render=Render.FAILED.value,
                render_error=out.get("error"),
                render_finished=now,
            ), False
        changed = v != self.rec["verdict"]
        upd: dict[str, Any] = {"error": out.get("error")}
        if changed:  # the notebook read the source later or failed a step the fast path has not: it wins
            upd.update(self.facts(v, status), verdict_changed={"fast": self.rec["verdict"]}, verdict_by="notebook")
        return self._to(
            status,
            finished=now,
            render=render,
            render_error=out.get("error") if status == Status.FAILED else None,
            render_finished=now,
            render_warm=out.get("warm"),
            **upd,
        ), changed

    def ended(self, status: str, error: str | None, now: float) -> dict[str, Any]:
        """A run of the run engine ended (``gpuops run``: its notebook ran, or could not) with ``status``
        (:func:`status_of`)."""
        return self._to(status, error=error, finished=now)

    def broken(self, exc: BaseException, now: float) -> dict[str, Any]:
        """The server could not finish the run (an error outside its runner, e.g. writing summary.md)."""
        return self._to(Status.FAILED, error=redact(f"{type(exc).__name__}: {exc}")[:1000], finished=now)

    def interrupted(self, now: float) -> dict[str, Any] | None:
        """The server running it stopped: the changes that end it, or None for a run that had ended. A run whose
        verdict was out keeps it (its notebook was cut short); any other fails."""
        status = self.rec.get("status")
        if status == Status.RENDERING:
            return self._to(
                self.rec.get("verdict_status") or Status.DONE,
                render=Render.FAILED.value,
                render_error="interrupted: the server stopped before the notebook was rendered",
                finished=self.rec.get("finished") or now,
            )
        if status in ACTIVE:
            return self._to(
                Status.FAILED,
                error="interrupted: the server stopped before the run finished",
                finished=self.rec.get("finished") or now,
            )
        return None


# ------------------------------------------------------------------------------------------ the engine's run
class EngineRecord:
    """The engine's record of a run, ``status.json`` (``gpuops run``, ``demo``, ``report``, and the notebook of a
    ``gpuops serve`` or ``gpuops mcp`` run), moved by the same :class:`RunRecord` events and :data:`TRANSITIONS` as a
    serve run's: queued when its folder is made, running when its kernel starts, then done, incomplete, bad
    parameter or failed; failed too when the engine itself broke (a full disk, a bug). Each status the run took is
    listed with its time under ``transitions``. A run whose process died is read back as interrupted
    (:func:`folder_status`)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def queued(self, runbook: str, params: dict[str, Any], now: float | None = None) -> None:
        """The run's folder is made and its parameters checked: a new record (one left by an earlier try of the same
        folder, a render Job run again, is replaced)."""
        now = time.time() if now is None else now
        (self.folder / STATUS_FILE).unlink(missing_ok=True)
        trail = [{"status": Status.QUEUED.value, "at": now}]
        write_status(self.folder, runbook=runbook, status=Status.QUEUED, params=params, transitions=trail)

    def started(self, now: float | None = None) -> None:
        """Its kernel starts."""
        self._apply(lambda r, t: r.started(t), now)

    def ended(self, status: str, error: str | None, now: float | None = None) -> None:
        """Its notebook ran (or could not): ``status`` is :func:`status_of` the run."""
        self._apply(lambda r, t: r.ended(status, error, t), now)

    def broken(self, exc: BaseException, now: float | None = None) -> None:
        """The engine could not finish the run (an error outside the notebook): failed, with ``exc`` as its error.
        Never raises: the error being handled is the one to report."""
        try:
            self._apply(lambda r, t: r.broken(exc, t), now)
        except (OSError, ValueError, KeyError):
            pass

    def _apply(self, event, now: float | None) -> None:
        now = time.time() if now is None else now
        doc = read_doc(self.folder / STATUS_FILE) or {}
        changes = event(RunRecord(doc), now)
        trail = [*doc.get("transitions", []), {"status": changes["status"], "at": now}]
        write_status(self.folder, **changes, transitions=trail)
