"""The node history from the recorded series (gpulib/sources/history_rules.py) is the raw path's history: a real
Prometheus backfilled with the demo history written the way kube-state-metrics and dcgm-exporter write it
(gpulib/demo/history_series.py), plus the shipped history rules evaluated over it by ``promtool tsdb
create-blocks-from rules`` (https://prometheus.io/docs/prometheus/latest/storage/#backfilling-for-recording-rules).

Prometheus evaluates a rule group at a phase within its interval derived from a hash of the group's name and its
rule file's path (tests/helpers/promphase.py), so the same rules give another phase in every installation (and in
every tmp folder). The tests choose the phase: the rule file's name is picked to give each phase of :data:`PHASES`
(promtool is given the bare name), and the fixture checks the phase the samples were written at. At every phase,
and at window ends on the 5-minute marks, on the phase and between both, every event is the same, time included."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
import requests
import yaml

from gpulib.demo.history_series import write_history_openmetrics
from gpulib.demo.simulator import FleetSimulator
from gpulib.sources import history_rules
from gpulib.sources.prom_history import STEP_S, UNREACHABLE, history_path, prometheus_history
from gpulib.sources.prometheus import PrometheusSource
from tests.helpers.pinned import DEMO_END, ROOT, need_prometheus
from tests.helpers.promharness import PrometheusServer, blocks_from_openmetrics, history_frame, with_rules
from tests.helpers.promphase import promtool_phase_ms

WINDOW = timedelta(days=7)
#: seconds of history written: the window, the rules' first two hours (history_path) and the 5-minute offsets
HISTORY = 7 * 86400 + 3 * 3600
#: one sample per 5 minutes: kube-state-metrics and dcgm-exporter are scraped at least that often, so every step's
#: 5-minute lookback holds a sample (at 600 s every other step would see a series vanish and come back: a "new"
#: restart counter, an exporter gap)
SAMPLE_S = 300.0
#: the events group's phase (the millisecond of its 5 minutes at which promtool writes its samples) -> the rule
#: file name that gives it (tests/helpers/promphase.py::promtool_phase_ms, found by trying rules-<k>.yaml):
#:   0 and 299,999: the first and last millisecond of the 5 minutes;
#:   150,800 and 162,800: the phases of the two runs in b78078f's message (a step late, the same);
#:   243,041: every recorded event a step late (the reader's steps, whole seconds, fell 41 ms before the samples);
#:   299,262: two cordons of h200-infer-0 shorter than a step that the evaluations saw and the raw steps did not.
PHASES = {
    0: "rules-256278.yaml",
    150_800: "rules-98272.yaml",
    162_800: "rules-150464.yaml",
    243_041: "rules-757.yaml",
    299_262: "rules-297.yaml",
    299_999: "rules-348237.yaml",
}
#: window ends, seconds before the demo end: on the 5-minute marks, between them and the phase, on the phase
ENDS = {"marks": 0.0, "between": 137.5, "phase": None}


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """(work folder, the raw TSDB, a Prometheus over it, the shipped history groups)."""
    need_prometheus()
    work = tmp_path_factory.mktemp("prom-history-rules")
    sim = FleetSimulator(end=DEMO_END)
    om = work / "history.om"
    write_history_openmetrics(sim, om, f"{HISTORY}s", SAMPLE_S)
    tsdb = work / "tsdb"
    blocks_from_openmetrics(om, tsdb)
    server = PrometheusServer(tsdb, work)
    # the shipped rule file's history groups (cluster label included), as a user installs them
    shipped = yaml.safe_load((ROOT / "deploy" / "prometheus" / "gpu-alerts.yaml").read_text())["groups"]
    mine = [g for g in shipped if g["name"] in (history_rules.EVENTS_GROUP, history_rules.INPUTS_GROUP)]
    assert len(mine) == 2
    yield work, tsdb, server, mine
    server.stop()


@pytest.fixture(scope="module", params=sorted(PHASES), ids=lambda p: f"phase{p}ms")
def ruled(request, raw):
    """A Prometheus with the raw series and the recorded history, its events group at ``PHASES`` phase; (the
    Prometheus, the phase in seconds)."""
    work, tsdb, raw_server, groups = raw
    phase_ms = request.param
    assert promtool_phase_ms(history_rules.EVENTS_GROUP, PHASES[phase_ms], STEP_S) == phase_ms
    end = DEMO_END.timestamp()
    server = with_rules(tsdb, raw_server.url, groups, PHASES[phase_ms], end - HISTORY, end, work / f"phase-{phase_ms}")
    got = requests.get(
        f"{server.url}/api/v1/query",
        params={"query": f"{history_rules.RULE['not_ready']}[{HISTORY}s]", "time": end},
        timeout=60,
    ).json()["data"]["result"]
    # every evaluation of the group at the chosen phase
    assert {round(float(t) * 1000) % 300_000 for r in got for t, _ in r["values"]} == {phase_ms}
    yield server, phase_ms / 1000
    server.stop()


def _end(at: str, phase: float) -> pd.Timestamp:
    before = STEP_S - phase if ENDS[at] is None else ENDS[at]
    return pd.Timestamp(DEMO_END) - pd.Timedelta(milliseconds=round(before * 1000))


def _both(server, end: pd.Timestamp, node=None):
    src = PrometheusSource(server.url, end=end)
    return {p: prometheus_history(src, WINDOW, node, path=p) for p in ("raw", "rules")}


@pytest.mark.prometheus
@pytest.mark.parametrize("at", list(ENDS))
def test_the_recorded_history_is_the_raw_history_at_every_phase(ruled, at):
    server, phase = ruled
    got = _both(server, _end(at, phase))
    raw, rules = history_frame(got["raw"]), history_frame(got["rules"])
    # the demo's planted cases are in the window: XIDs (the windowed count), NotReady spells with an unreachable
    # one, restarts and an eviction's deleted pod, cordons (two shorter than a step)
    assert {"xid", "condition", "pod_restart", "cordon"} <= set(raw["signal"])
    assert UNREACHABLE in set(raw["detail"]) and len(raw[raw["signal"] == "xid"]) >= 10
    pd.testing.assert_frame_equal(rules, raw)
    assert got["rules"].missing == got["raw"].missing
    assert set(got["rules"].read) == set(got["raw"].read)
    assert all("recorded" in v for v in got["rules"].read.values())


@pytest.mark.prometheus
@pytest.mark.parametrize("node", ["l4-spot-0", "h200-infer-0"])
def test_one_node_reads_the_same_from_both(ruled, node):
    server, phase = ruled
    for at in ENDS:
        got = _both(server, _end(at, phase), node=node)
        assert len(got["raw"].events) and set(got["raw"].events["node"]) == {node}
        pd.testing.assert_frame_equal(history_frame(got["rules"]), history_frame(got["raw"]))


@pytest.fixture(scope="module")
def unevaluated(raw):
    """A Prometheus whose rules (phase 243.041 s) were evaluated up to the mark of the window's last XID and not
    at it, as a running Prometheus has not yet evaluated the mark before now: (the Prometheus, that mark)."""
    work, tsdb, raw_server, groups = raw
    xids = history_frame(prometheus_history(PrometheusSource(raw_server.url, end=DEMO_END), WINDOW, None, path="raw"))
    mark = xids[xids["signal"] == "xid"]["time"].max().timestamp()
    start = DEMO_END.timestamp() - HISTORY
    server = with_rules(tsdb, raw_server.url, groups, PHASES[243_041], start, mark, work / "unevaluated")
    yield server, mark
    server.stop()


@pytest.mark.prometheus
def test_the_last_mark_not_yet_evaluated_reads_the_raw_series(unevaluated):
    """A minute after a mark whose evaluation is 243 s after it: the XID at that mark is in both paths."""
    server, mark = unevaluated
    got = _both(server, pd.Timestamp(mark + 60, unit="s", tz="UTC"))
    raw, rules = history_frame(got["raw"]), history_frame(got["rules"])
    assert (raw[raw["signal"] == "xid"]["time"] == pd.Timestamp(mark, unit="s", tz="UTC")).any()
    pd.testing.assert_frame_equal(rules, raw)


@pytest.mark.prometheus
def test_the_path_is_chosen_by_what_the_prometheus_recorded(raw, ruled):
    raw_server, ruled = raw[2], ruled[0]
    end = DEMO_END.timestamp()
    start = end - WINDOW.total_seconds()
    assert history_path(PrometheusSource(ruled.url, end=DEMO_END), start, end) == "rules"
    assert history_path(PrometheusSource(raw_server.url, end=DEMO_END), start, end) == "raw"
    # a window that opens before the rules were recorded reads the raw series
    assert history_path(PrometheusSource(ruled.url, end=DEMO_END), end - HISTORY - 86400, end) == "raw"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A Prometheus holding only the recorded series written by gpulib/demo/history_recorded.py (the benchmark's
    data at fleet scale), and the demo history they were written from."""
    need_prometheus()
    from gpulib.demo.history import demo_history
    from gpulib.demo.history_recorded import write_recorded_openmetrics

    work = tmp_path_factory.mktemp("prom-history-generated")
    sim = FleetSimulator(end=DEMO_END)
    tsdb = work / "tsdb"
    for om in write_recorded_openmetrics(sim, work / "om", f"{HISTORY}s", chunk_s=3 * 86400):
        blocks_from_openmetrics(om, tsdb)
    server = PrometheusServer(tsdb, work)
    yield server, demo_history(sim)
    server.stop()


@pytest.mark.prometheus
def test_the_generated_recorded_series_give_the_demo_history(generated):
    """The same checks as tests/sources/test_prom_history_live.py makes of the raw path, on the recorded series
    alone: the XIDs of the windowed count, NotReady spells with their reason, restarts per node."""
    server, truth = generated
    end = pd.Timestamp(DEMO_END)
    src = PrometheusSource(server.url, end=DEMO_END)
    start = end.timestamp() - WINDOW.total_seconds()
    assert history_path(src, start, end.timestamp()) == "rules"
    hist = prometheus_history(src, WINDOW, None)
    ev = hist.events

    def want(signal):
        t = truth[truth["signal"] == signal]
        return t[(t["time"] > end - WINDOW) & (t["time"] <= end)]

    x, wx = ev[ev["signal"] == "xid"], want("xid")
    assert sorted(zip(x["node"], x["gpu"], x["code"])) == sorted(zip(wx["node"], wx["gpu"], wx["code"]))
    assert "DCGM_EXP_XID_ERRORS_COUNT" in hist.read["xid"]
    got, w = ev[ev["signal"] == "condition"], truth[(truth["signal"] == "condition") & (truth["end"] > end - WINDOW)]
    w = w[w["time"] <= end]
    assert list(zip(got["node"], got["detail"])) == list(zip(w["node"], w["detail"]))
    assert (got["detail"] == UNREACHABLE).sum() == 2
    assert all(abs(g - t) <= pd.Timedelta(seconds=STEP_S) for g, t in zip(got["time"], w["time"]))
    restarts = ev[ev["signal"] == "pod_restart"].groupby("node")["value"].sum()
    assert restarts.to_dict() == want("pod_restart").groupby("node")["value"].sum().to_dict()
    assert sorted(ev[ev["signal"] == "cordon"]["node"]) == sorted(want("cordon")["node"])
