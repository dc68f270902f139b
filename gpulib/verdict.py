"""The verdict of an incident runbook without a notebook kernel: the fast half of a ``gpuops serve`` run.

An incident runbook's findings come from one domain call over what its steps gathered (``findings(inp)`` of
``gpulib/<domain>/steps.py``, docs/architecture.md "Verdict first"). Each such domain also has ``decide(src, step,
**params)``: the notebook's steps that read data or decide, without the tables and charts, each inside ``step(name)``.
Here ``step`` is a headless :class:`gpulib.runbook.Runbook`'s own guard and the result goes through the same
``Runbook.finish``, so a step without data makes the verdict INCOMPLETE exactly as it makes the notebook's, and the
"Runbook incomplete" finding, the ordering and the rerun command are the notebook's. ``tests/test_verdict.py`` runs
every row of ``tests/decisions/*.csv`` for these runbooks through both paths and compares the findings.

A runbook without a ``decide`` (or parameters it cannot honour without side effects twice, ``record_history``) has
no fast verdict: :func:`supports` says so, and the caller waits for the notebook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from gpulib.catalogue import NotebookInfo, find_notebook
from gpulib.core.findings import FindingList, Severity
from gpulib.demo.artifacts import DEMO_NCCL_TESTS, DEMO_TOPOLOGY
from gpulib.demo.nccl_history import runbook_default_history
from gpulib.runbook import Runbook, quiet

#: runbook -> the domain module whose ``decide`` computes its verdict
DECIDERS = {
    "xid_ecc_triage": "gpulib.xid.steps",
    "fleet_overview": "gpulib.fleet.steps",
    "nccl_check": "gpulib.nccl.steps",
    "operator_install": "gpulib.gpu_operator.steps",
}
#: parameters a runbook passes to ``Runbook(...)`` (its connect step and rerun line), as its notebook does
_NOT_FOR_RUNBOOK = ("source", "snapshot_dir")


@dataclass
class FastVerdict:
    """The findings of a headless run, sorted as ``findings.json`` has them, with the run's step errors."""

    runbook: str
    findings: FindingList
    errors: list[str] = field(default_factory=list)
    usage_errors: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def worst(self) -> str:
        return self.findings[0].severity.value if self.findings else Severity.OK.value

    def doc(self) -> dict[str, Any]:
        """The parts of a ``findings.json`` document that :func:`gpulib.core.summary.verdict_of` reads."""
        return {"worst": self.worst, "errors": list(self.errors), "usage_errors": list(self.usage_errors)}


def supports(runbook: str, params: dict[str, Any]) -> bool:
    """Whether ``runbook`` with ``params`` has a fast verdict."""
    return runbook in DECIDERS and not params.get("record_history")


def _notebook_defaults(info: NotebookInfo) -> dict[str, Any]:
    return {p.name: p.default for p in info.params}


def _extra_args(runbook: str) -> dict[str, Any]:
    """What a notebook passes to its domain call beyond its parameters: nccl_check's packaged inputs (the demo's
    2xH200 captures and history, which a domain may not name)."""
    if runbook != "nccl_check":
        return {}

    return {
        "default_tests": DEMO_NCCL_TESTS,
        "default_topology": DEMO_TOPOLOGY,
        "default_history": runbook_default_history,
    }


def fast_verdict(runbook: str, params: dict[str, Any], info: NotebookInfo | None = None) -> FastVerdict:
    """The verdict of ``runbook`` with ``params`` (as :func:`gpulib.execute.prepare` resolved them) computed in
    this process: the notebook's defaults filled in as papermill would, a headless Runbook, the domain's
    ``decide``, ``Runbook.finish``. KeyError for a runbook :func:`supports` rejects."""
    if not supports(runbook, params):
        raise KeyError(f"{runbook} has no fast verdict for these parameters")
    info = info or find_notebook(runbook)
    p = {**_notebook_defaults(info), **params}
    decide = import_module(DECIDERS[runbook]).decide
    with quiet():
        rb = Runbook(
            runbook,
            source=p.get("source", "demo"),
            snapshot_dir=p.get("snapshot_dir", ""),
            **{k: v for k, v in p.items() if k not in _NOT_FOR_RUNBOOK},
        )
        fs = decide(
            rb.src, rb.step, **{k: v for k, v in p.items() if k not in _NOT_FOR_RUNBOOK}, **_extra_args(runbook)
        )
        fl = rb.finish(fs, save=False)
    return FastVerdict(runbook, fl, list(rb.errors), list(rb.usage_errors), dict(rb.params))
