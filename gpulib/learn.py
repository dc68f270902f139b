"""Helpers for the onboarding lessons (``runbooks/learn/``): every figure a lesson shows is computed here or
read from a data file, so a lesson cannot disagree with the runbooks.

A lesson stays thin::

    lesson = learn.Lesson("learn_cost", source=source, scenario=scenario)
    with lesson.step("Cost on the demo fleet"):
        rep = learn.cost_report(lesson.src, window)
        learn.show_md(learn.md_table(...))
    learn.question("How much idle money?", answer=learn.money(x), why="...")
    lesson.finish()

Self-check questions render with the answer in a collapsed ``<details>`` block (open it after answering).
``lesson.figure(key, value)`` records the headline numbers a lesson computed; ``finish()`` writes them to
``figures.json`` beside the findings file the CLI asks for, so tests can check what the reader saw.
"""
from __future__ import annotations

import html
import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from .errors import GpulibError, InvalidParameter
from .knowledge import data_path, load_table

GIB = 1024 ** 3
#: the CLI sets this for every notebook; a lesson writes ``figures.json`` beside it
FINDINGS_ENV = "GPUOPS_FINDINGS_PATH"


# ------------------------------------------------------------------------------------------- display
def _display_html(text: str) -> None:
    try:
        from IPython.display import HTML, display
    except ImportError:  # plain Python: print the text
        print(text)
        return
    display(HTML(text))


def show_md(text: str) -> None:
    """Display Markdown (in Jupyter and in the exported HTML); print it outside IPython."""
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
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(df: pd.DataFrame | Sequence[Mapping[str, Any]], columns: Sequence[str] | Mapping[str, str] | None = None,
             *, floatfmt: str = ",.1f", max_rows: int | None = None) -> str:
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


def data_table(name: str, columns: Sequence[str] | Mapping[str, str], *, where: Mapping[str, Any] | None = None,
               floatfmt: str = "g") -> str:
    """A Markdown table of a ``gpulib/data`` CSV (optionally filtered ``{column: value or [values]}``)."""
    df = load_table(name)
    for col, val in (where or {}).items():
        vals = val if isinstance(val, (list, tuple, set)) else [val]
        df = df[df[col].isin(list(vals))]
    return md_table(df, columns, floatfmt=floatfmt)


def money(x: float, currency: str = "USD") -> str:
    """``$12,345`` (USD) or ``12,345 EUR``."""
    return f"${x:,.0f}" if currency.upper() == "USD" else f"{x:,.0f} {currency.upper()}"


# ------------------------------------------------------------------------------------ self-check
@dataclass
class SelfCheck:
    """One self-check question; the answer is computed by the lesson and shown collapsed."""

    question: str
    answer: str
    why: str = ""

    def _repr_html_(self) -> str:
        why = f"<p>{html.escape(self.why)}</p>" if self.why else ""
        return ("<div style='border-left:4px solid #6a3d9a;padding:4px 10px;margin:6px 0'>"
                f"<p><b>Self-check.</b> {html.escape(self.question)}</p>"
                f"<details><summary>Show the answer</summary><p><b>{html.escape(self.answer)}</b></p>{why}"
                "</details></div>")

    def __str__(self) -> str:
        return f"Q: {self.question}\nA: {self.answer}" + (f"\n   {self.why}" if self.why else "")


def question(q: str, answer: Any, why: str = "", *, show: bool = True) -> SelfCheck:
    """Render a self-check question with its computed ``answer`` (and ``why``) in a collapsed block."""
    sc = SelfCheck(q, answer if isinstance(answer, str) else _cell(answer, ",.2f"), why)
    if show:
        _display_html(sc._repr_html_())
    return sc


def runbook_ref(name: str, **params: Any) -> str:
    """Markdown pointing at the operational runbook a lesson prepares for: its command and its notebook."""
    cmd = "gpuops run " + name + "".join(f" -p {k} {v}" for k, v in params.items())
    try:
        from .cli import catalogue
        info = catalogue().get(name)
    except GpulibError:
        info = None
    if info is None:
        return f"**Runbook:** `{cmd}` (not in this checkout yet)"
    rel = f"{info.path.parent.name}/{info.path.name}"
    return f"**Runbook:** `{cmd}` — {info.title} (`{rel}`)"


# ------------------------------------------------------------------------------------------ lesson
class Lesson:
    """State of one lesson run: its source (demo scenario selectable), guarded steps, recorded figures."""

    def __init__(self, name: str, *, source: str = "demo", scenario: str = "", **params: Any):
        self.name = name
        self.params = {"source": source, "scenario": scenario, **params}
        self.errors: list[str] = []
        self.figures: dict[str, Any] = {}
        self.src = None
        with self.step("Connect to the data source"):
            self.src = connect(source, scenario)

    @property
    def ok(self) -> bool:
        return self.src is not None

    @contextmanager
    def step(self, what: str):
        """Run a block; a GpulibError becomes a rendered box instead of a traceback."""
        try:
            yield
        except GpulibError as exc:
            self.errors.append(f"{what}: {exc}")
            hint = f"<br><b>What to check:</b> {html.escape(exc.hint)}" if getattr(exc, "hint", "") else ""
            _display_html(f"<div style='border-left:4px solid #b00020;padding:4px 10px'><b>{html.escape(what)} could "
                          f"not run.</b> {html.escape(str(exc).split(' (hint:')[0])}{hint}</div>")

    def figure(self, key: str, value: Any) -> Any:
        """Record a headline figure (saved to ``figures.json``) and return it."""
        self.figures[key] = value
        return value

    def finish(self) -> dict[str, Any]:
        """Write findings JSON (errors only: lessons have no findings) and ``figures.json`` when the CLI asks."""
        path = os.environ.get(FINDINGS_ENV)
        if path:
            from .findings import save_findings
            save_findings([], path, runbook=self.name, parameters=self.params, errors=self.errors)
            Path(path).with_name("figures.json").write_text(json.dumps(self.figures, indent=2, default=str))
        return self.figures


def connect(source: str = "demo", scenario: str = ""):
    """Open a source; for ``demo`` an optional scenario YAML replaces the packaged demo fleet."""
    from . import connect as _connect
    if source == "demo":
        if scenario and not Path(scenario).is_file():
            raise InvalidParameter(f"scenario {scenario!r} is not a file", hint="give a demo fleet YAML like gpulib/data/demo_fleet.yaml")
        return _connect("demo", scenario=scenario or None)
    return _connect(source)


# --------------------------------------------------------------------------- packaged lesson inputs
def lesson_text(name: str) -> str:
    """A captured command output shipped for the lessons (``gpulib/data/learn/<name>``)."""
    return data_path(f"learn/{name}").read_text()
