"""Knowledge as data (design.md §3): every table lives in ``gpulib/data`` with a ``source`` column.

Code reads tables through :func:`load_table`, so the alert rules, the triage code and the
onboarding notebooks all see the same numbers.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import pandas as pd

from gpulib.core.errors import GpulibError, InvalidParameter


def data_path(name: str) -> Path:
    """Path of a file shipped in ``gpulib/data``."""
    p = Path(str(resources.files("gpulib") / "data" / name))
    if not p.exists():
        raise GpulibError(f"data file {name!r} is not shipped in gpulib/data", hint="reinstall the package")
    return p


@lru_cache(maxsize=None)
def _load_csv(name: str) -> pd.DataFrame:
    df = pd.read_csv(data_path(name), comment=None, keep_default_na=True)
    if "source" not in df.columns:
        raise GpulibError(f"data file {name} has no 'source' column")
    missing = df["source"].isna() | (df["source"].astype(str).str.strip() == "")
    if missing.any():
        raise GpulibError(f"data file {name}: rows {list(df.index[missing])} have no source")
    return df


def load_table(name: str) -> pd.DataFrame:
    """Load ``gpulib/data/<name>.csv`` (a copy; callers may modify it)."""
    if not name.endswith(".csv"):
        name += ".csv"
    return _load_csv(name).copy()


def threshold(key: str) -> float:
    """One health threshold from ``thresholds.csv`` (the single source of truth for alerting and triage)."""
    t = load_table("thresholds").set_index("key")
    if key not in t.index:
        raise GpulibError(f"no threshold named {key!r}; known: {', '.join(sorted(t.index))}")
    return float(t.loc[key, "value"])


@lru_cache(maxsize=1)
def _overheads() -> dict[str, float]:
    t = load_table("model_memory_overheads")
    return {k: float(v) for k, v in zip(t["key"], t["value"])}


def overhead(key: str) -> float:
    """One memory-sizing constant from ``model_memory_overheads.csv`` (vLLM memory model, MIG sizing)."""
    o = _overheads()
    if key not in o:
        raise InvalidParameter(f"no overhead named {key!r}; known: {', '.join(sorted(o))}")
    return o[key]
