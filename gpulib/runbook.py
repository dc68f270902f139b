"""Notebook plumbing shared by every runbook: connect, guarded steps, charts, the SOP cell, findings JSON.

A runbook stays thin::

    rb = nb.Runbook("fleet_overview", source=source, snapshot_dir=snapshot_dir, window=window)
    with rb.step("Metric preflight"):
        caps = rb.src.preflight(window)
    ...
    rb.finish(findings)          # renders the Recommended SOP step and writes findings JSON

A step that hits a :class:`~gpulib.core.errors.GpulibError` (Prometheus down, unknown node, empty
series...) does not stop the notebook: it renders what is missing and what to check, and the error
is recorded so the CLI exits non-zero.
"""

from __future__ import annotations

import ast
import html
import json
import os
import re
import shlex
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterable

import pandas as pd

import gpulib.core.verdict_block as verdict_block
from gpulib import connect
from gpulib.catalogue import find_notebook
from gpulib.core.errors import GpulibError, InvalidParameter
from gpulib.core.findings import Finding, FindingList, Severity, save_findings, sort_findings
from gpulib.core.money import human_number
from gpulib.core.plotlyjs import charts_mode, plotly_loader
from gpulib.core.redact import redact
from gpulib.core.settings import FINDINGS_ENV
from gpulib.core.sop import sop
from gpulib.core.svgchart import svg_html
from gpulib.inspection import PLOTLY_JS_MODES, choose_source, params_from_env

#: True while a Runbook runs without a notebook (:func:`quiet`): nothing is displayed or printed. A context
#: variable, so a server's verdict threads and the notebooks of the same process do not silence each other.
_QUIET: ContextVar[bool] = ContextVar("gpuops_runbook_quiet", default=False)


@contextmanager
def quiet():
    """Run a :class:`Runbook` headless (:mod:`gpulib.run.verdict`): its steps, errors and findings as in a notebook, its
    notes, tables and verdict box shown nowhere."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _display(obj: Any = None, *, html_text: str | None = None, bundle: dict | None = None) -> None:
    if _QUIET.get():
        return
    try:
        from IPython.display import HTML, display
    except ImportError:  # plain Python (tests, CLI): print text
        if html_text is not None:
            print(html_text)
        elif obj is not None:
            print(obj.as_text() if hasattr(obj, "as_text") else obj)
        return
    if bundle is not None:
        display(bundle, raw=True)
    elif html_text is not None:
        display(HTML(html_text))
    else:
        display(obj)


def _cell(v: Any) -> str:
    """One table cell as an engineer reads it: no NaN/None/<NA>, no dict or list repr."""
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_cell(x)}" for k, x in v.items()) or "–"
    if isinstance(v, (list, tuple, set, frozenset)):
        return ", ".join(_cell(x) for x in v) or "–"
    try:
        if v is None or (not hasattr(v, "__len__") and pd.isna(v)):
            return "–"
    except (TypeError, ValueError):
        pass
    if isinstance(v, float):
        return human_number(v)
    if isinstance(v, str) and v[:1] in "{[" and v[-1:] in "}]":  # a dict/list already turned into its repr
        try:
            parsed = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            return v
        return _cell(parsed) if isinstance(parsed, (dict, list, tuple, set)) else v
    return str(v)


def table_html(df) -> str:
    """A DataFrame as HTML for a report: every cell through :func:`_cell`, text never cut, no pandas index
    column (a meaningful index becomes an ordinary first column)."""
    if not isinstance(df.index, pd.RangeIndex) or df.index.name:
        df = df.reset_index()
    shown = df.astype(object).map(_cell) if hasattr(df, "map") else df.astype(object).applymap(_cell)
    with pd.option_context("display.max_colwidth", None):
        return shown.to_html(index=False, escape=True, border=0, classes="dataframe gpuops-table")


def _install_table_formatter() -> None:
    """In a kernel, render every displayed DataFrame with :func:`table_html` (IPython display formatters:
    https://ipython.readthedocs.io/en/stable/config/integrating.html#formatters-for-third-party-types)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.display_formatter.formatters["text/html"].for_type(pd.DataFrame, table_html)


_install_table_formatter()

_PLOTLY_JS_SENT = False
#: how exported HTML gets plotly.js (:data:`gpulib.inspection.PLOTLY_JS_MODES`): "inline" (once per report, opens
#: offline, ~5 MB), "cdn" (a <script> from cdn.plot.ly at the package's plotly.js version: small enough to e-mail) or
#: "shared" (a <script> to the one copy beside the run folders, :func:`gpulib.core.plotlyjs.write_plotly_js`: a run
#: store or `gpuops demo` keeps plotly.js once). Empty: the run's way (:data:`gpulib.core.settings.CHARTS_ENV`, else
#: inline)
_PLOTLY_JS_MODE = ""


def plotly_js(mode: str) -> None:
    """Choose how :func:`show` ships plotly.js in the exported HTML (see :data:`PLOTLY_JS_MODES`; empty: the run's
    way)."""
    global _PLOTLY_JS_MODE
    if mode and mode not in PLOTLY_JS_MODES:
        raise InvalidParameter(f"charts={mode!r}: use one of {', '.join(PLOTLY_JS_MODES)}")
    _PLOTLY_JS_MODE = mode


def static_beside(static: str, live: str, loader: str = "") -> str:
    """A chart's static SVG and its interactive version: without JavaScript the static one shows (the interactive
    one stays hidden); with it, a script placed before plotly's draws swaps them before plotly draws
    (https://developer.mozilla.org/en-US/docs/Web/API/Document/currentScript), once plotly.js is there: ``loader``
    (the page's first chart) loads it before the swap, and a page whose plotly.js did not load (a shared copy left
    behind, no network for the CDN) keeps the static chart."""
    swap = (
        "<script>(function(s){if(!window.Plotly)return;var l=s.parentNode;l.style.display='block';"
        "l.previousElementSibling.style.display='none';})(document.currentScript)</script>"
    )
    return (
        f"<div class='gpuops-chart'><div class='gpuops-static'>{static}</div>"
        f"<div class='gpuops-live' style='display:none'>{loader}{swap}{live}</div></div>"
    )


def show(fig) -> None:
    """Display a plotly figure so that it renders in JupyterLab *and* in an exported HTML report.

    The bundle carries plotly's own MIME type (JupyterLab) and HTML (nbconvert) that loads plotly.js once per kernel
    in the run's way (:func:`plotly_js`): inline by default, so an exported report needs no network. ``None`` (a
    chart function with nothing to draw) shows nothing, and a sentence (a chart function saying why a chart would
    carry no information, e.g. :func:`gpulib.xid.runbook.memory_chart` on counters that never moved) is shown as a
    note, so a cell stays one call.
    """
    global _PLOTLY_JS_SENT
    if fig is None:
        return
    if isinstance(fig, str):
        note(fig, "info")
        return
    spec = json.loads(fig.to_json())
    loader = "" if _PLOTLY_JS_SENT else plotly_loader(charts_mode(_PLOTLY_JS_MODE))
    html_text = static_beside(
        svg_html(spec), fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False}), loader
    )
    _PLOTLY_JS_SENT = True
    _display(
        bundle={
            "application/vnd.plotly.v1+json": spec,
            "text/html": html_text,
            "text/plain": f"<{fig.layout.title.text or 'figure'}>",
        }
    )


def note(text: str, level: str = "info") -> None:

    text = redact(text)
    colour = {"info": "#1f5fa8", "warning": "#b36b00", "error": "#b00020", "ok": "#1b7f3b"}.get(level, "#1f5fa8")
    _display(html_text=f"<div style='border-left:4px solid {colour};padding:4px 10px'>{text}</div>")


@contextmanager
def guarded_step(what: str, errors: list[str], usage: list[str] | None = None):
    """Run a block; a :class:`GpulibError` is appended to ``errors`` and rendered as a box saying what is
    missing and what to check, instead of a traceback that stops the notebook. An
    :class:`~gpulib.core.errors.InvalidParameter` (a parameter that matches nothing) also goes to ``usage``,
    so the CLI exits 2 (bad usage) rather than 3 (data missing)."""
    try:
        yield
    except GpulibError as exc:
        errors.append(redact(f"{what}: {exc}"))
        if usage is not None and isinstance(exc, InvalidParameter):
            usage.append(redact(str(exc)))
        hint = f"<br><b>What to check:</b> {html.escape(exc.hint)}" if exc.hint else ""
        note(f"<b>{html.escape(what)} could not run.</b> {html.escape(str(exc).split(' (hint:')[0])}{hint}", "error")


def _verdict_box(html_text: str, display_id: str, *, update: bool = False) -> None:
    """The verdict shown at the top of the notebook: displayed with a display id when the run starts and
    updated in place by :meth:`Runbook.finish` (Jupyter ``update_display_data``, which nbclient/papermill apply
    to the stored output: https://ipython.readthedocs.io/en/stable/api/generated/IPython.display.html)."""
    if _QUIET.get():
        return
    try:
        from IPython.display import HTML, display, update_display
    except ImportError:
        print(html_text)
        return
    if update:
        update_display(HTML(html_text), display_id=display_id)
    else:
        display(HTML(html_text), display_id=display_id)


def verdict_html(top: Finding | None, rb: "Runbook", others: Iterable[Finding] = (), *, report: bool = False) -> str:
    """The verdict block of the page (:func:`gpulib.core.verdict_block.verdict_html`)."""
    return verdict_block.verdict_html(top, rb.rerun_command(), others, report=report)


# : parameter names never repeated in a printed command (tests/runbooks/test_notebooks.py also keeps them out of
# notebooks)
_SECRET_NAME = re.compile(r"token|password|secret|credential", re.I)


def _kernel_namespace() -> dict:
    """The notebook's globals when running in a kernel: where papermill's injected-parameters cell put the values
    (https://papermill.readthedocs.io/en/latest/usage-parameterize.html); empty outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    ip = get_ipython()
    return getattr(ip, "user_ns", None) or {}


def _parameters_used(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of notebook ``name`` (its cell tagged ``parameters``, :mod:`gpulib.catalogue`) with the
    value used: what the notebook passed to :class:`Runbook`, else what the kernel holds after papermill's
    injection, else the notebook default; then anything passed that the parameters cell does not name."""
    declared = params_from_env(name)  # what the run engine read with papermill, else read it here
    if declared is None:
        try:
            declared = find_notebook(name).params
        except GpulibError:  # not a catalogued notebook (a test's planted runbook): what was passed is all there is
            declared = []
    ns = _kernel_namespace()
    out = {p.name: given[p.name] if p.name in given else ns.get(p.name, p.default) for p in declared}
    out.update({k: v for k, v in given.items() if k not in out})
    return out


def _is_empty(v: Any) -> bool:
    """An empty result: ``""``, ``0``, ``False`` (numpy's too), an empty container, DataFrame or Series; any
    other object is a result."""
    if hasattr(v, "empty") and hasattr(v, "shape"):  # pandas frame or series
        return bool(v.empty)
    if isinstance(v, (str, bytes, int, float, list, tuple, dict, set, frozenset)) or getattr(v, "shape", None) == ():
        return not v
    return False


def _param_text(v: Any) -> str:
    """A value as ``gpuops run -p`` reads it back (:func:`gpulib.catalogue.coerce`): lists comma-joined."""
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


class Runbook:
    """State of one runbook execution: its source, the steps that failed, and its findings."""

    def __init__(self, name: str, *, source: str = "demo", snapshot_dir: str = "", **params: Any):
        self.name = name
        self.params = _parameters_used(name, {"source": source, "snapshot_dir": snapshot_dir, **params})
        self.errors: list[str] = []
        self.usage_errors: list[str] = []
        self.findings: list[Finding] = []
        #: names of the steps that hit a GpulibError, in order (:meth:`ready` names the last one)
        self.failed_steps: list[str] = []
        self.src = None
        self._verdict_id = f"gpuops-verdict-{name}-{id(self):x}"
        _verdict_box(
            "<h3>Verdict</h3><p>Computing: the verdict replaces this line when the run ends "
            "(if it stays, the run stopped before its last cell).</p>",
            self._verdict_id,
        )
        note("Run it: <code>" + html.escape(self.rerun_command()) + "</code>")
        with self.step("Connect to the data source"):
            choice = choose_source(source, snapshot_dir)  # the same rules as gpuops run --source / --snapshot
            self.src = connect(choice.name, **choice.connect_kwargs(params))
            note(f"Source: <b>{html.escape(self.src.describe())}</b> · window end {self.src.end:%Y-%m-%d %H:%M} UTC")

    def _is_report(self) -> bool:
        """A report (``reports/``): its page opens with the actions ranked by money."""
        try:
            return find_notebook(self.name).kind == "report"
        except GpulibError:
            return False

    def rerun_command(self) -> str:
        """The ``gpuops run`` line that repeats this execution: every parameter with the value used (see
        :func:`_parameters_used`), defaults and empty values included, so it still repeats the run after a
        notebook default changes; values are shell-quoted and configured secrets masked."""
        src = self.params.get("source", "demo")
        parts = ["gpuops", "run", self.name, "--source", str(src)]
        if src == "snapshot" and self.params.get("snapshot_dir"):
            parts += ["--snapshot", str(self.params["snapshot_dir"])]
        for k, v in self.params.items():
            if k not in ("source", "snapshot_dir") and v is not None and not _SECRET_NAME.search(k):
                parts += ["-p", k, _param_text(v)]
        return redact(" ".join(shlex.quote(p) for p in parts))

    @property
    def ok(self) -> bool:
        return self.src is not None

    @contextmanager
    def step(self, what: str):
        """Run a block; a GpulibError becomes a rendered 'missing data' box instead of a traceback."""
        before = len(self.errors)
        with guarded_step(what, self.errors, self.usage_errors):
            yield
        if len(self.errors) > before:
            self.failed_steps.append(what)

    def ready(self, *needs: Any, why: str = "") -> bool:
        """Whether a section can run: every earlier result it ``needs`` is there (none given: the data source).
        When not, the section says why it shows nothing instead of rendering empty: a result that is ``None``
        comes from a step that could not run (named; its box above says why), one that is empty (``""``,
        ``[]``, ``0``, an empty frame) means there is nothing to show, for the reason ``why``."""
        needs = needs or (self.src,)
        failed = (
            f"the step <b>{html.escape(self.failed_steps[-1])}</b> could not run (see its box above)"
            if self.failed_steps
            else "an earlier step did not run"
        )
        if any(n is None for n in needs):
            note(
                "Not checked: no data source (the box at the top says why)."
                if self.src is None
                else f"Not checked: {failed}, and this section needs its result.",
                "warning",
            )
            return False
        if any(_is_empty(n) for n in needs):
            note(
                "Nothing to show: "
                + html.escape(why or "the earlier steps found nothing for this section.")
                + (f" Also, {failed}." if self.failed_steps else ""),
                "info",
            )
            return False
        return True

    def add(self, findings: Iterable[Finding] | Finding | None) -> None:
        if findings is None:
            return
        if isinstance(findings, Finding):
            findings = [findings]
        self.findings.extend(findings)

    def report(self, findings: Iterable[Finding] | Finding | None, *, empty: str) -> list[Finding]:
        """Add ``findings`` and show them in the current section; with none, say why (``empty``: what was
        checked and found fine), so no section renders empty."""
        fs = [findings] if isinstance(findings, Finding) else list(findings or [])
        self.add(fs)
        if fs:
            _display(FindingList(sort_findings(fs)))
        else:
            note(html.escape(empty), "ok")
        return fs

    def finish(
        self,
        findings: Iterable[Finding] | None = None,
        *,
        combine=None,
        save: bool = True,
        steps: dict[str, str] | None = None,
        inputs: list[str] | None = None,
    ) -> FindingList:
        """Render the 'Recommended SOP step' (top finding first) and save findings as JSON (where the run's
        environment says; ``save=False``: not at all, for a headless verdict, :mod:`gpulib.run.verdict`); ``combine``
        (e.g. :func:`gpulib.fleet.merge_findings`) folds symptom findings into their root cause first."""
        if findings is not None:
            self.add(findings)
        if combine is not None:
            self.findings = list(combine(self.findings))
        for f in self.findings:  # "Next runbook" never points at the runbook being read
            if f.runbook == self.name:
                f.runbook = None
        fl = FindingList(sort_findings(self.findings))
        if self.usage_errors:
            s = sop("core_sop", "bad_parameter")
            fl.insert(
                0,
                Finding(
                    Severity.CRITICAL,
                    "Runbook incomplete: bad parameter: " + self.usage_errors[0].split(" (hint:")[0],
                    category="usage",
                    summary=s.summary,
                    evidence=list(self.usage_errors),
                    sop_step=s.sop_step,
                ),
            )
        elif self.errors:
            s = sop("core_sop", "missing_data")
            fl.insert(
                0,
                Finding(
                    Severity.CRITICAL if self.src is None else Severity.WARNING,
                    f"Runbook incomplete: {len(self.errors)} step(s) could not get data",
                    category="data",
                    summary=s.summary,
                    evidence=list(self.errors),
                    sop_step=s.sop_step,
                    commands=[self.rerun_command()],
                ),
            )
        top = fl[0] if fl else None
        if top is None:
            _display(
                html_text=(
                    "<h3>Recommended SOP step</h3><p><b style='color:#1b7f3b'>No action needed.</b> No findings.</p>"
                )
            )
        else:
            _display(  # the top finding is the verdict at the top of the page: shown once
                html_text="<h3>Recommended SOP step</h3><p>The top finding's step is "
                "<a href='#verdict'>the verdict at the top of the page</a>.</p>"
                + (f"<h4>Other findings ({len(fl) - 1})</h4>" if len(fl) > 1 else "")
            )
            if len(fl) > 1:
                _display(FindingList(fl[1:]))
        _verdict_box(verdict_html(top, self, fl[1:], report=self._is_report()), self._verdict_id, update=True)
        path = os.environ.get(FINDINGS_ENV) if save else None
        if path:
            save_findings(
                fl,
                path,
                runbook=self.name,
                parameters=self.params,
                errors=self.errors,
                usage_errors=self.usage_errors,
                steps=steps,
                inputs=inputs,
            )
        return fl
