"""The kernel side of a run: a notebook renders the steps of its runbook's definition, one cell each.

A runbook notebook holds its parameters cell (generated from ``RUNBOOK.params``), prose, and three kinds of code
cell::

    from gpulib.run.notebook import start
    from gpulib.xid.steps import RUNBOOK
    rb = start(RUNBOOK, globals())      # connect to the source; the verdict box at the top
    rb.step("Meaning")                  # one per step, under its heading
    findings = rb.finish()              # the verdict and the Recommended SOP step

The same :class:`Session` runs headless for :mod:`gpulib.run.verdict` (``headless=True``: every step's ``gather``
and no ``show``; no step with ``effects`` and none that only shows), so the notebook and the fast verdict are one
code path.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Mapping, MutableMapping

from gpulib.core.findings import FindingList
from gpulib.core.runbook import LESSON, Context, Runbook
from gpulib.inspection import CHARTS_PARAM
from gpulib.run.catalogue import context
from gpulib.run.diff import save_figures
from gpulib.run.evidence import STEP as EVIDENCE_STEP
from gpulib.run.evidence import check, finding_inputs, needs, watch
from gpulib.runbook import Runbook as _Engine
from gpulib.runbook import _display, note, plotly_js, show

#: what a step's outcome is recorded as (:attr:`Session.outcomes`)
RAN, FAILED, NOT_CHECKED, NOTHING, NOT_RUN = "ran", "failed", "not checked", "nothing to show", "not run headless"
#: the parameters :class:`gpulib.runbook.Runbook` takes by name rather than among the others
_CONNECT = ("source", "snapshot_dir")
#: the engine of a definition whose kind is not a runbook's (``module:class``): a lesson connects with its demo
#: scenario, records figures and ends without a verdict (:mod:`gpulib.learn.session`)
_ENGINES = {LESSON: "gpulib.learn.session:LessonEngine"}


class NotebookUI:
    """The display functions a step's ``show`` gets (:class:`gpulib.core.runbook.UI`)."""

    @staticmethod
    def note(text: str, level: str = "info") -> None:
        note(text, level)

    @staticmethod
    def show(fig: Any) -> None:
        show(fig)

    @staticmethod
    def display(obj: Any) -> None:
        _display(obj)

    @staticmethod
    def print(*parts: Any) -> None:
        print(*parts)


def _shower(ref: Callable | str) -> Callable:
    """A step's ``show``: the function, or the one a ``"module:function"`` reference names."""
    if callable(ref):
        return ref
    mod, _, name = ref.partition(":")
    return getattr(import_module(mod), name)


class Session:
    """One run of ``runbook`` over the names in ``ns`` (the kernel's globals in a notebook)."""

    def __init__(
        self,
        runbook: Runbook,
        ns: MutableMapping[str, Any],
        *,
        headless: bool = False,
        extra: Mapping[str, Any] | None = None,
    ):
        self.runbook = runbook
        self.headless = headless
        self.ctx = Context(ns)
        for k, v in (extra or {}).items():
            ns.setdefault(k, v)
        params = {p.name: ns.get(p.name, p.default) for p in runbook.params}
        for k, v in params.items():
            ns.setdefault(k, v)
        engine = _shower(_ENGINES[runbook.kind]) if runbook.kind in _ENGINES else _Engine
        self.engine = engine(
            runbook.name,
            source=params.get("source", "demo"),
            snapshot_dir=params.get("snapshot_dir", ""),
            **{k: v for k, v in params.items() if k not in _CONNECT},
        )
        ns["src"] = self.engine.src
        #: what the source returned with data, input by input (:mod:`gpulib.run.evidence`)
        self.reads = watch(self.engine.src)
        if runbook.kind == LESSON:
            ns["figures"] = self.engine.figures
        if not headless and CHARTS_PARAM in params:
            plotly_js(params[CHARTS_PARAM])
        #: step title -> what happened to it (:data:`RAN`, :data:`FAILED`, ...), in the order the steps were asked
        self.outcomes: dict[str, str] = {}
        if runbook.start is not None:
            for k, v in runbook.start(self.ctx).items():
                ns[k] = v

    @property
    def src(self):
        return self.engine.src

    @property
    def errors(self) -> list[str]:
        return self.engine.errors

    @property
    def usage_errors(self) -> list[str]:
        return self.engine.usage_errors

    @property
    def params(self) -> dict[str, Any]:
        return self.engine.params

    def step(self, title: str) -> None:
        """Run the step ``title``: its ``needs`` checked (a missing one says why the section shows nothing), its
        ``gather`` inside the engine's guard (a GpulibError becomes a 'could not run' box and a recorded error),
        then its ``show`` (notebook only)."""
        s = self.runbook.step(title)
        if self.headless and (s.effects or s.gather is None):
            self.outcomes[title] = NOT_RUN
            return
        if s.needs:
            got = [self.ctx.get(n) for n in s.needs]
            if not self.engine.ready(*got, why=s.why):
                self.outcomes[title] = NOT_CHECKED if any(g is None for g in got) else NOTHING
                return
        before = len(self.engine.errors)
        with self.engine.step(title):
            out = s.gather(self.ctx) if s.gather is not None else None
            if isinstance(out, Mapping):
                self.ctx.update(out)
            if not self.headless and s.show is not None:
                _shower(s.show)(self.ctx, NotebookUI)
        self.outcomes[title] = FAILED if len(self.engine.errors) > before else RAN

    def run_all(self) -> None:
        for s in self.runbook.steps:
            self.step(s.title)

    def inputs(self) -> list[str]:
        """The inputs the verdict rests on: those of every step that ran, in step order, each once."""
        out: list[str] = []
        for s in self.runbook.steps:
            if self.outcomes.get(s.title) == RAN:
                out += [i for i in dict.fromkeys(s.inputs) if i not in out]
        return out

    def check_evidence(self) -> None:
        """No OK without evidence: each decision of the runbook (``gpulib/data/core/evidence.csv``) must rest on an
        input that came back with data, else the run is INCOMPLETE and says which (:func:`gpulib.run.evidence.check`).
        Not checked for a run that never reached its source (no source, a bad parameter)."""
        if not needs(self.runbook.name) or self.engine.src is None or self.engine.usage_errors:
            return
        with self.engine.step(EVIDENCE_STEP):
            check(self.runbook.name, self.reads)

    def finish(self, *, save: bool = True) -> FindingList:
        """The verdict: the runbook's ``findings`` over what the steps gathered, then the engine's finish (the
        'Runbook incomplete' finding for a failed step, the SOP cell, findings.json where the run says)."""
        fs = self.runbook.findings(self.ctx) if self.runbook.findings is not None else None
        self.check_evidence()
        for f in fs or ():
            f.data.setdefault("inputs", finding_inputs(self.runbook.name, self.reads, f.category))
        fl = self.engine.finish(fs, combine=self.runbook.combine, save=save, steps=self.outcomes, inputs=self.inputs())
        self.ctx["findings"] = fl
        if save and self.runbook.figures is not None:  # the key figures gpuops diff compares (gpulib.run.diff)
            save_figures(self.runbook, self.ctx)
        return fl


def start(runbook: Runbook, ns: MutableMapping[str, Any], *, extra: Mapping[str, Any] | None = None) -> Session:
    """The notebook's first code cell: connect and show the verdict box; ``ns`` is the kernel's ``globals()``
    (papermill injected the parameters there). ``extra``: names the steps read beyond the parameters (see
    :func:`gpulib.run.catalogue.context`); by default the catalogue's for this runbook."""
    return Session(runbook, ns, extra=context(runbook.name) if extra is None else extra)
