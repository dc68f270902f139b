"""Every column of the MIG data files (gpulib/data/mig/*.csv) is read by gpulib: a column no code names is dead data
that a reader would trust (as ``product_regex`` was once products were matched by PCI device id, then exact name:
gpulib/mig/models.py). A column counts as read when gpulib names it as a quoted string (``df["col"]``) or an
attribute (``row.col``); provenance columns are for readers and exempt."""

from __future__ import annotations

import csv
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIG_DATA = ROOT / "gpulib" / "data" / "mig"
#: columns that say where a value came from, read by people (docs/architecture.md: data files cite their source)
PROVENANCE = {"source", "memory_inferred"}


def _code() -> str:
    return "\n".join(p.read_text() for p in sorted((ROOT / "gpulib").rglob("*.py")))


def unread_columns(header: list[str], code: str) -> list[str]:
    return [
        c
        for c in header
        if c not in PROVENANCE and not re.search(rf"""["']{re.escape(c)}["']|\.{re.escape(c)}\b""", code)
    ]


def test_no_column_of_the_mig_data_files_is_unread():
    code = _code()
    files = sorted(MIG_DATA.glob("*.csv"))
    assert {f.name for f in files} >= {"mig_gpu_models.csv", "mig_profiles.csv", "gpu_model_names.csv"}
    dead = {f.name: bad for f in files if (bad := unread_columns(next(csv.reader(f.open())), code))}
    assert dead == {}, dead


def test_the_check_finds_a_dead_column():
    code = _code()
    assert unread_columns(["gpu_model", "product_regex", "source"], code) == ["product_regex"]
