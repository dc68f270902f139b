"""Run folders: every run of a runbook (``gpuops run``, ``gpuops demo``, ``gpuops serve``) gets one of its own."""
from __future__ import annotations

import secrets
from datetime import datetime, timezone
from pathlib import Path


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
