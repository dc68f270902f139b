"""Run folders: every run of a runbook (``gpuops run``, ``gpuops demo``, ``gpuops serve``) gets one of its own."""

from __future__ import annotations

import fcntl
import secrets
from datetime import datetime, timezone
from pathlib import Path

from gpulib.core.files import atomic_write
from gpulib.core.index_page import render
from gpulib.core.runrecord import RUN_ID, read_run

#: the run engine (gpulib.execute) sets this in a run's kernel: the file the notebook writes its findings to
FINDINGS_ENV = "GPUOPS_FINDINGS_PATH"


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


def write_index(out_root: Path, known: dict[str, dict] | None = None) -> Path:
    """``index.html`` of every run folder under ``out_root`` (:mod:`gpulib.core.index_page`: newest first, verdict,
    cause, node/GPU, parameters, times, duration, status, filters; a run still going is listed as such).
    ``known``: records (:func:`gpulib.core.runrecord.record`) of folders the caller has already read, by folder
    name; the others are read from their files. Written atomically (tmp + rename) under an exclusive lock on
    ``out_root/.index.lock`` (``fcntl.flock``), so of runs finishing together the last writer lists them all
    (each run writes its HTML before taking the lock)."""
    with open(out_root / ".index.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _write_index(out_root, known or {})
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_index(out_root: Path, known: dict[str, dict]) -> Path:

    recs = [known.get(d.name) or read_run(d) for d in out_root.iterdir() if d.is_dir() and RUN_ID.match(d.name)]
    page = render(recs, lambda r: f"{r['id']}/{r['html']}" if r.get("html") else None, title="gpu-runbooks runs")
    idx = out_root / "index.html"
    atomic_write(idx, page)
    return idx
