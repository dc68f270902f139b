"""Knowledge as data: every table lives in ``gpulib/data/<domain>/`` with a ``source`` column.

Code reads tables through :func:`load_table` by bare name (``load_table("xid_catalog")``), so the
alert rules, the triage code and the onboarding lessons all see the same numbers, and a table can move
between domain folders without touching its readers. ``docs/architecture.md`` ("Where knowledge
lives") lists the folders; ``gpulib/data/captures/README.md`` describes the real captures.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import pandas as pd

from gpulib.core.errors import GpulibError, InvalidParameter


def _root() -> Path:
    return Path(str(resources.files("gpulib") / "data"))


@lru_cache(maxsize=None)
def _index() -> dict[str, tuple[Path, ...]]:
    """File name -> every path under ``gpulib/data/*/`` with that name (one folder level)."""
    found: dict[str, list[Path]] = {}
    for p in sorted(_root().glob("*/*")):
        if p.is_file():
            found.setdefault(p.name, []).append(p)
    return {k: tuple(v) for k, v in found.items()}


def data_path(name: str) -> Path:
    """Path of a file shipped in ``gpulib/data``.

    ``name`` is either a path relative to ``gpulib/data`` (``"captures/h200_smi_h.txt"``) or a bare file
    name (``"operator_sop.yaml"``) that is looked up in every domain folder; a bare name found in two
    folders is an error (rename one), never a silent pick.
    """
    if "/" in name:
        p = _root() / name
        if not p.is_file():
            raise GpulibError(f"data file {name!r} is not shipped in gpulib/data", hint="reinstall the package")
        return p
    hits = _index().get(name, ())
    if not hits:
        raise GpulibError(f"data file {name!r} is not shipped in gpulib/data/<domain>/",
                          hint="reinstall the package, or give the folder: data_path('<domain>/<file>')")
    if len(hits) > 1:
        where = ", ".join(str(h.relative_to(_root())) for h in hits)
        raise GpulibError(f"data file name {name!r} is ambiguous: {where}",
                          hint="a table name must be unique across gpulib/data/<domain>/; rename one of them")
    return hits[0]


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
    """Load the table ``<name>.csv`` from its ``gpulib/data/<domain>/`` folder (a copy; callers may modify it).

    ``name`` is the bare table name (``"xid_catalog"``) or ``"<domain>/<name>"``.
    """
    if not name.endswith(".csv"):
        name += ".csv"
    return _load_csv(name).copy()


def threshold(key: str) -> float:
    """One health threshold from ``core/thresholds.csv`` (the single source of truth for alerting and triage)."""
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
