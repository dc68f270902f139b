"""How a lesson shows things: Markdown and HTML (in Jupyter, in the exported HTML, printed outside IPython, silent in a
quiet run), Markdown tables, and self-check questions whose answer and explanation sit in a collapsed block.
:func:`recording` collects what a lesson shows instead, for a run outside a notebook (tests)."""

from __future__ import annotations

import html
import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table
from gpulib.runbook import _QUIET


# ------------------------------------------------------------------------------------------- display
def show_html(text: str) -> None:
    """Display trusted HTML built by the lessons (escaped inside), e.g. follow-up questions."""
    _display_html(text)


#: what a lesson shows, collected instead of displayed inside :func:`recording`
_SHOWN: ContextVar[list | None] = ContextVar("gpuops_lesson_shown", default=None)


@contextmanager
def recording():
    """Collect what a lesson run shows, as ``("markdown" | "html", text)`` and ``("check", SelfCheck)`` pairs in
    the order shown, instead of displaying it: a lesson run outside a notebook, checked by what its reader sees."""
    shown: list = []
    token = _SHOWN.set(shown)
    try:
        yield shown
    finally:
        _SHOWN.reset(token)


def _display_html(text: str) -> None:
    rec = _SHOWN.get()
    if rec is not None:
        rec.append(("html", text))
        return
    if _QUIET.get():  # a lesson run without a notebook (tests, gpulib.run.notebook.Session in-process)
        return
    try:
        from IPython.display import HTML, display
    except ImportError:  # plain Python: print the text
        print(text)
        return
    display(HTML(text))


def show_md(text: str) -> None:
    """Display Markdown (in Jupyter and in the exported HTML); print it outside IPython; nothing when quiet."""
    rec = _SHOWN.get()
    if rec is not None:
        rec.append(("markdown", text))
        return
    if _QUIET.get():
        return
    try:
        from IPython.display import Markdown, display
    except ImportError:
        print(text)
        return
    display(Markdown(text))


def _cell(v: Any, floatfmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        text = format(v, floatfmt)
    elif isinstance(v, (list, tuple, set)):
        text = ", ".join(map(str, v))
    else:
        text = str(v)
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def md_table(
    df: pd.DataFrame | Sequence[Mapping[str, Any]],
    columns: Sequence[str] | Mapping[str, str] | None = None,
    *,
    floatfmt: str = ",.1f",
    max_rows: int | None = None,
) -> str:
    """A Markdown table from a DataFrame (or list of dicts). ``columns``: names to keep, or {name: header}."""
    if not isinstance(df, pd.DataFrame):
        df = pd.DataFrame(list(df))
    if columns is None:
        columns = {c: c for c in df.columns}
    elif not isinstance(columns, Mapping):
        columns = {c: c for c in columns}
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InvalidParameter(f"md_table: columns {missing} not in the frame; it has {list(df.columns)}")
    rows = df if max_rows is None else df.head(max_rows)
    out = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    for rec in rows[list(columns)].itertuples(index=False):
        out.append("| " + " | ".join(_cell(v, floatfmt) for v in rec) + " |")
    if max_rows is not None and len(df) > max_rows:
        out.append(f"\n_{len(df) - max_rows} more rows not shown._")
    return "\n".join(out)


def data_table(
    name: str,
    columns: Sequence[str] | Mapping[str, str],
    *,
    where: Mapping[str, Any] | None = None,
    floatfmt: str = "g",
) -> str:
    """A Markdown table of a ``gpulib/data`` CSV (optionally filtered ``{column: value or [values]}``)."""
    df = load_table(name)
    for col, val in (where or {}).items():
        vals = val if isinstance(val, (list, tuple, set)) else [val]
        df = df[df[col].isin(list(vals))]
    return md_table(df, columns, floatfmt=floatfmt)


# ------------------------------------------------------------------------------------ self-check
@dataclass
class SelfCheck:
    """One self-check question; the answer is computed by the lesson and shown collapsed."""

    question: str
    answer: str
    why: str = ""

    def _repr_html_(self) -> str:
        why = f"<p>{html.escape(self.why)}</p>" if self.why else ""
        return (
            "<div style='border-left:4px solid #6a3d9a;padding:4px 10px;margin:6px 0'>"
            f"<p><b>Self-check.</b> {html.escape(self.question)}</p>"
            f"<details><summary>Show the answer</summary><p><b>{html.escape(self.answer)}</b></p>{why}"
            "</details></div>"
        )

    def __str__(self) -> str:
        return f"Q: {self.question}\nA: {self.answer}" + (f"\n   {self.why}" if self.why else "")


def question(q: str, answer: Any, why: str = "", *, show: bool = True) -> SelfCheck:
    """Render a self-check question with its computed ``answer`` (and ``why``) in a collapsed block."""
    sc = SelfCheck(q, answer if isinstance(answer, str) else _cell(answer, ",.2f"), why)
    rec = _SHOWN.get()
    if show and rec is not None:
        rec.append(("check", sc))
    elif show:
        _display_html(sc._repr_html_())
    return sc
