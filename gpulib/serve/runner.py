"""One run of ``gpuops serve``: the run engine (:func:`gpulib.execute.execute`) in the worker thread, in this
process, with the per-run timeout (the kernel and every process it started are killed when it passes) and
without the webhook token in the kernel's environment.

A runner is ``run(folder, runbook, params, timeout) -> outcome``: ``status`` (done | incomplete | failed),
``error``, and ``verdict`` (:func:`gpulib.core.summary.verdict_of`; a runner that leaves it out has its
findings.json read instead). Tests give :class:`gpulib.serve.app.Service` runners of their own.

A verdicter (:class:`FastVerdicter`) computes the verdict before the runner renders the notebook as its evidence.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

from gpulib.catalogue import NotebookInfo, find_notebook
from gpulib.core.findings import save_findings
from gpulib.core.summary import verdict_of
from gpulib.execute import RunResult, execute
from gpulib.serve.config import TOKEN_ENV
from gpulib.verdict import DECIDERS, fast_verdict, supports

#: the fast verdict's findings in the run folder (the notebook writes findings.json, which the engine reads)
VERDICT_FILE = "verdict.json"


def outcome(res: RunResult) -> dict[str, Any]:
    """A finished run as serve records it: done, incomplete (a step lacked its data: the errors), or failed
    (the run failed, timed out, or a parameter matched nothing)."""
    if res.failed:
        status, error = "failed", res.failed
    elif res.usage_errors:
        status, error = "failed", "bad parameter: " + "; ".join(map(str, res.usage_errors))[:1000]
    elif res.errors:
        status, error = "incomplete", "; ".join(map(str, res.errors))[:1000]
    else:
        status, error = "done", None
    return {"status": status, "error": error, "verdict": res.verdict, "warm": res.warm}


class EngineRunner:
    """The default runner: the catalogued notebook ``runbook`` executed in this thread by the run engine, in a warm
    kernel when ``warm`` (:class:`gpulib.warm.WarmKernels`) has one ready."""

    def __init__(self, notebook: Callable[[str], NotebookInfo] = find_notebook, warm=None):
        self.notebook = notebook
        self.warm = warm

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        res = execute(
            self.notebook(runbook),
            params,
            folder.parent,
            out_dir=folder,
            progress=False,
            run_timeout=timeout,
            unset_env=(TOKEN_ENV,),
            summary=False,
            warm=self.warm,
        )
        return outcome(res)


class FastVerdicter:
    """The verdict of a run before its notebook (:func:`gpulib.verdict.fast_verdict`), in the server's worker thread,
    where gpulib is already imported: ``(folder, runbook, params) -> outcome`` (as :func:`outcome`, its findings also
    written to ``folder/verdict.json``), or ``None`` when the runbook has no fast verdict (the notebook decides)."""

    def __init__(self, notebook: Callable[[str], NotebookInfo] = find_notebook):
        self.notebook = notebook

    def warm(self) -> None:
        """Import what a verdict needs (pandas, the domains, the demo backend), so the first alert does not wait."""

        for mod in (*DECIDERS.values(), "gpulib.demo.source"):
            importlib.import_module(mod)

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any]) -> dict[str, Any] | None:

        if not supports(runbook, params):
            return None
        v = fast_verdict(runbook, params, self.notebook(runbook))
        save_findings(
            v.findings,
            folder / VERDICT_FILE,
            runbook=runbook,
            parameters=v.parameters,
            errors=v.errors,
            usage_errors=v.usage_errors,
        )
        if v.usage_errors:
            status, error = "failed", "bad parameter: " + "; ".join(v.usage_errors)[:1000]
        elif v.errors:
            status, error = "incomplete", "; ".join(v.errors)[:1000]
        else:
            status, error = "done", None
        return {"status": status, "error": error, "verdict": verdict_of(list(v.findings), v.doc())}
