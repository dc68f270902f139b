"""``nvidia-smi dmon`` text -> the tidy series schema (``SERIES_COLUMNS`` plus ``field``, ``column``,
``unit``, ``sample``), so a dmon capture can stand in for DCGM series on a node without dcgm-exporter.

``dmon`` prints two ``#`` header lines, the column names and their units, then one line per GPU per
sampling interval (``nvidia-smi dmon -h``, copied from a real H200 in
``gpulib/data/captures/h200_smi_dmon_h.txt``; real outputs beside it: ``h200_smi_dmon_pucvmet.txt`` for
``-s pucvmet -c 5`` and ``h200_smi_dmon_default.txt`` for the default ``-s puc``). Any ``-s`` selection
works because the columns are read from the header, never assumed. ``-`` and ``N/A`` cells become
NaN. ``-o D``/``-o T`` add ``Date`` (YYYYMMDD) and ``Time`` (HH:MM:SS) columns, which give the
timestamps; without them, pass ``start=`` (and ``interval_s=``, dmon's ``-d``, default 1 s) or the
timestamps stay NaT. ``--format csv`` (comma-separated cells) and ``nounit`` (no units line: units
come from the data file) are read too; ``noheader`` output has no column names and gives an empty
frame with a warning.

Columns map to DCGM field names through ``gpulib/data/nvidia/dmon_columns.csv`` (each row cites its source);
a column without a same-unit DCGM field keeps ``field == ""``. Never raises on text or bytes; one pass
over the lines. Problems are listed in ``df.attrs["warnings"]``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

import numpy as np
import pandas as pd

from gpulib.core.schema import SERIES_COLUMNS

DMON_COLUMNS = SERIES_COLUMNS + ["field", "column", "unit", "sample"]
_NA = {"-", "N/A", "n/a", "NA", "[N/A]"}
_TIME_COLUMNS = {"date", "time"}


@lru_cache(maxsize=1)
def _mapping() -> dict[str, tuple[str, str, float]]:
    from gpulib.core.knowledge import load_table

    t = load_table("dmon_columns").fillna({"field": "", "unit": ""})
    return {str(r.column): (str(r.field), str(r.unit), float(r.scale)) for r in t.itertuples()}


def _cells(line: str) -> list[str]:
    body = line.lstrip()
    if body.startswith("#"):
        body = body[1:]
    if "," in body:
        return [c.strip() for c in body.split(",")]
    return body.split()


def _empty(warnings: list[str]) -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype="object") for c in DMON_COLUMNS})
    df["value"] = df["value"].astype(float)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    df.attrs["warnings"] = warnings
    return df


def _is_header(cells: list[str]) -> bool:
    return bool(cells) and any(c.lower() == "gpu" for c in cells[:3])


def parse_dmon(
    text: str | bytes | None,
    *,
    node: str = "",
    start: datetime | str | None = None,
    interval_s: float = 1.0,
    uuids: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Parse ``nvidia-smi dmon`` output into one row per (GPU, sample, column).

    ``node`` fills the ``node`` column; ``uuids`` maps GPU index -> UUID (e.g. from
    :func:`gpulib.nvidia.smi.parse_query`); ``start``/``interval_s`` time the samples when the
    output has no Date/Time columns.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if not text:
        return _empty(["empty dmon output"])
    warnings: list[str] = []
    mapping = _mapping()
    names: list[str] | None = None
    units: list[str] | None = None
    expect_units = False
    t0 = None
    if start is not None:
        t0 = pd.Timestamp(start)
        t0 = t0.tz_localize("UTC") if t0.tzinfo is None else t0.tz_convert("UTC")
    counts: dict[str, int] = {}
    out: dict[str, list] = {k: [] for k in ("timestamp", "gpu", "column", "value", "sample")}
    bad_rows = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        cells = _cells(line)
        if line.startswith("#"):
            if expect_units and names is not None and len(cells) == len(names) and not _is_header(cells):
                units, expect_units = cells, False
                continue
            if _is_header(cells):
                if names is not None and [c.lower() for c in cells] != [c.lower() for c in names]:
                    warnings.append(
                        f"line {lineno}: a different header (columns {' '.join(cells)}): samples re-read from here"
                    )
                names, units, expect_units = cells, None, True
            continue
        expect_units = False
        if names is None:
            if _is_header(cells):  # csv with noheader '#'
                names, expect_units = cells, True
                continue
            bad_rows += 1
            continue
        if len(cells) != len(names):
            bad_rows += 1
            continue
        lower = [n.lower() for n in names]
        gi = lower.index("gpu")
        gpu = cells[gi]
        if not gpu.isdigit():
            bad_rows += 1
            continue
        sample = counts.get(gpu, 0)
        counts[gpu] = sample + 1
        ts = pd.NaT
        date = cells[lower.index("date")] if "date" in lower else None
        clock = cells[lower.index("time")] if "time" in lower else None
        if date or clock:
            ts = _stamp(date, clock, t0)
        elif t0 is not None:
            ts = t0 + timedelta(seconds=sample * float(interval_s))
        for i, name in enumerate(names):
            if i == gi or lower[i] in _TIME_COLUMNS:
                continue
            cell = cells[i]
            if cell in _NA:
                value = np.nan
            else:
                try:
                    value = float(cell)
                except ValueError:
                    value = np.nan
            out["timestamp"].append(ts)
            out["gpu"].append(gpu)
            out["column"].append(name)
            out["value"].append(value)
            out["sample"].append(sample)
    if bad_rows:
        warnings.append(
            f"{bad_rows} line(s) are not dmon samples of the header's columns (cut, wrapped or foreign text): skipped"
        )
    if names is None:
        warnings.append("no dmon header line (# gpu ...): cannot name the columns (was it run with --format noheader?)")
        return _empty(warnings)
    if not out["gpu"]:
        warnings.append("no sample lines")
        return _empty(warnings)
    unit_of = {}
    for i, name in enumerate(names):
        unit_of[name] = units[i] if units and i < len(units) else mapping.get(name, ("", "", 1.0))[1]
    df = pd.DataFrame(out)
    fields = {n: mapping.get(n, ("", "", 1.0)) for n in names}
    df["field"] = df["column"].map(lambda c: fields[c][0])
    df["unit"] = df["column"].map(unit_of)
    df["value"] = df["value"] * df["column"].map(lambda c: fields[c][2])
    df["node"] = node
    df["uuid"] = df["gpu"].map(lambda g: (uuids or {}).get(g, ""))
    for c in ("pci_bus_id", "model", "pod", "namespace", "container", "gpu_i_profile", "gpu_i_id"):
        df[c] = ""
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    if t0 is None and df["timestamp"].isna().all():
        warnings.append("no Date/Time columns (dmon -o DT) and no start= given: timestamps are NaT")
    df = df[DMON_COLUMNS]
    df.attrs["warnings"] = warnings
    return df


def _stamp(date: str | None, clock: str | None, t0: pd.Timestamp | None):
    try:
        if date and clock:
            return pd.Timestamp(datetime.strptime(f"{date} {clock}", "%Y%m%d %H:%M:%S"), tz="UTC")
        if clock and t0 is not None:
            t = datetime.strptime(clock, "%H:%M:%S").time()
            return pd.Timestamp(datetime.combine(t0.date(), t), tz="UTC")
        if date:
            return pd.Timestamp(datetime.strptime(date, "%Y%m%d"), tz="UTC")
    except ValueError:
        return pd.NaT
    return pd.NaT


def dmon_series(df: pd.DataFrame, field: str) -> pd.DataFrame:
    """One DCGM field of a parsed dmon frame in ``SERIES_COLUMNS`` (what ``Source.series`` returns)."""
    part = df[df["field"] == field]
    return part[SERIES_COLUMNS].reset_index(drop=True)
