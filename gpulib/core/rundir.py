"""Run folders: every run of a runbook (``gpuops run``, ``gpuops demo``, ``gpuops serve``) gets one of its own."""

from __future__ import annotations

import fcntl
import html
import json
import os
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path

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


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path`` (atomic on POSIX), so a
    reader never sees a half-written file and concurrent writers leave one whole version."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_index(out_root: Path, known: dict[str, tuple[str, int]] | None = None) -> Path:
    """``index.html`` listing every generated report, newest first, with its worst severity and number of
    findings (``known``: those of run folders the caller has already read, by folder name; the others are read
    from their findings.json). Written atomically (tmp + rename) under an exclusive lock on
    ``out_root/.index.lock`` (``fcntl.flock``), so of runs finishing together the last writer lists them all
    (each run writes its HTML before taking the lock)."""
    with open(out_root / ".index.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _write_index(out_root, known or {})
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_index(out_root: Path, known: dict[str, tuple[str, int]]) -> Path:
    rows = []
    for d in sorted((p for p in out_root.iterdir() if p.is_dir()), reverse=True):
        htmls = sorted(d.glob("*.html"))
        if not htmls:
            continue
        worst, n = known.get(d.name, ("", 0))
        fj = d / "findings.json"
        if d.name not in known and fj.exists():
            try:
                doc = json.loads(fj.read_text())
                worst, n = doc.get("worst", ""), len(doc.get("findings", []))
            except (json.JSONDecodeError, OSError, UnicodeDecodeError):
                worst = "unreadable"
        rows.append(
            f"<tr><td><a href='{html.escape(d.name)}/{html.escape(htmls[0].name)}'>{html.escape(d.name)}</a></td>"
            f"<td>{html.escape(worst)}</td><td>{n}</td></tr>"
        )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpu-runbooks reports</title></head><body>"
        "<h1>gpu-runbooks reports</h1><table border='1' cellpadding='4'><tr><th>run</th><th>worst finding</th>"
        f"<th>findings</th></tr>{''.join(rows)}</table></body></html>"
    )
    idx = out_root / "index.html"
    atomic_write(idx, page)
    return idx
