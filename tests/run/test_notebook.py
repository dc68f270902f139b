"""gpulib/run/notebook.py: the Session that runs a runbook's definition, in a notebook and headless. What a step
needs decides whether it runs; a step that cannot get its data makes the run INCOMPLETE; a step with effects runs
in the notebook only; the verdict lists the inputs of the steps that ran."""

from __future__ import annotations

import pytest

from gpulib.core.errors import SourceError
from gpulib.core.findings import Finding, Severity
from gpulib.core.runbook import Param, Runbook, Step
from gpulib.run.notebook import FAILED, NOT_CHECKED, NOT_RUN, NOTHING, RAN, Session
from gpulib.runbook import quiet
from tests.helpers.pinned import DEMO_END

CALLS: list[str] = []


def _gather_a(c):
    CALLS.append("a")
    c.a = [1, 2]


def _gather_b(c):
    CALLS.append("b")
    c.b = c.a + [3]


def _gather_down(c):
    CALLS.append("down")
    c.partial = "kept"
    raise SourceError("Prometheus is down", hint="check the URL")


def _gather_after_down(c):
    CALLS.append("after_down")


def _gather_effect(c):
    CALLS.append("effect")


def _gather_empty(c):
    CALLS.append("empty")


def _show(c, ui):
    CALLS.append("show")


def _findings(c):
    return [Finding(Severity.WARNING, "toy finding", node=c.node)] if c.get("b") else None


def toy(*steps: Step) -> Runbook:
    return Runbook(
        "toy_runbook",
        "xid",
        params=(Param("source", "demo"), Param("snapshot_dir", ""), Param("node", "dgx-h100-1")),
        steps=steps,
        findings=_findings,
        start=lambda c: {"down_result": None, "nothing": []},
    )


@pytest.fixture(autouse=True)
def _pinned(monkeypatch):
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)
    CALLS.clear()


def _run(rb: Runbook, headless: bool = True) -> Session:
    with quiet():
        s = Session(rb, {}, headless=headless, extra={})
        s.run_all()
        s.finish(save=False)
    return s


def test_steps_run_in_order_and_each_reads_what_the_one_before_left():
    s = _run(toy(Step("A", _gather_a, needs=("src",), inputs=("x",)), Step("B", _gather_b, needs=("a",))))
    assert CALLS == ["a", "b"] and s.ctx.b == [1, 2, 3]
    assert s.outcomes == {"A": RAN, "B": RAN}
    assert [f.title for f in s.ctx.findings] == ["toy finding"]


def test_a_step_that_cannot_get_its_data_makes_the_run_incomplete_and_the_steps_needing_it_do_not_run():
    s = _run(
        toy(
            Step("A", _gather_a, inputs=("kernel log",)),
            Step("Down", _gather_down, inputs=("DCGM_FI_DEV_XID_ERRORS",)),
            Step("After", _gather_after_down, needs=("down_result",)),
        )
    )
    assert CALLS == ["a", "down"]
    assert s.outcomes == {"A": RAN, "Down": FAILED, "After": NOT_CHECKED}
    assert s.ctx.partial == "kept"  # what the step set before it failed stays, as a notebook's globals do
    top = s.ctx.findings[0]
    assert top.title.startswith("Runbook incomplete") and top.severity is not Severity.OK
    assert "Prometheus is down" in s.errors[0]
    assert s.inputs() == ["kernel log"]  # the failed step's input is not one the verdict rests on


def test_an_empty_result_means_nothing_to_show_not_a_failure():
    s = _run(toy(Step("Empty", _gather_empty, needs=("nothing",), why="no pods")))
    assert CALLS == [] and s.outcomes == {"Empty": NOTHING} and not s.errors


def test_a_step_with_effects_and_a_display_only_step_run_in_the_notebook_only():
    steps = (
        Step("A", _gather_a, _show),
        Step("Plan", _gather_effect, needs=("a",), effects=True),
        Step("Chart", None, _show, needs=("a",)),
    )
    s = _run(toy(*steps))
    assert CALLS == ["a"] and s.outcomes == {"A": RAN, "Plan": NOT_RUN, "Chart": NOT_RUN}
    CALLS.clear()
    s = _run(toy(*steps), headless=False)
    assert CALLS == ["a", "show", "effect", "show"] and set(s.outcomes.values()) == {RAN}


def test_without_a_source_no_step_that_needs_it_runs():
    rb = Runbook(
        "toy_runbook",
        "xid",
        params=(Param("source", "snapshot"), Param("snapshot_dir", "/no/such/folder")),
        steps=(Step("A", _gather_a, needs=("src",)),),
    )
    s = _run(rb)
    assert CALLS == [] and s.outcomes == {"A": NOT_CHECKED} and s.src is None
    assert s.ctx.findings[0].severity is Severity.CRITICAL  # no data source at all: critical, never OK
