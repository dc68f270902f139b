"""Run a lesson in this process, as its notebook would but without a kernel: its definition through
:class:`gpulib.run.notebook.Session` (every step's gather and show), with what it shows collected
(:func:`gpulib.learn.lessons.recording`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpulib.learn.lessons import SelfCheck, recording
from gpulib.run.catalogue import definition
from gpulib.run.notebook import start
from gpulib.runbook import quiet


@dataclass
class LessonRun:
    name: str
    steps: list[str]
    outcomes: dict[str, str]
    errors: list[str]
    usage_errors: list[str]
    figures: dict[str, Any]
    shown: list = field(default_factory=list)

    @property
    def checks(self) -> list[SelfCheck]:
        return [x for kind, x in self.shown if kind == "check"]

    @property
    def markdown(self) -> list[str]:
        return [x for kind, x in self.shown if kind == "markdown"]

    def text(self) -> str:
        return "\n".join(str(x) for _, x in self.shown)


def run_lesson(name: str, **params: Any) -> LessonRun:
    rb = definition(name)
    ns: dict[str, Any] = {**rb.defaults(), **params}
    with quiet(), recording() as shown:
        s = start(rb, ns)
        s.run_all()
        s.finish(save=False)
    return LessonRun(
        name,
        [st.title for st in rb.steps],
        dict(s.outcomes),
        list(s.errors),
        list(s.usage_errors),
        ns["figures"],
        shown,
    )
