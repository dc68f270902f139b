"""The simulator's memo (gpulib/demo/memo.py): a question asked again is answered without computing it again, the
answer is the first one, a caller cannot change what is kept, another question is not served from it, and it stays
within its bounds."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest

from gpulib.demo import nccl_history
from gpulib.demo.memo import Memo
from gpulib.demo.simulator import FleetSimulator
from gpulib.demo.source import DemoSource

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
FIELD = "DCGM_FI_DEV_GPU_UTIL"


@pytest.fixture
def sim(monkeypatch):
    """A fresh simulator that counts its sample() calls."""
    s = FleetSimulator(end=END)
    calls = []
    sample = s.sample

    def counted(name, d, t):
        calls.append((name, d.uuid))
        return sample(name, d, t)

    monkeypatch.setattr(s, "sample", counted)
    s.calls = calls
    return s


def test_a_frame_asked_twice_is_sampled_once_and_is_the_same(sim):
    t0, t1 = sim.end_s - 3600, sim.end_s
    first = sim.frame(FIELD, t0, t1, 60.0)
    n = len(sim.calls)
    assert n > 0
    second = sim.frame(FIELD, t0, t1, 60.0)
    assert len(sim.calls) == n
    pd.testing.assert_frame_equal(second, first)
    # the same devices given as a list (the source's generator) are the same question
    sim.frame(FIELD, t0, t1, 60.0, [d for d in sim.devices])
    assert len(sim.calls) == n


def test_a_changed_frame_does_not_change_the_next_answer(sim):
    t0, t1 = sim.end_s - 3600, sim.end_s
    first = sim.frame(FIELD, t0, t1)
    expected = first.copy()
    first["value"] = -1.0
    first.loc[0, "node"] = "elsewhere"
    pd.testing.assert_frame_equal(sim.frame(FIELD, t0, t1), expected)
    again = sim.frame(FIELD, t0, t1)
    again.drop(index=again.index[:10], inplace=True)
    pd.testing.assert_frame_equal(sim.frame(FIELD, t0, t1), expected)


def test_another_window_step_device_set_or_metric_is_computed(sim):
    t0, t1 = sim.end_s - 3600, sim.end_s
    base = sim.frame(FIELD, t0, t1, 60.0)
    node = [d for d in sim.devices if d.node == "dgx-h100-1"]
    for other in (
        lambda: sim.frame(FIELD, t0 - 60, t1, 60.0),
        lambda: sim.frame(FIELD, t0, t1 - 60, 60.0),
        lambda: sim.frame(FIELD, t0, t1, 120.0),
        lambda: sim.frame(FIELD, t0, t1, 60.0, node),
        lambda: sim.frame("DCGM_FI_DEV_GPU_TEMP", t0, t1, 60.0),
    ):
        n = len(sim.calls)
        got = other()
        assert len(sim.calls) > n
        assert not got.equals(base)


def test_devices_not_of_this_simulator_are_not_served_from_the_memo(sim):
    """A device changed by the caller (same uuid, other persona) is sampled, not looked up by its uuid."""
    import dataclasses

    t0, t1 = sim.end_s - 3600, sim.end_s
    d = next(x for x in sim.devices if x.persona == "train")
    first = sim.frame(FIELD, t0, t1, None, [d])
    n = len(sim.calls)
    idle = sim.frame(FIELD, t0, t1, None, [dataclasses.replace(d, persona="idle")])
    assert len(sim.calls) > n
    assert idle["value"].mean() < first["value"].mean()


def test_a_summary_asked_twice_is_sampled_once(sim):
    t0, t1 = sim.end_s - 6 * 3600, sim.end_s
    first = sim.summary_frame(FIELD, t0, t1, "max")
    n = len(sim.calls)
    second = sim.summary_frame(FIELD, t0, t1, "max")
    assert len(sim.calls) == n
    pd.testing.assert_frame_equal(second, first)
    second["value"] = -1.0
    pd.testing.assert_frame_equal(sim.summary_frame(FIELD, t0, t1, "max"), first)
    assert not sim.summary_frame(FIELD, t0, t1, "min").equals(first)
    assert len(sim.calls) > n
    assert sim.summary_frame(FIELD, t0, t1, "avg") is None


def test_the_memo_keeps_within_its_bounds():
    memo = Memo(entries=3, rows=100)
    frames = {k: pd.DataFrame({"value": np.arange(k, dtype=float)}) for k in (10, 20, 30, 40, 50, 150)}
    built = []

    def get(k):
        return memo.get(k, lambda: built.append(k) or frames[k])

    for k in (10, 20, 30):
        get(k)
    assert (len(memo), memo.weight) == (3, 60)
    get(10)  # used again: 20 is now the least recently used
    get(50)  # a fourth entry: 20 goes
    assert (len(memo), memo.weight) == (3, 90)
    get(40)  # 30 goes
    assert (len(memo), memo.weight) == (3, 100)
    get(30)  # 130 rows: 10 and 50 go
    assert (len(memo), memo.weight) == (2, 70)
    get(150)  # heavier than the bound: returned, not kept
    assert (len(memo), memo.weight) == (2, 70)
    built.clear()
    for k in (40, 30, 10):
        pd.testing.assert_frame_equal(get(k), frames[k])
    assert built == [10]
    memo.get("samples", lambda: tuple(range(150)), weight=len)  # weighed by its samples: over the bound, not kept
    assert "samples" not in memo._kept and memo.weight <= 100


def test_arrays_come_back_read_only_and_none_is_kept():
    memo = Memo()
    built = []
    arr = memo.get("a", lambda: np.arange(3.0))
    with pytest.raises(ValueError):
        arr[0] = 5.0
    assert memo.get("none", lambda: built.append(1)) is None
    assert memo.get("none", lambda: built.append(1)) is None
    assert built == [1]


@pytest.fixture
def served(monkeypatch):
    """A DemoSource under exporter 4.8 with a fresh simulator (a scenario dict is not shared), counting _served."""
    from gpulib.core.knowledge import data_path
    from gpulib.demo.simulator import read_scenario

    calls = []
    real = DemoSource._served

    def counted(self, field, df):
        calls.append(field)
        return real(self, field, df)

    monkeypatch.setattr(DemoSource, "_served", counted)
    src = DemoSource(read_scenario(data_path("demo_fleet.yaml")), end=END, exporter="4.8")
    return src, calls


def test_a_served_series_asked_twice_is_converted_once_and_is_the_same(served):
    src, calls = served
    first = src.series("DCGM_FI_DEV_POWER_USAGE", "1h", node="dgx-h100-1")
    n = len(calls)
    assert n == 1
    first["value"] = 0.0
    again = src.series("DCGM_FI_DEV_POWER_USAGE", "1h", node="dgx-h100-1")
    assert len(calls) == n and again["value"].gt(0).all()
    fresh = DemoSource(src.sim.scenario, end=END, exporter="4.8")
    pd.testing.assert_frame_equal(again, fresh.series("DCGM_FI_DEV_POWER_USAGE", "1h", node="dgx-h100-1"))
    n = len(calls)
    src.series("DCGM_FI_DEV_POWER_USAGE", "2h", node="dgx-h100-1")
    src.series("DCGM_FI_DEV_POWER_USAGE", "1h", node="dgx-h100-1", gpu=0)
    assert len(calls) == n + 2


def test_a_served_summary_asked_twice_is_reduced_once(served):
    src, calls = served
    for stat in ("max", "avg"):
        first = src.summary("DCGM_FI_DEV_POWER_USAGE", "1h", stat)
        n = len(calls)
        first["value"] = 0.0
        again = src.summary("DCGM_FI_DEV_POWER_USAGE", "1h", stat)
        assert len(calls) == n and again["value"].gt(0).all()
        fresh = DemoSource(src.sim.scenario, end=END, exporter="4.8")
        pd.testing.assert_frame_equal(again, fresh.summary("DCGM_FI_DEV_POWER_USAGE", "1h", stat))


def test_an_empty_answer_still_raises_each_time(served):
    """No NVLink on the L4 node: the empty answer is kept, and each asking raises again."""
    from gpulib.core.errors import EmptyResult

    src, _ = served
    for _ in range(2):
        with pytest.raises(EmptyResult):
            src.series("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "1h", node="l4-spot-0")
        with pytest.raises(EmptyResult):
            src.summary("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "1h", "max", node="l4-spot-0")


def test_the_smi_text_of_a_node_is_rendered_once(monkeypatch):
    from gpulib.demo import source

    calls = []
    real = source.render_smi_query
    monkeypatch.setattr(source, "render_smi_query", lambda sim, node: calls.append(node) or real(sim, node))
    src = DemoSource(FleetSimulator(end=END).scenario, end=END)
    first = src.smi_query("dgx-h100-1")
    assert src.smi_query("dgx-h100-1") == first and calls == ["dgx-h100-1"]
    src.smi_query("a100-80-0")
    assert calls == ["dgx-h100-1", "a100-80-0"]


def test_the_demo_nccl_history_is_judged_once_per_process(monkeypatch):
    import gpulib.nccl as nccl

    nccl_history._history.cache_clear()
    calls = []
    real = nccl.verdict
    monkeypatch.setattr(nccl, "verdict", lambda r: calls.append(1) or real(r))
    first = nccl_history.demo_nccl_history()
    n = len(calls)
    assert n > 0
    first.iloc[:, 0] = None
    again, _ = nccl_history.runbook_default_history()
    assert len(calls) == n
    nccl_history._history.cache_clear()
    pd.testing.assert_frame_equal(again, nccl_history.demo_nccl_history())
    assert len(calls) == 2 * n


def test_the_vllm_range_query_is_built_once_and_cannot_be_changed_by_a_caller(monkeypatch):
    from gpulib.demo import source

    calls = []
    real = source.demo_vllm_series
    monkeypatch.setattr(source, "demo_vllm_series", lambda sim, t: calls.append(len(t)) or real(sim, t))
    src = DemoSource(FleetSimulator(end=END).scenario, end=END)
    q = '{__name__=~"vllm:.+"}[3600s]'
    first = src.query(q)
    expected = [{"metric": dict(r["metric"]), "values": [list(p) for p in r["values"]]} for r in first]
    assert calls == [121] and first and all(len(r["values"]) == 121 for r in first)
    first[0]["metric"]["pod"] = "elsewhere"
    first[0]["values"][0][1] = "-1"
    first[1]["values"].clear()
    assert src.query(q) == expected and calls == [121]
    src.query('{__name__=~"vllm:.+"}[1800s]')
    assert calls == [121, 61]
