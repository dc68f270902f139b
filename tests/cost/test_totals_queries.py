"""gpulib/cost/totals.py without a Prometheus: which queries the report sends and when, and how the answers become
frames (a fake source answers; the frames are checked against pandas built here from the same answers)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpulib.cost import recording
from gpulib.cost.totals import (
    Answers,
    _bucket_samples,
    _flat,
    _held_queries,
    _Keys,
    fetch_totals,
    totals_queries,
)
from gpulib.cost.usage import GPU_UTIL, GR_ENGINE_ACTIVE

END = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


class FakeSource:
    """Answers every query with ``answer(promql)``; records what was sent; ``barrier`` (optional) holds each query
    until that many are in flight at once."""

    def __init__(self, answer, barrier: threading.Barrier | None = None):
        self.end, self.answer, self.barrier = END, answer, barrier
        self.sent: list[str] = []
        self.lock = threading.Lock()

    def _ask(self, promql):
        with self.lock:
            self.sent.append(promql)
        if self.barrier is not None:
            self.barrier.wait()
        return self.answer(promql)

    def query(self, promql):
        return self._ask(promql)

    def range_query(self, promql, start, end, step):
        return self._ask(promql)


def _series(i: int) -> dict:
    return {"Hostname": f"node-{i}", "gpu": "0", "UUID": f"GPU-{i}", "modelName": "NVIDIA H100 80GB HBM3"}


def _answer_with_rules(promql: str) -> list[dict]:
    if "gpu:" in promql and "[" in promql and "count_over_time" in promql:
        return [{"metric": _series(1), "value": [END.timestamp(), "2016"]}]
    return []


def test_every_query_goes_out_at_once_and_no_rule_probe_comes_first():
    per_batch = len(totals_queries("rules", 86400)) + 2 + 2 + 2  # totals, held-idle steps, heatmap, activity
    src = FakeSource(_answer_with_rules, threading.Barrier(per_batch, timeout=10))
    got = fetch_totals(src, 86400.0, 7200.0)
    assert got.path == "rules"
    assert len(src.sent) == per_batch == len(got.sent)
    rule = recording.rule_name(recording.ACTIVITY)
    assert not any(q.startswith("count(") for q in src.sent)  # the old probe: count(count_over_time(<rule>[w]))
    assert sum(f"{rule}[" in q for q in src.sent) >= 1
    # the activity probes ask for each field under every name it has had
    probes = [q for q in src.sent if q.startswith("count by (modelName)")]
    assert len(probes) == 2
    assert any("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO" in q and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in q for q in probes)
    assert any("DCGM_FI_DEV_GPU_UTIL_RATIO" in q and "DCGM_FI_DEV_GPU_UTIL|" in q for q in probes)


def test_the_raw_path_is_asked_only_when_the_rule_series_answer_nothing():
    src = FakeSource(lambda q: [])
    got = fetch_totals(src, 86400.0, 7200.0)
    assert got.path == "raw"
    rules = [q for q in src.sent if "gpu:" in q]
    raw = [q for q in src.sent if "gpu:" not in q and "count by (modelName)" not in q]
    assert rules and raw and len(got.sent) == len(src.sent)
    assert sum(q.startswith("count by (modelName)") for q in src.sent) == 2  # probes asked once


@pytest.mark.parametrize("probe", [True, False])
def test_activity_probes_follow_the_answers(probe):
    def answer(q):
        if probe and "GR_ENGINE" in q and q.startswith("count by"):
            return [{"metric": {"modelName": "NVIDIA A100-SXM4-40GB"}, "value": [0, "8"]}]
        if "GPU_UTIL" in q and q.startswith("count by"):
            return [{"metric": {"modelName": "Tesla T4"}, "value": [0, "4"]}]
        return []

    from gpulib.cost.totals import activity_of

    got = fetch_totals(FakeSource(answer), 3600.0, 600.0)
    field, models = activity_of(got.probes)
    assert (field, list(models)) == (
        (GR_ENGINE_ACTIVE, ["NVIDIA A100-SXM4-40GB"]) if probe else (GPU_UTIL, ["Tesla T4"])
    )


def test_heatmap_rows_match_a_pandas_join_of_the_answers():
    """Two series; the activity answer misses one bucket of the second and has one series the count has not."""
    bucket, step = 7200.0, 300.0
    t = np.array([1.0e9, 1.0e9 + bucket, 1.0e9 + 2 * bucket])
    n_ans = [
        {"metric": _series(1), "ts": t, "v": np.array([24.0, 24.0, 12.0])},
        {"metric": {**_series(2), "pod": "p", "namespace": "ns"}, "ts": t, "v": np.array([24.0, 20.0, 24.0])},
    ]
    a_ans = [
        {"metric": {**_series(2), "pod": "p", "namespace": "ns"}, "ts": t[[0, 2]], "v": np.array([6.0, 12.0])},
        {"metric": _series(1), "ts": t, "v": np.array([12.0, 0.0, 6.0])},
        {"metric": _series(3), "ts": t, "v": np.array([1.0, 1.0, 1.0])},
    ]
    key = _Keys()
    buckets = {"n": _flat(n_ans, key), "act_sum": _flat(a_ans, key)}
    keys = sorted({*buckets["n"].keys})
    idx = np.array([1, 0])  # lab row i is keys[idx[i]]
    lab = pd.DataFrame({"share": [0.5, 1.0], "allocated": [True, False]})
    got = _bucket_samples(buckets, lab, keys, idx, bucket, step)

    def long(ans, name):
        return pd.DataFrame(
            [
                (r["metric"]["Hostname"], r["metric"].get("pod", ""), ts, v)
                for r in ans
                for ts, v in zip(r["ts"], r["v"])
            ],
            columns=["node", "pod", "t", name],
        )

    want = long(n_ans, "n").merge(long(a_ans, "a"), on=["node", "pod", "t"], how="left")
    info = {keys[idx[i]][0]: (lab["share"][i], lab["allocated"][i]) for i in range(2)}
    assert list(got["node"]) == list(want["node"])
    assert list(got["timestamp"]) == list(pd.to_datetime(want["t"] - bucket, unit="s", utc=True))
    np.testing.assert_array_equal(got["step_s"], want["n"] * step)
    np.testing.assert_array_equal(got["activity"], want["a"] / want["n"])  # NaN where the answer had no point
    assert np.isnan(got["activity"]).sum() == 1
    assert list(got["share"]) == [info[x][0] for x in want["node"]]
    assert list(got["allocated"]) == [info[x][1] for x in want["node"]]


def test_answers_type_is_what_the_report_reads():
    got = fetch_totals(FakeSource(_answer_with_rules), 86400.0, 7200.0)
    assert isinstance(got, Answers) and set(got.vectors) == set(totals_queries("rules", 86400))
    assert set(got.held) == {"act", "fb"} and set(got.buckets) == {"n", "act_sum"}


def test_the_report_reads_the_kubernetes_api_while_prometheus_evaluates():
    """load_report_data sends the PromQL first and reads nodes and pods while it runs (it read them first before)."""
    from gpulib.core.errors import EmptyResult
    from gpulib.cost.steps import load_report_data

    asked = threading.Event()

    class Src(FakeSource):
        overlapped = False

        def _ask(self, promql):
            asked.set()
            return super()._ask(promql)

        def nodes(self):
            Src.overlapped = asked.wait(timeout=10)
            return pd.DataFrame()

        def pods(self):
            return pd.DataFrame()

    with pytest.raises(EmptyResult):  # no series at all: the report says so
        load_report_data(Src(lambda q: []), "1d")
    assert Src.overlapped


def test_the_held_idle_steps_come_last_and_nothing_else_waits_for_them():
    """The report's two largest answers (every held-idle step of the window) are still on their way when
    fetch_totals(defer_held=True) returns with everything else: build_totals adds the rest up meanwhile."""
    held, release = set(_held_queries("rules").values()), threading.Event()

    def answer(q):
        if q in held:
            assert release.wait(timeout=10)
            return [{"metric": _series(1), "values": [[END.timestamp(), "0.5"]]}]
        return _answer_with_rules(q)

    got = fetch_totals(FakeSource(answer), 86400.0, 7200.0, defer_held=True)
    assert set(got.vectors) == set(totals_queries("rules", 86400)) and set(got.buckets) == {"n", "act_sum"}
    assert set(got.held) == {"act", "fb"}
    assert all(isinstance(f, Future) and not f.done() for f in got.held.values())
    release.set()
    assert [len(f.result(timeout=10)) for f in got.held.values()] == [1, 1]


def test_an_error_in_the_held_idle_steps_reaches_the_report():
    """A held-idle query that fails after everything else came back fails the report as it did when it was awaited
    with the others (load_report_data raises the source's error; nothing is added up without it)."""
    from gpulib.core.errors import SourceError
    from gpulib.cost.steps import load_report_data
    from gpulib.demo.source import DemoSource

    demo, held = DemoSource(end=END), set(_held_queries("rules").values())

    class Src(FakeSource):
        def nodes(self):
            return demo.nodes()

        def pods(self):
            return demo.pods()

    def answer(q):
        if q in held:
            raise SourceError("Prometheus did not answer in time")
        return _answer_with_rules(q)

    with pytest.raises(SourceError, match="did not answer in time"):
        load_report_data(Src(answer), "1d")


CHARTS_LOADED = """
import json, sys
from tests.cost.test_totals_queries import FakeSource
from gpulib.core.errors import EmptyResult
from gpulib.cost.steps import load_report_data

class Src(FakeSource):
    def nodes(self):
        import pandas as pd
        return pd.DataFrame()
    def pods(self):
        import pandas as pd
        return pd.DataFrame()

WANT = ("narwhals", "plotly.graph_objs._heatmap", "plotly.graph_objs._waterfall")
before = [m for m in WANT if m in sys.modules]
try:
    load_report_data(Src(lambda q: []), "1d")
except EmptyResult:
    pass
print(json.dumps([before, [m for m in WANT if m in sys.modules]]))
"""


def test_the_charts_library_loads_while_prometheus_evaluates():
    """In a fresh process (a kernel's first report), plotly's trace classes and their dataframe layer are loaded by
    the time the answers are read, not when the first chart is drawn after them (gpulib/cost/view.py
    load_chart_classes)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", CHARTS_LOADED], capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert before == [] and after == ["narwhals", "plotly.graph_objs._heatmap", "plotly.graph_objs._waterfall"]
