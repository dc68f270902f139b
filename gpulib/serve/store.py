"""Runs are folders on disk (:func:`gpulib.run.record.new_run_dir`), each with ``run.json``; alert decisions are
appended to ``alerts.jsonl``. The in-memory index is rebuilt from the folders at start, so a restart loses nothing; a
run that was running when the server stopped is marked failed ("interrupted") instead of left hanging.

Several replicas may share one store (a ReadWriteMany volume, ``gpuops serve --claims kubernetes``): each run names
the ``replica`` that made it, each replica appends to its own ``alerts.<replica>.jsonl`` and touches
``.replicas/<replica>`` every ``heartbeat_s`` (``gpulib/data/serve/render_settings.csv``). A replica's index holds
its own runs; another replica's run is read from its folder when asked for (:meth:`RunStore.get`,
:meth:`RunStore.list`). A run that had started is shown interrupted when its replica is this one starting again, or a
replica whose heartbeat is older than ``heartbeat_stale_s`` (gone): never the live runs of another replica.

A run accepted but never started stays queued: its own replica runs it at its start (:meth:`RunStore.not_started`),
and a live replica adopts those of a gone one (:meth:`RunStore.orphans`, :meth:`RunStore.adopt`): in a Deployment a
restarted pod has a new name and would never find them. Who starts or adopts a run first takes its claim: the file
``.claim.<n>`` in the run's folder made with ``O_CREAT | O_EXCL`` (one creator wins, on a shared filesystem too:
https://man7.org/linux/man-pages/man2/open.2.html), ``n`` the run's ``claims`` count, which the winner raises; so two
replicas never both run one. A run is removed by renaming its folder away first (:meth:`RunStore.forget`: one
``rename`` wins, https://man7.org/linux/man-pages/man2/rename.2.html), so two replicas pruning it never race.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from gpulib.core.errors import RunStoreError
from gpulib.core.knowledge import settings
from gpulib.run.record import RunRecord, Status, new_run_dir, read_serve_record, write_serve_record

ALERT_LOG = "alerts.jsonl"
#: the replicas' heartbeat files, under the store's root
REPLICAS = ".replicas"
#: the settings that hold the heartbeat period and when a replica counts as gone
SETTINGS = "render_settings"
#: a run's claim files (``.claim.<n>``) and how many claims it has had (the record's key)
CLAIM, CLAIMS = ".claim.", "claims"
#: a removed run's folder, renamed so before it is deleted (names with a dot are no run's)
TRASH = ".trash."


class RunStore:
    """``replica``: the name of this server in a store several share (None: the only one; it reads every run as its
    own)."""

    def __init__(self, root: Path, replica: str | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.replica = replica
        self.stale_s = float(settings(SETTINGS)["heartbeat_stale_s"])
        self._lock = threading.RLock()
        self._runs: dict[str, dict[str, Any]] = {}
        #: why the last write to the store failed (None: the last write succeeded); /healthz and /readyz show it
        self.error: str | None = None
        self.beat()
        self.rebuild()

    # ------------------------------------------------------------------------------- replicas
    def beat(self) -> None:
        """This replica's heartbeat: its file under ``.replicas/`` touched now."""
        if self.replica is None:
            return
        d = self.root / REPLICAS
        d.mkdir(exist_ok=True)
        (d / self.replica).touch()

    def _mine(self, rec: dict[str, Any]) -> bool:
        return self.replica is None or rec.get("replica") in (None, self.replica)

    def live(self) -> list[str]:
        """The replicas whose heartbeat is fresh, by name."""
        try:
            beats = list(os.scandir(self.root / REPLICAS))
        except OSError:
            return []
        now = time.time()
        out = []
        for e in beats:
            try:
                if now - e.stat().st_mtime <= self.stale_s:
                    out.append(e.name)
            except OSError:
                pass
        return sorted(out)

    def steward(self, replica: str | None, live: list[str] | None = None) -> bool:
        """Whether this replica keeps the runs of ``replica`` within the bounds: its own, and those of a gone replica
        when it is the first live one by name (one live replica counts them, not each); ``live``: :meth:`live`, read
        once by a caller that asks for many runs."""
        if self.replica is None or replica in (None, self.replica):
            return True
        if not self._gone(replica):
            return False
        live = self.live() if live is None else live
        return bool(live) and live[0] == self.replica

    def _gone(self, replica: str | None) -> bool:
        """Whether the replica that made a run no longer beats (its heartbeat older than ``heartbeat_stale_s``)."""
        try:
            return time.time() - (self.root / REPLICAS / str(replica)).stat().st_mtime > self.stale_s
        except OSError:
            return True

    def _interrupted(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """The record of a run cut short by its server's stop (:meth:`RunRecord.interrupted`), or None when it is
        finished or its server is alive."""
        cut = RunRecord(rec).interrupted(time.time())
        if cut is None or (not self._mine(rec) and not self._gone(rec.get("replica"))):
            return None
        if _not_started(rec):  # accepted, never started: its server runs it, or a live one adopts it (orphans)
            return None
        return {**rec, **cut}

    def orphans(self) -> list[dict[str, Any]]:
        """Runs of gone replicas (not this one) accepted but never started, oldest first: a live replica adopts them
        (:meth:`adopt`). Read only while some replica's heartbeat is stale; the heartbeat of a gone replica with no
        such run left is removed, so the folders are not read again for it (a missing heartbeat is a gone replica's,
        and one coming back beats again)."""
        if self.replica is None:
            return []
        try:
            names = [e.name for e in os.scandir(self.root / REPLICAS) if e.name != self.replica]
        except OSError:
            return []
        gone = {n for n in names if self._gone(n)}
        if not gone:
            return []
        with self._lock:
            own = set(self._runs)
        out = []
        for d in self.root.iterdir():
            if d.name in own or d.name.startswith(".") or not d.is_dir():
                continue
            rec = self._read(d)
            if rec is not None and rec.get("replica") in gone and _not_started(rec):
                out.append(rec)
        for name in gone - {r["replica"] for r in out}:
            if self._gone(name):  # still stale now: it did not come back while the folders were read
                (self.root / REPLICAS / name).unlink(missing_ok=True)
        return sorted(out, key=lambda r: r["created"])

    def _claim(self, run_id: str, n: int) -> bool:
        """Take claim ``n`` of a run (the file ``.claim.<n>`` made exclusively); False when another has it."""
        try:
            fd = os.open(self.folder(run_id) / f"{CLAIM}{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:
            raise self._failed(f"the claim of run {run_id}", exc) from None
        try:
            os.write(fd, str(self.replica).encode())
        finally:
            os.close(fd)
        return True

    def adopt(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """Take a run accepted but never started (a gone replica's, or this one's from before its restart) to run it
        here: its record then names this replica and ``adopted_from`` the one before. None when another replica took
        it first (it leaves this replica's index)."""
        n = int(rec.get(CLAIMS) or 0)
        if self.replica is not None and not self._claim(rec["id"], n):
            with self._lock:
                self._runs.pop(rec["id"], None)
            return None
        new = {**rec, CLAIMS: n + 1, "requeued": time.time()}
        if rec.get("replica") != self.replica:
            new.update(replica=self.replica, adopted_from=rec.get("replica"))
        with self._lock:
            self._write(new)
            self._runs[new["id"]] = new
        return dict(new)

    def claim(self, run_id: str) -> bool:
        """Before a worker starts a run of this replica: whether it may (no other replica adopted it meanwhile: a
        replica whose heartbeat lagged). A run it may not start leaves the index. Always True in a store of one."""
        if self.replica is None:
            return True
        with self._lock:
            rec = self._runs.get(run_id)
            if rec is None:
                return False
            n = int(rec.get(CLAIMS) or 0)
            if not self._claim(run_id, n):
                self._runs.pop(run_id, None)
                return False
            rec[CLAIMS] = n + 1
        return True

    def not_started(self) -> list[dict[str, Any]]:
        """This replica's runs that were accepted but never started (queued when the server stopped, even by kill -9),
        oldest first: the server runs them again at its start (:meth:`gpulib.serve.service.Service.requeue`)."""
        with self._lock:
            return sorted((dict(r) for r in self._runs.values() if _not_started(r)), key=lambda r: r["created"])

    def _read(self, d: Path) -> dict[str, Any] | None:
        return read_serve_record(d)

    # ----------------------------------------------------------------------------------- index
    def rebuild(self) -> None:
        """This replica's runs, read from their folders; a run its stop cut short is marked so (module docstring)."""
        with self._lock:
            self._runs.clear()
            for d in sorted(p for p in self.root.iterdir() if p.is_dir()):
                rec = self._read(d)
                if rec is None:
                    continue
                cut = self._interrupted(rec)
                if cut is not None:
                    rec = cut
                    self._write(rec)
                if self._mine(rec):
                    self._runs[rec["id"]] = rec

    def _failed(self, what: str, exc: OSError) -> RunStoreError:
        """The store could not be written: remembered (until a write succeeds) and a RunStoreError with the reason."""
        self.error = f"the run store {self.root} cannot be written ({what}): {exc.strerror or exc}"
        return RunStoreError(self.error)

    def _write(self, rec: dict[str, Any]) -> None:
        """``run.json`` of ``rec`` replaced whole (:func:`gpulib.run.record.write_serve_record`); RunStoreError, with no
        temporary file left, when the store cannot be written."""
        try:
            write_serve_record(self.root / rec["id"], rec)
        except OSError as exc:
            raise self._failed(f"run {rec['id']}", exc) from None
        self.error = None

    def create(self, runbook: str, params: dict[str, Any], *, trigger: dict[str, Any]) -> dict[str, Any]:
        """A new queued run, on disk before it is in the index: RunStoreError (and no folder left) when the store
        cannot be written."""
        try:
            d = new_run_dir(self.root, runbook)
        except OSError as exc:
            raise self._failed("a new run folder", exc) from None
        rec = RunRecord.new(d.name, self.replica, runbook, params, trigger)
        with self._lock:
            try:
                self._write(rec)
            except RunStoreError:
                shutil.rmtree(d, ignore_errors=True)
                raise
            self._runs[rec["id"]] = rec
        return dict(rec)

    def update(self, run_id: str, **changes: Any) -> dict[str, Any]:
        with self._lock:
            rec = self._runs[run_id]
            rec.update(changes)
            self._write(rec)
            return dict(rec)

    def update_with(self, run_id: str, change) -> dict[str, Any]:
        """``change(record) -> changes`` applied under the lock (read-modify-write of a list, e.g. attached alerts)."""
        with self._lock:
            return self.update(run_id, **change(dict(self._runs[run_id])))

    def update_if(self, run_id: str, status: str, change) -> dict[str, Any] | None:
        """:meth:`update_with` only while the run's status is ``status``; None (nothing changed) otherwise."""
        with self._lock:
            if self._runs[run_id]["status"] != status:
                return None
            return self.update_with(run_id, change)

    def forget(self, run_id: str) -> bool:
        """Drop a run (never queued: the queue was full; or pruned): its folder is renamed away, then deleted. False
        when it was already gone (another replica removed it first)."""
        with self._lock:
            self._runs.pop(run_id, None)
        return remove_folder(self.root / run_id)

    def get(self, run_id: str) -> dict[str, Any] | None:
        """A run of this replica, else one another replica made in the shared store (read from its folder)."""
        with self._lock:
            rec = self._runs.get(run_id)
            if rec:
                return dict(rec)
        if self.replica is None or not run_id or "/" in run_id or run_id.startswith("."):
            return None
        return self._foreign(self.root / run_id)

    def _foreign(self, d: Path) -> dict[str, Any] | None:
        rec = self._read(d) if d.is_dir() else None
        if rec is None:
            return None
        cut = self._interrupted(rec)
        if cut is not None:  # its replica is gone: shown (and recorded) as interrupted
            self._write(cut)
            return cut
        return rec

    def folder(self, run_id: str) -> Path:
        return self.root / run_id

    def __len__(self) -> int:
        """This replica's runs (the index; no folder is read)."""
        with self._lock:
            return len(self._runs)

    def list(self) -> list[dict[str, Any]]:
        """Every run, newest first: this replica's, and in a shared store the other replicas' read from their
        folders."""
        with self._lock:
            recs = [dict(r) for r in self._runs.values()]
            own = set(self._runs)
        if self.replica is not None:
            for d in self.root.iterdir():
                if d.is_dir() and d.name not in own and not d.name.startswith("."):
                    rec = self._foreign(d)
                    if rec is not None:
                        recs.append(rec)
        return sorted(recs, key=lambda r: r["created"], reverse=True)

    def newest(self, runbook: str, params: dict[str, Any], *, since: float) -> dict[str, Any] | None:
        """The newest run of ``runbook`` with exactly ``params`` created after ``since`` that did not fail."""
        for r in self.list():
            if r["created"] < since:
                break
            if r["runbook"] == runbook and r["params"] == params and r["status"] != Status.FAILED:
                return r
        return None

    # ------------------------------------------------------------------------------ alert log
    def _alert_file(self) -> Path:
        return self.root / (ALERT_LOG if self.replica is None else f"alerts.{self.replica}.jsonl")

    def log_alert(self, entry: dict[str, Any]) -> None:
        """Append an alert decision; on a store that cannot be written the decision still stands (the error is kept
        for /healthz) rather than the webhook failing."""
        try:
            with self._lock, open(self._alert_file(), "a") as fh:
                fh.write(json.dumps(entry, default=str) + "\n")
        except OSError as exc:
            self._failed("the alert log", exc)

    def alert_log(self) -> list[dict[str, Any]]:
        """Every replica's alert decisions (each replica appends to its own file)."""
        files = sorted({self.root / ALERT_LOG, *self.root.glob("alerts.*.jsonl")})
        out: list[dict[str, Any]] = []
        with self._lock:
            for p in files:
                if p.is_file():
                    out += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        return out


def remove_folder(d: Path) -> bool:
    """Delete a run folder: renamed to a unique ``.trash.`` name first, so of several removers one wins and the
    others find it gone; False when it was not there."""
    trash = d.with_name(f"{TRASH}{d.name}.{uuid.uuid4().hex[:8]}")
    try:
        os.rename(d, trash)
    except FileNotFoundError:
        return False
    shutil.rmtree(trash, ignore_errors=True)
    return True


def _not_started(rec: dict[str, Any]) -> bool:
    return rec.get("status") == Status.QUEUED and not rec.get("started")
