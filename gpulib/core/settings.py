"""Every environment variable gpulib reads, declared once (``gpulib/data/core/environment.csv``): its default, whether
it is a secret, which modules read it and what it does. ``docs/settings.md`` is generated from the same table
(:func:`markdown_table`) and a test holds the table against every ``os.environ`` read in the package, as datasette's
``SETTINGS`` and its documentation test do (https://github.com/simonw/datasette/blob/main/datasette/app.py,
``tests/test_docs.py``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from gpulib.core.errors import UnknownSetting
from gpulib.core.knowledge import load_table

TABLE = "core/environment"
#: the run engine sets this in a run's kernel: the file the notebook writes its findings to (gpulib.run.record)
FINDINGS_ENV = "GPUOPS_FINDINGS_PATH"
#: how a run's HTML ships plotly.js when its ``charts`` parameter does not say (gpulib.runbook.show); the run engine
#: sets it in the kernel of a run whose caller chose (gpuops serve and gpuops demo: "shared")
CHARTS_ENV = "GPUOPS_CHARTS"


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


#: the options of ``gpuops serve``, declared once: the command line (gpulib/serve/command.py) and ServeConfig
#: (gpulib/serve/config.py) read their defaults and help from this table
SERVE_OPTIONS = "serve/serve_options"
#: the Python type of each ``type`` of that table
_TYPES = {"str": str, "int": int, "path": Path}


@dataclass(frozen=True)
class ServeOption:
    name: str
    #: the command line's names (default ``--name-with-dashes``)
    flags: tuple[str, ...]
    type: type
    #: the typed default; None for an option without one (its help says what stands in)
    default: Any
    #: the environment variable the option stands in for, if any (declared in environment.csv)
    env: str
    help: str


def serve_options() -> dict[str, ServeOption]:
    """name -> its declaration, in the table's order."""
    out = {}
    for r in load_table(SERVE_OPTIONS).fillna("").to_dict("records"):
        kind = _TYPES[r["type"]]
        raw = str(r["default"])
        default = None if raw == "" else (kind(int(float(raw))) if kind is int else kind(raw))
        flags = tuple(str(r["flags"]).split()) or (f"--{r['option'].replace('_', '-')}",)
        out[r["option"]] = ServeOption(r["option"], flags, kind, default, str(r["env"]), str(r["help"]))
    return out


def serve_options_table() -> str:
    """The table of gpuops serve's options in docs/settings.md."""
    rows = ["| option | default | environment | what it does |", "|---|---|---|---|"]
    for o in serve_options().values():
        default = "–" if o.default is None else f"`{o.default}`"
        what = o.help.replace("|", "\\|")  # a cell's own bar, escaped (GitHub-flavoured markdown tables)
        rows.append(f"| `{' '.join(o.flags)}` | {default} | {('`' + o.env + '`') if o.env else '–'} | {what} |")
    return "\n".join(rows) + "\n"
