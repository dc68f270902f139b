"""SOP text from data: one row of a domain's ``<domain>_sop.csv`` filled with the values of one finding.

A domain's findings module writes no SOP sentence of its own (``docs/architecture.md``, "The inner shape of a
domain"): it asks for a row by key and passes the values the row's ``{placeholders}`` name::

    s = sop("nccl_sop", "nvls_disabled", node=node)
    Finding(Severity.WARNING, title, summary=s.summary, sop_step=s.sop_step, commands=s.commands,
            escalation=s.escalation)

Table shape (every column but ``key`` and ``source`` optional): ``key, summary, sop_step, escalation,
commands, source``. ``commands`` holds one command per line. Text cells are filled with
:meth:`str.format_map` (format specs such as ``{share:.0%}`` work); in ``commands`` every value is one shell word
(:func:`gpulib.core.validate.shell_quote`), except a value that is already a placeholder for the reader
(``<pod>``), so a name read from a cluster can never change the command printed around it. A literal brace (a kubectl
jsonpath) is written doubled: ``{{.status.phase}}``. A line that runs on a node starts with ``@node`` or ``@driver``
and is printed as the ``kubectl debug`` line of :mod:`gpulib.core.nodecmd` for the ``node`` value (without a node,
e.g. a MIG layout checked for a GPU model, as the bare command).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pandas as pd

from gpulib.core.errors import GpulibError
from gpulib.core.knowledge import load_table
from gpulib.core.nodecmd import expand, strip_route
from gpulib.core.validate import shell_quote

TEXT_COLUMNS = ("summary", "sop_step", "escalation")


@dataclass(frozen=True)
class Sop:
    """The filled row: the sentences and the commands of one finding."""

    key: str
    summary: str = ""
    sop_step: str = ""
    escalation: str = ""
    commands: list[str] = field(default_factory=list)
    source: str = ""


@lru_cache(maxsize=None)
def _rows(table: str) -> dict[str, dict[str, str]]:
    t = load_table(table)
    if "key" not in t.columns:
        raise GpulibError(
            f"SOP table {table}.csv has no 'key' column",
            hint="columns: key, summary, sop_step, escalation, commands, source",
        )
    keys = t["key"].astype(str).str.strip()
    dup = sorted(set(keys[keys.duplicated()]))
    if dup:
        raise GpulibError(
            f"SOP table {table}.csv: key(s) {dup} appear more than once", hint=f"keep one row per key in {table}.csv"
        )
    out = {}
    for k, row in zip(keys, t.to_dict("records")):
        out[k] = {c: ("" if pd.isna(v) else str(v)) for c, v in row.items()}
    return out


class _Values(dict):
    """Values for a template; a placeholder without a value is a data error naming the table and key."""

    def __init__(self, values: dict[str, Any], where: str):
        super().__init__(values)
        self.where = where

    def __missing__(self, name: str) -> Any:
        raise GpulibError(
            f"{self.where} uses {{{name}}} but the code gives no value for it",
            hint="give the value where the finding is made, or fix the template",
        )


def _quoted(v: Any) -> str:
    s = "" if v is None else str(v)
    return s if s.startswith("<") and s.endswith(">") else shell_quote(s)


def sop(table: str, key: str, **values: Any) -> Sop:
    """The row ``key`` of ``gpulib/data/<domain>/<table>.csv`` with its placeholders filled from ``values``."""
    rows = _rows(table)
    if key not in rows:
        raise GpulibError(f"SOP table {table}.csv has no row {key!r}", hint=f"rows: {', '.join(sorted(rows))}")
    row, where = rows[key], f"{table}.csv row {key!r}"
    texts = {c: row.get(c, "").format_map(_Values(values, where)) for c in TEXT_COLUMNS}
    quoted = _Values({k: _quoted(v) for k, v in values.items()}, where)
    cmds = [ln.strip().format_map(quoted) for ln in row.get("commands", "").splitlines() if ln.strip()]
    node = values.get("node")
    cmds = [expand(c, str(node)) if node not in (None, "") else strip_route(c) for c in cmds]
    return Sop(key, commands=cmds, source=row.get("source", ""), **texts)


def keys(table: str) -> list[str]:
    """The row keys of an SOP table (tests check every key is used and every used key exists)."""
    return sorted(_rows(table))
