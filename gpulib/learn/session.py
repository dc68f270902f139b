"""How a lesson runs: the engine a :class:`gpulib.run.notebook.Session` drives when its definition's ``kind`` is
``lesson`` (:data:`gpulib.core.runbook.LESSON`).

A lesson is defined like a runbook (``Param``/``Step``/``Runbook`` in each ``gpulib/learn/<topic>.py``) and its
notebook renders the steps the same way; what differs is the end. A lesson has no findings and no severity verdict:
no verdict box at the top, no "Recommended SOP step" at the bottom. It records the figures it showed (the context's
``figures``, written to ``figures.json`` beside the findings file the run asks for) and a step that could not get
its data is an error, as in a runbook, so the run is INCOMPLETE rather than OK.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from gpulib.core.findings import Finding, FindingList, save_findings
from gpulib.core.runbook import Param, Step
from gpulib.core.settings import FINDINGS_ENV
from gpulib.learn.lessons import connect, runbook_ref, show_md
from gpulib.runbook import Runbook as _Engine
from gpulib.runbook import _parameters_used

__all__ = ["LessonEngine", "FIGURES", "source_params", "next_step"]

#: the context name a lesson's steps record their headline figures under (``c.figures[key] = value``)
FIGURES = "figures"


class LessonEngine(_Engine):
    """The runbook engine's guarded steps, ``ready`` and errors, with a lesson's start (connect to ``source``,
    optionally the demo ``scenario`` YAML) and a lesson's finish (errors and figures, no verdict)."""

    def __init__(self, name: str, *, source: str = "demo", snapshot_dir: str = "", **params: Any):
        self.name = name
        self.params = _parameters_used(name, {"source": source, **params})
        self.errors: list[str] = []
        self.usage_errors: list[str] = []
        self.findings: list[Finding] = []
        self.failed_steps: list[str] = []
        self.figures: dict[str, Any] = {}
        self.src = None
        with self.step("Connect to the data source"):
            self.src = connect(source, str(params.get("scenario") or ""))

    def finish(
        self,
        findings: Iterable[Finding] | None = None,
        *,
        combine=None,
        save: bool = True,
        steps: dict[str, str] | None = None,
        inputs: list[str] | None = None,
    ) -> FindingList:
        """No findings: the run's errors (a step without data) and, where the run says, ``findings.json`` with them
        and ``figures.json`` beside it."""
        path = os.environ.get(FINDINGS_ENV) if save else None
        if path:
            save_findings(
                [],
                path,
                runbook=self.name,
                parameters=self.params,
                errors=self.errors,
                usage_errors=self.usage_errors,
                steps=steps,
                inputs=inputs,
            )
            Path(path).with_name("figures.json").write_text(json.dumps(self.figures, indent=2, default=str))
        return FindingList([])


def source_params(*, scenario: bool = True) -> tuple[Param, ...]:
    """The parameters every lesson that reads the fleet declares first: ``source`` and the demo ``scenario``."""
    out = (Param("source", "demo", "demo | live (lessons read the fleet through the same sources as the runbooks)"),)
    if scenario:
        out += (
            Param("scenario", "", "demo fleet YAML to use instead of the packaged gpulib/data/demo/demo_fleet.yaml"),
        )
    return out


def next_step(*runbooks: str, lead: str = "Next: ", sep: str = "  \n") -> Step:
    """The lesson's last section: the runbooks it prepares for (:func:`gpulib.learn.lessons.runbook_ref`)."""

    def show(c, ui) -> None:
        show_md(lead + sep.join(runbook_ref(n) for n in runbooks))

    return Step("Next", show=show)
