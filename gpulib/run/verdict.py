"""The verdict of a runbook without a notebook kernel: the fast half of ``gpuops serve``, ``gpuops mcp`` and the
terminal line of ``gpuops run``.

It runs the runbook's own definition (:mod:`gpulib.core.runbook`) through the same :class:`~gpulib.run.notebook.Session`
the notebook uses, headless: every step's ``gather`` and no ``show``, so a step without data makes the verdict
INCOMPLETE exactly as it makes the notebook's, and the "Runbook incomplete" finding, the ordering and the rerun
command are the notebook's. Steps with ``effects`` (an audit record, a server-side dry run) are the notebook's
alone, and a run whose parameters act (``Runbook.side_effect_params``, e.g. appending to a history) has no fast
verdict: :func:`supports` says so. ``tests/test_verdict.py`` runs every row of ``tests/decisions/*.csv`` through
both paths and compares the findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpulib.core.findings import FindingList, Severity
from gpulib.run.catalogue import context, defined, definition
from gpulib.run.notebook import Session
from gpulib.runbook import quiet


@dataclass
class FastVerdict:
    """The findings of a headless run, sorted as ``findings.json`` has them, with the run's step errors, the
    outcome of each step and the inputs the verdict rests on (those of the steps that ran)."""

    runbook: str
    findings: FindingList
    errors: list[str] = field(default_factory=list)
    usage_errors: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, str] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)

    @property
    def worst(self) -> str:
        return self.findings[0].severity.value if self.findings else Severity.OK.value

    def doc(self) -> dict[str, Any]:
        """The parts of a ``findings.json`` document that :func:`gpulib.run.record.verdict_of` reads."""
        return {"worst": self.worst, "errors": list(self.errors), "usage_errors": list(self.usage_errors)}


def supports(runbook: str, params: dict[str, Any]) -> bool:
    """Whether ``runbook`` with ``params`` has a fast verdict: it is defined, and these values act on nothing."""
    return defined(runbook) and not definition(runbook).acts(params)


def fast_verdict(runbook: str, params: dict[str, Any], info: Any = None) -> FastVerdict:
    """The verdict of ``runbook`` with ``params`` (as :func:`gpulib.run.params.prepare` resolved them) computed in
    this process: the definition's defaults filled in as papermill fills the notebook's, every step headless, the
    findings. KeyError for what :func:`supports` rejects. ``info`` is accepted for callers that hold the notebook's
    catalogue entry; the definition is what counts."""
    if not supports(runbook, params):
        raise KeyError(f"{runbook} has no fast verdict for these parameters")
    rb = definition(runbook)
    ns: dict[str, Any] = {**rb.defaults(), **params}
    with quiet():
        s = Session(rb, ns, headless=True, extra=context(runbook))
        s.run_all()
        fl = s.finish(save=False)
    return FastVerdict(
        runbook, fl, list(s.errors), list(s.usage_errors), dict(s.params), steps=dict(s.outcomes), inputs=s.inputs()
    )
