"""Knowledge as data: every table lives in ``gpulib/data/<domain>/`` with a ``source`` column.

Code reads tables through :func:`load_table` by bare name (``load_table("xid_catalog")``) and key/value
tables through :func:`settings` (the one settings loader, one error text for an unknown key), so the
alert rules, the triage code and the onboarding lessons all see the same numbers, and a table can move
between domain folders without touching its readers. ``docs/architecture.md`` ("Where knowledge
lives") lists the folders; ``gpulib/data/captures/README.md`` describes the real captures.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from gpulib.core.errors import GpulibError, InvalidParameter, UnknownSetting  # noqa: F401


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
        raise GpulibError(
            f"data file {name!r} is not shipped in gpulib/data/<domain>/",
            hint="reinstall the package, or give the folder: data_path('<domain>/<file>')",
        )
    if len(hits) > 1:
        where = ", ".join(str(h.relative_to(_root())) for h in hits)
        raise GpulibError(
            f"data file name {name!r} is ambiguous: {where}",
            hint="a table name must be unique across gpulib/data/<domain>/; rename one of them",
        )
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


_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


def _typed(text: str) -> int | float | str:
    """A settings cell as a value: whole numbers as ``int``, decimals as ``float``, anything else as text."""
    t = text.strip()
    if _INT.match(t):
        return int(t)
    if _FLOAT.match(t):
        return float(t)
    return t


class Settings(Mapping[str, Any]):
    """The ``key``/``value`` rows of one ``gpulib/data/<domain>/<name>.csv``, values typed (see :func:`settings`).

    Reading an unknown key raises :class:`UnknownSetting` with one text for every table: the file,
    the key and the known keys.
    """

    def __init__(self, name: str, values: dict[str, Any], texts: dict[str, str], where: str = ""):
        self.name = name
        self.where = where or f"gpulib/data/{name}.csv"
        self._values = values
        self._text = texts

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise UnknownSetting(self.where, key, sorted(self._values)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def number(self, key: str) -> float:
        """The value as a float; a non-numeric cell is a data error naming the file and the key."""
        v = self[key]
        if isinstance(v, str):
            raise GpulibError(
                f"{self.where}: setting {key!r} is {v!r}, not a number", hint=f"fix the value column of {self.where}"
            )
        return float(v)

    def text(self, key: str) -> str:
        """The value as written in the file (numbers included), for names, images and durations."""
        self[key]  # an unknown key raises UnknownSetting
        return self._text[key]

    def items_list(self, key: str) -> list[str]:
        """A ``;``-separated value as a list of its non-empty, stripped parts."""
        return [x.strip() for x in self.text(key).split(";") if x.strip()]


@lru_cache(maxsize=None)
def settings(name: str) -> Settings:
    """The one settings loader: ``gpulib/data/<domain>/<name>.csv`` (columns ``key``, ``value``, ``source``, ...) as a
    read-only mapping ``key -> value``, whole numbers as ``int``, decimals as ``float``, other cells as text.

    ``settings("cost_policy")["hours_per_month"]`` -> ``730`` (the table is found in any ``gpulib/data/<domain>/``);
    ``settings("report_policy").text("series_step")``
    -> ``"5m"``. An unknown key raises :class:`UnknownSetting` (the file, the key and the known keys).
    """
    name = name[:-4] if name.endswith(".csv") else name
    t = _load_csv(name + ".csv")
    where = "gpulib/data/" + data_path(name + ".csv").relative_to(_root()).as_posix()
    if "key" not in t.columns or "value" not in t.columns:
        raise GpulibError(
            f"{where} is not a settings table (it needs 'key' and 'value' columns)",
            hint="use load_table() for other tables",
        )
    keys = t["key"].astype(str).str.strip()
    dup = keys[keys.duplicated()]
    if len(dup):
        raise GpulibError(
            f"{where}: key(s) {sorted(set(dup))} appear more than once", hint=f"keep one row per key in {where}"
        )
    texts = ["" if pd.isna(v) else str(v) for v in t["value"]]
    return Settings(
        name, {k: _typed(v) for k, v in zip(keys, texts)}, dict(zip(keys, (v.strip() for v in texts))), where
    )


def threshold(key: str) -> float:
    """One health threshold from ``core/thresholds.csv`` (the single source of truth for alerting and triage)."""
    return settings("thresholds").number(key)


def overhead(key: str) -> float:
    """One memory-sizing constant from ``model_memory_overheads.csv`` (vLLM memory model, MIG sizing)."""
    return settings("model_memory_overheads").number(key)
