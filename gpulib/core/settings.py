"""Every environment variable gpulib reads, declared once (``gpulib/data/core/environment.csv``): its default, whether
it is a secret, which modules read it and what it does. ``docs/settings.md`` is generated from the same table
(:func:`markdown_table`) and a test holds the table against every ``os.environ`` read in the package, as datasette's
``SETTINGS`` and its documentation test do (https://github.com/simonw/datasette/blob/main/datasette/app.py,
``tests/test_docs.py``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from gpulib.core.errors import UnknownSetting
from gpulib.core.knowledge import load_table

TABLE = "core/environment"


@dataclass(frozen=True)
class EnvSetting:
    variable: str
    default: str
    secret: bool
    read_by: tuple[str, ...]
    help: str
    source: str


def environment_settings() -> dict[str, EnvSetting]:
    """variable -> its declaration, in the table's order."""
    df = load_table(TABLE).fillna("")
    return {
        r["variable"]: EnvSetting(
            r["variable"], str(r["default"]), r["secret"] == "yes", tuple(r["read_by"].split()), r["help"], r["source"]
        )
        for r in df.to_dict("records")
    }


def env(variable: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of a declared ``variable`` (its declared default when unset or empty); UnknownSetting for a variable
    the table does not declare, so a new one cannot be read without being documented."""
    known = environment_settings()
    if variable not in known:
        raise UnknownSetting(f"gpulib/data/{TABLE}.csv", variable, list(known))
    return (os.environ if environ is None else environ).get(variable) or known[variable].default


def markdown_table() -> str:
    """The table of docs/settings.md."""
    rows = ["| variable | default | secret | read by | what it does |", "|---|---|---|---|---|"]
    for s in environment_settings().values():
        read = ", ".join(f"`{p}`" for p in s.read_by)
        rows.append(
            f"| `{s.variable}` | {('`' + s.default + '`') if s.default else '–'} | {'yes' if s.secret else 'no'} "
            f"| {read} | {s.help} |"
        )
    return "\n".join(rows) + "\n"
