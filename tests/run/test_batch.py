"""gpulib.run.batch: gpuops demo's runs, several at once (gpuops demo --jobs)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.run import batch


def _fake(monkeypatch, delay=0.2, bad=None):
    state = {"now": 0, "most": 0, "calls": [], "lock": threading.Lock()}

    def prepare(info, source):
        if info.name == bad:
            raise InvalidParameter(f"{info.name}: bad")
        return {"source": source}

    def execute(info, params, out, progress, **kw):
        with state["lock"]:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            state["calls"].append((info.name, progress, kw))
        time.sleep(delay * (1 + (info.name == "a")))  # the first one ends last
        with state["lock"]:
            state["now"] -= 1
        return SimpleNamespace(name=info.name)

    monkeypatch.setattr(batch, "prepare", prepare)
    monkeypatch.setattr(batch.engine, "execute", execute)
    return state


TODO = [SimpleNamespace(name=n) for n in "abcde"]


def test_runs_go_jobs_at_a_time_and_come_back_in_the_order_asked(monkeypatch, tmp_path):
    state = _fake(monkeypatch)
    seen = []
    got = batch.run_each(
        TODO, tmp_path, jobs=2, progress=True, started=lambda n, i: seen.append((n, i.name)),
        finished=lambda r: seen.append(r.name), charts="shared",
    )  # fmt: skip
    assert [r.name for r in got] == list("abcde")
    assert state["most"] == 2
    assert {p for _, p, _ in state["calls"]} == {False}  # no progress bars side by side
    assert all(kw == {"charts": "shared"} for _, _, kw in state["calls"])
    assert seen.index("a") > seen.index("b")  # a ended last but is first in the results
    assert sorted(x for x in seen if isinstance(x, tuple)) == [(n + 1, c) for n, c in enumerate("abcde")]


def test_one_job_runs_one_at_a_time_with_progress(monkeypatch, tmp_path):
    state = _fake(monkeypatch, delay=0.01)
    batch.run_each(TODO, tmp_path, jobs=1, progress=True, started=lambda n, i: None, finished=lambda r: None)
    assert state["most"] == 1 and {p for _, p, _ in state["calls"]} == {True}


def test_a_bad_parameter_stops_the_batch_before_any_kernel(monkeypatch, tmp_path):
    state = _fake(monkeypatch, bad="d")
    with pytest.raises(InvalidParameter, match="d: bad"):
        batch.run_each(TODO, tmp_path, jobs=2, progress=False, started=lambda n, i: None, finished=lambda r: None)
    assert state["calls"] == []


def test_gpuops_demo_jobs_below_one_is_a_usage_error():
    from typer.testing import CliRunner

    from gpulib.cli import app

    res = CliRunner().invoke(app, ["demo", "--jobs", "0", "--out", "/nonexistent/x"])
    assert res.exit_code == 2, res.output
