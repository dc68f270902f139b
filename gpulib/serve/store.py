"""Runs are folders on disk (:func:`gpulib.core.rundir.new_run_dir`), each with ``run.json``; alert decisions are
appended
to ``alerts.jsonl``. The in-memory index is rebuilt from the folders at start, so a restart loses nothing; a run
that was queued or running when the server stopped is marked failed ("interrupted") instead of left hanging."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from gpulib.core.rundir import new_run_dir

RUN_FILE = "run.json"
ALERT_LOG = "alerts.jsonl"
ACTIVE = ("queued", "running")


class RunStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._runs: dict[str, dict[str, Any]] = {}
        self.rebuild()

    # ----------------------------------------------------------------------------------- index
    def rebuild(self) -> None:
        with self._lock:
            self._runs.clear()
            for d in sorted(p for p in self.root.iterdir() if p.is_dir()):
                f = d / RUN_FILE
                if not f.is_file():
                    continue
                try:
                    rec = json.loads(f.read_text())
                except (OSError, json.JSONDecodeError):
                    continue
                if rec.get("status") == "rendering":  # the verdict was out; its notebook was cut short
                    rec.update(
                        status=rec.get("verdict_status") or "done",
                        render="failed",
                        render_error="interrupted: the server stopped before the notebook was rendered",
                        finished=rec.get("finished") or time.time(),
                    )
                    self._write(rec)
                elif rec.get("status") in ACTIVE:
                    rec.update(
                        status="failed",
                        error="interrupted: the server stopped before the run finished",
                        finished=rec.get("finished") or time.time(),
                    )
                    self._write(rec)
                self._runs[rec["id"]] = rec

    def _write(self, rec: dict[str, Any]) -> None:
        d = self.root / rec["id"]
        tmp = d / (RUN_FILE + ".tmp")
        tmp.write_text(json.dumps(rec, indent=2, default=str))
        os.replace(tmp, d / RUN_FILE)

    def create(self, runbook: str, params: dict[str, Any], *, trigger: dict[str, Any]) -> dict[str, Any]:
        d = new_run_dir(self.root, runbook)
        rec = {
            "id": d.name,
            "runbook": runbook,
            "params": params,
            "status": "queued",
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
        with self._lock:
            self._runs[rec["id"]] = rec
            self._write(rec)
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

    def forget(self, run_id: str) -> None:
        """Drop a run that was never queued (the queue was full): its folder goes too."""
        with self._lock:
            self._runs.pop(run_id, None)
        shutil.rmtree(self.root / run_id, ignore_errors=True)

    def get(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            rec = self._runs.get(run_id)
            return dict(rec) if rec else None

    def folder(self, run_id: str) -> Path:
        return self.root / run_id

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return sorted((dict(r) for r in self._runs.values()), key=lambda r: r["created"], reverse=True)

    def newest(self, runbook: str, params: dict[str, Any], *, since: float) -> dict[str, Any] | None:
        """The newest run of ``runbook`` with exactly ``params`` created after ``since`` that did not fail."""
        for r in self.list():
            if r["created"] < since:
                break
            if r["runbook"] == runbook and r["params"] == params and r["status"] != "failed":
                return r
        return None

    # ------------------------------------------------------------------------------ alert log
    def log_alert(self, entry: dict[str, Any]) -> None:
        with self._lock, open(self.root / ALERT_LOG, "a") as fh:
            fh.write(json.dumps(entry, default=str) + "\n")

    def alert_log(self) -> list[dict[str, Any]]:
        p = self.root / ALERT_LOG
        if not p.is_file():
            return []
        with self._lock:
            return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
