"""The run store's bounds and what it cannot read: the store keeps at most ``retain_runs`` runs, none older
than ``retain_days`` and ``retain_gib`` in all (rows of ``gpulib/data/serve/serve_limits.csv``, sized to the shipped
volume: the 5 Gi claim ``gpuops-serve-runs`` of deploy/base/serve/deployment.yaml). :func:`prune` removes finished
runs, oldest first, until every bound holds; a run that is queued, running or rendering is never removed, nor one
created within ``keep_recent_s`` (an alert of its incident may still be attached to it, a page may still open it:
``--dedupe-window``, ``--fresh-for``). A run folder whose ``run.json`` cannot be read is listed by :func:`unreadable`
(the index and its page say so) and counts as finished for the bounds. In a store several replicas share, each
replica bounds its own runs, and the first live replica by name also those of the replicas that are gone
(:meth:`gpulib.serve.store.RunStore.steward`: in a Deployment a restarted pod has a new name, so nobody else would);
a run is removed by renaming its folder away first (:func:`gpulib.serve.store.remove_folder`), so two replicas
removing one folder never race into an error. :class:`Retention` prunes every ``retain_check_s`` in a thread of the
server."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulib.run.record import ACTIVE, RUN_ID, SERVE_FILE, Status, created_at
from gpulib.serve.config import limit
from gpulib.serve.store import TRASH, RunStore, remove_folder

#: statuses of a run that may still change; such a run is never pruned
LIVE = (*ACTIVE, Status.RENDERING)
#: a run folder younger than this without its run.json is being made (RunStore.create), not unreadable
MAKING_S = 60


@dataclass
class Bounds:
    runs: int = field(default_factory=lambda: int(limit("retain_runs")))
    age_s: float = field(default_factory=lambda: float(limit("retain_days")) * 86400)
    bytes: int = field(default_factory=lambda: int(float(limit("retain_gib")) * 2**30))


def folder_bytes(d: Path) -> int:
    """Bytes of the files under ``d`` (what the run takes on the volume, to the file)."""
    total, stack = 0, [str(d)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:
                pass
    return total


def unreadable(store: RunStore, now: float | None = None) -> list[dict[str, Any]]:
    """Run folders of ``store`` whose run.json is missing or cannot be read: a record each (status ``unreadable``,
    the reason in ``error``), newest first."""
    now = time.time() if now is None else now
    out = []
    try:
        dirs = [d for d in store.root.iterdir() if RUN_ID.match(d.name) and d.is_dir()]
    except OSError:
        return []
    for d in dirs:
        if store.get(d.name) is not None:
            continue
        try:
            doc = json.loads((d / SERVE_FILE).read_text())
            why = "" if isinstance(doc, dict) and doc.get("id") == d.name else "it names another run"
        except FileNotFoundError:
            try:
                if now - d.stat().st_mtime < MAKING_S:
                    continue
            except OSError:
                continue
            why = "it is missing"
        except (OSError, ValueError) as exc:
            why = f"{type(exc).__name__}: {exc}"[:300]
        if not why:  # another replica's run, read by its own replica
            continue
        m = RUN_ID.match(d.name)
        out.append(
            {
                "id": d.name,
                "runbook": m["runbook"] if m else "",
                "params": {},
                "status": "unreadable",
                "created": created_at(d.name),
                "error": f"run.json of this run cannot be read ({why})",
            }
        )
    return sorted(out, key=lambda r: r["created"] or 0, reverse=True)


@dataclass
class Pruned:
    ids: list[str]
    runs: int
    bytes: int


class Retention:
    """The bounds of one store: :meth:`prune` now, :meth:`start` every ``retain_check_s`` until :meth:`stop`."""

    def __init__(self, store: RunStore, bounds: Bounds | None = None, keep_recent_s: float = 0):
        self.store, self.bounds, self.keep_recent_s = store, bounds or Bounds(), float(keep_recent_s)
        self._sizes: dict[str, int] = {}  # finished runs do not change: their size is read once
        self._stop = threading.Event()
        self.last: Pruned | None = None
        self.pruned = 0

    def _size(self, run_id: str, finished: bool) -> int:
        if finished and run_id in self._sizes:
            return self._sizes[run_id]
        n = folder_bytes(self.store.folder(run_id))
        if finished:
            self._sizes[run_id] = n
        return n

    def prune(self, now: float | None = None) -> Pruned:
        """Remove finished runs, oldest first, until the store is within every bound; what was removed and what is
        left."""
        now = time.time() if now is None else now
        live = self.store.live()
        recs = [r for r in self.store.list() if self.store.steward(r.get("replica"), live)]
        recs += unreadable(self.store, now)
        sizes = {r["id"]: self._size(r["id"], r.get("status") not in LIVE) for r in recs}
        total, count, gone = sum(sizes.values()), len(recs), []
        for r in sorted(recs, key=lambda r: r.get("created") or 0):  # oldest first
            if r.get("status") in LIVE or now - (r.get("created") or now) < self.keep_recent_s:
                continue
            old = now - (r.get("created") or now) > self.bounds.age_s
            if not (old or count > self.bounds.runs or total > self.bounds.bytes):
                break
            if r["status"] == "unreadable":
                removed = remove_folder(self.store.folder(r["id"]))
            else:
                removed = self.store.forget(r["id"])
            if removed:  # else another replica removed it first: gone all the same
                gone.append(r["id"])
            total, count = total - sizes[r["id"]], count - 1
            self._sizes.pop(r["id"], None)
        self._sizes = {k: v for k, v in self._sizes.items() if k in sizes and k not in gone}
        self._empty_trash(now)
        self.pruned += len(gone)
        self.last = Pruned(gone, count, total)
        return self.last

    def _empty_trash(self, now: float) -> None:
        """Delete what a removal cut short left renamed away (a replica stopped mid-delete)."""
        try:
            left = [d for d in self.store.root.iterdir() if d.name.startswith(TRASH)]
        except OSError:
            return
        for d in left:
            try:
                if now - d.stat().st_mtime > MAKING_S:
                    shutil.rmtree(d, ignore_errors=True)
            except OSError:
                pass

    def start(self) -> None:
        every = float(limit("retain_check_s"))

        def loop():
            while True:
                try:
                    self.prune()
                except Exception:  # a store that cannot be read now: the next pass tries again
                    pass
                if self._stop.wait(every):
                    return

        threading.Thread(target=loop, name="gpuops-retention", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def stats(self) -> dict[str, Any]:
        last = self.last
        return {
            "runs": last.runs if last else None,
            "bytes": last.bytes if last else None,
            "pruned": self.pruned,
            "bounds": {"runs": self.bounds.runs, "days": self.bounds.age_s / 86400, "bytes": self.bounds.bytes},
        }
