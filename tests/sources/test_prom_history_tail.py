"""A window that ends between two 5-minute marks holds what happened since its last mark (the window's tail), on the
raw path and on the recorded path alike (gpulib/sources/prom_history.py), and counts nothing twice: an on-call
engineer runs node_health minutes after an alert, and an XID, a NotReady spell or a restart of the last minutes
must not be an all-clear.

A real Prometheus holds three nodes' kube-state-metrics and dcgm-exporter series, scraped every minute (15 s past
the minute), with events planted around the mark ``G`` and the window's end ``END`` = ``G`` + 210 s:

* tail-a (the windowed XID count, ``Hostname``): quiet until ``G``, then XID 79 on GPU 1 at ``G``+75 s, a restart
  at ``G``+75 s, Ready ``unknown`` from ``G``+135 s, fabric limited capacity (mask 0x4) on GPU 0 from ``G``+15 s;
* tail-b (the XID gauge, ``Hostname``): what the mark ``G`` already saw must not come again at ``END`` -- gauge 48
  (GPU 0, at ``G``-105 s) and 31 (GPU 1, ``G``-45 s), a restart at ``G``-45 s, a driver label change at ``G``-45 s,
  a Ready=False spell from ``G``-105 s to ``G``+15 s; in the tail: gauge 79 on GPU 0 (``G``+135 s), a restart
  (``G``+75 s), a counter reset 5 -> 1 (``G``+135 s), a new pod with 1 restart (``G``+135 s), a deleted pod (its
  series ends at ``G``+15 s: nothing), GPU health WARN on GPU 1 (``G``+75 s), ``up`` 0 (``G``+135 s), a cordon
  (``G``+195 s);
* tail-c (the windowed count, ``hostname``): XID 13 on GPU 0 at ``G``-45 s and again at ``G``+75 s (the count
  1 then 2), a cordon from ``G``-3585 s to ``G``+75 s, a driver label change at ``G``+195 s;
* tail-d (the windowed count, ``Hostname``): a node that joined 2 hours before ``G``, XID 79 on GPU 0 at ``G``+75 s.

Every series also has samples after ``END`` (a restart at ``G``+255 s on tail-a): none of them is in the window.
The recorded path is checked with the rules evaluated at a phase that evaluated the mark ``G`` before ``END`` and at
one that did not (promtool backfills up to ``END``), tests/helpers/promphase.py."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
import yaml

from gpulib.sources import history_rules
from gpulib.sources.prom_history import STEP_S, UNREACHABLE, prometheus_history
from gpulib.sources.prometheus import PrometheusSource
from tests.helpers.pinned import DEMO_END, ROOT, need_prometheus
from tests.helpers.promharness import PrometheusServer, blocks_from_openmetrics, history_frame, with_rules
from tests.helpers.promphase import promtool_phase_ms

G = DEMO_END.timestamp()  # a 5-minute mark
END = G + 210.0
WINDOW = timedelta(hours=3)
#: samples every minute, 15 s past it, from 17 hours before G (more than the last of the 48 coarse steps of a 30-day
#: presence query, prom_history._coarse) to 10 minutes after it
T = np.arange(G - 17 * 3600 + 15, G + 600, 60.0)
#: the events group's phase (ms) -> a rule file name that gives it (tests/sources/test_prom_history_rules_live.py
#: PHASES): 150.8 s, the mark G evaluated before END; 243.041 s, not yet
PHASES = {150_800: "rules-98272.yaml", 243_041: "rules-757.yaml"}
OLD, NEW = "550.54.15", "550.90.07"
DRIVER = "label_nvidia_com_cuda_driver_version_full"


def held(before: float, *changes: tuple[float, float]) -> np.ndarray:
    """A value per sample of ``T``: ``before``, then each (time, value) from that time on."""
    v = np.full(len(T), float(before))
    for t, x in changes:
        v[T >= G + t] = x
    return v


def during(a: float, b: float, value: float = 1.0) -> np.ndarray:
    """``value`` at the samples in [G + a, G + b), absent (NaN) elsewhere."""
    return np.where((T >= G + a) & (T < G + b), value, np.nan)


def counted(*xids: float) -> np.ndarray:
    """The windowed count of XIDs at ``G`` + each of ``xids``: how many are in (t - 300 s, t], absent when none."""
    n = sum(((T >= G + x) & (T < G + x + 300)).astype(float) for x in xids)
    return np.where(n > 0, n, np.nan)


def scenario() -> dict[str, list[tuple[dict, np.ndarray]]]:
    """metric -> [(labels, a value per sample of ``T``, NaN where the series has no sample)]."""
    a, b, c, d = {"Hostname": "tail-a"}, {"Hostname": "tail-b"}, {"hostname": "tail-c"}, {"Hostname": "tail-d"}
    joined = during(-7200, 1e9)  # tail-d's series
    ready = {"condition": "Ready"}
    win = {"window_size_in_ms": "300000"}  # NVIDIA/dcgm-exporter: internal/pkg/collector/expcollector.go @ d5e5f510
    pods = [
        ("tail-a", "tail-a-worker-0", "main", held(0, (75, 1), (255, 2)), held(1)),
        ("tail-b", "tail-b-worker-0", "main", held(0, (-45, 1), (75, 2)), held(1)),
        ("tail-b", "tail-b-worker-0", "sidecar", held(5, (135, 1)), held(1)),
        ("tail-b", "tail-b-worker-1", "main", during(135, 1e9), during(135, 1e9)),
        ("tail-b", "tail-b-old", "main", during(-1e9, 16, 3.0), during(-1e9, 16)),
        ("tail-c", "tail-c-worker-0", "main", held(0), held(1)),
    ]
    return {
        "kube_node_spec_unschedulable": [
            ({"node": "tail-a"}, held(0)),
            ({"node": "tail-b"}, held(0, (195, 1))),
            ({"node": "tail-c"}, held(0, (-3585, 1), (75, 0))),
        ],
        "kube_node_status_condition": [
            ({"node": "tail-a", **ready, "status": "true"}, held(1, (135, 0))),
            ({"node": "tail-a", **ready, "status": "false"}, held(0)),
            ({"node": "tail-a", **ready, "status": "unknown"}, held(0, (135, 1))),
            ({"node": "tail-b", **ready, "status": "true"}, held(1, (-105, 0), (15, 1))),
            ({"node": "tail-b", **ready, "status": "false"}, held(0, (-105, 1), (15, 0))),
            ({"node": "tail-b", **ready, "status": "unknown"}, held(0)),
            ({"node": "tail-c", **ready, "status": "true"}, held(1)),
            ({"node": "tail-d", **ready, "status": "true"}, joined),
        ],
        "up": [
            ({"job": "nvidia-dcgm-exporter", "node": "tail-a"}, held(1)),
            ({"job": "nvidia-dcgm-exporter", "node": "tail-b"}, held(1, (135, 0))),
            ({"job": "nvidia-dcgm-exporter", "node": "tail-c"}, held(1)),
            ({"job": "nvidia-dcgm-exporter", "node": "tail-d"}, joined),
        ],
        "kube_pod_container_status_restarts_total": [
            ({"namespace": "gpu-workloads", "pod": p, "container": k}, v) for _, p, k, v, _ in pods
        ],
        "kube_pod_info": list(
            {p: ({"namespace": "gpu-workloads", "pod": p, "node": n}, i) for n, p, _, _, i in pods}.values()
        ),
        "kube_node_labels": [
            ({"node": "tail-a", DRIVER: OLD}, held(1)),
            ({"node": "tail-b", DRIVER: OLD}, during(-1e9, -45)),
            ({"node": "tail-b", DRIVER: NEW}, during(-45, 1e9)),
            ({"node": "tail-c", DRIVER: OLD}, during(-1e9, 195)),
            ({"node": "tail-c", DRIVER: NEW}, during(195, 1e9)),
        ],
        "DCGM_EXP_XID_ERRORS_COUNT": [
            ({**a, "gpu": "0", **win}, held(0)),
            ({**a, "gpu": "1", **win}, np.where((T >= G + 75) & (T < G + 375), np.nan, 0.0)),
            ({**a, "gpu": "1", **win, "xid": "79"}, during(75, 375)),
            # XID 13 at G-45 s and G+75 s: the number in the exporter's last 300 s
            ({**c, "gpu": "0", **win}, np.where((T >= G - 45) & (T < G + 375), np.nan, 0.0)),
            ({**c, "gpu": "0", **win, "xid": "13"}, counted(-45, 75)),
            ({**d, "gpu": "0", **win}, np.where((T >= G + 75) & (T < G + 375), np.nan, joined)),
            ({**d, "gpu": "0", **win, "xid": "79"}, counted(75)),
        ],
        "DCGM_FI_DEV_XID_ERRORS": [
            ({**b, "gpu": "0"}, held(0, (-105, 48), (135, 79))),
            ({**b, "gpu": "1"}, held(0, (-45, 31))),
        ],
        "DCGM_EXP_GPU_HEALTH_STATUS": [
            (
                {**b, "gpu": "1", "health_watch": "PCIE", "health_error_code": "DCGM_FR_PCI_REPLAY_RATE"},
                held(0, (75, 10)),
            )
        ],
        "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY": [({**a, "gpu": "0"}, held(0, (15, 3)))],
        "DCGM_FI_DEV_FABRIC_HEALTH_MASK": [({**a, "gpu": "0"}, held(0, (15, 4)))],
        "DCGM_FI_DEV_GPU_TEMP": [({**h, "gpu": "0"}, held(40)) for h in (a, b, c)] + [({**d, "gpu": "0"}, joined * 40)],
    }


def write_openmetrics(path) -> None:
    out = []
    for name, series in scenario().items():
        out.append(f"# TYPE {name} {'unknown' if name.endswith('_total') else 'gauge'}")
        for labels, v in series:
            lab = ",".join(f'{k}="{x}"' for k, x in labels.items())
            out += [f"{name}{{{lab}}} {x:g} {t:.0f}" for t, x in zip(T, v) if not np.isnan(x)]
    out.append("# EOF")
    path.write_text("\n".join(out) + "\n")


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """(work folder, the raw TSDB, a Prometheus over it, the shipped history groups)."""
    need_prometheus()
    work = tmp_path_factory.mktemp("prom-history-tail")
    om = work / "tail.om"
    write_openmetrics(om)
    tsdb = work / "tsdb"
    blocks_from_openmetrics(om, tsdb)
    server = PrometheusServer(tsdb, work)
    shipped = yaml.safe_load((ROOT / "deploy" / "prometheus" / "gpu-alerts.yaml").read_text())["groups"]
    mine = [g for g in shipped if g["name"] in (history_rules.EVENTS_GROUP, history_rules.INPUTS_GROUP)]
    yield work, tsdb, server, mine
    server.stop()


@pytest.fixture(scope="module", params=sorted(PHASES), ids=lambda p: f"phase{p}ms")
def ruled(request, raw):
    """A Prometheus with the raw series and the rules evaluated up to END at ``PHASES`` phase: (it, phase s)."""
    work, tsdb, raw_server, groups = raw
    phase = request.param
    assert promtool_phase_ms(history_rules.EVENTS_GROUP, PHASES[phase], STEP_S) == phase
    server = with_rules(tsdb, raw_server.url, groups, PHASES[phase], G - 17 * 3600, END, work / f"phase-{phase}")
    # the mark G was evaluated (tail-b's Ready=False spell recorded at G + phase) only where the phase is before END
    got = PrometheusSource(server.url, end=DEMO_END)._range_arrays(
        f"count_over_time({history_rules.RULE['not_ready']}[1s])", G + phase / 1000, G + phase / 1000 + 1, 1
    )
    assert bool(got) == (G + phase / 1000 <= END)
    yield server, phase / 1000
    server.stop()


def _at(t: float) -> pd.Timestamp:
    return pd.Timestamp(t, unit="s", tz="UTC")


GAUGE = "gauge change (a repeat of the same XID is not visible)"
#: (time, end, node, gpu, signal, code, value, detail) of every event from the mark G on, written from the scenario:
#: at G what the mark saw (from (G - 300 s, G]), at END what came after it, each once
WANT = {
    (G, END, "tail-b", "", "condition", "Ready", 1.0, "Ready=False"),
    (G, None, "tail-b", "0", "xid", "48", 1.0, GAUGE),
    (G, None, "tail-b", "1", "xid", "31", 1.0, GAUGE),
    (G, None, "tail-b", "", "pod_restart", "", 1.0, ""),
    (G, None, "tail-b", "", "driver_change", NEW, 1.0, f"{OLD} -> {NEW}"),
    (G, None, "tail-b", "", "gfd_label", "nvidia.com/cuda.driver-version.full", 1.0, f"{OLD} -> {NEW}"),
    (G, None, "tail-c", "0", "xid", "13", 1.0, ""),
    (END, None, "tail-a", "1", "xid", "79", 1.0, ""),
    (END, None, "tail-a", "", "pod_restart", "", 1.0, ""),
    (END, None, "tail-a", "", "condition", "Ready", 1.0, UNREACHABLE),
    (END, None, "tail-a", "0", "fabric_health", "limited_capacity", 3.0, "limited_capacity, mask 0x4"),
    (END, None, "tail-b", "0", "xid", "79", 1.0, GAUGE),
    (END, None, "tail-b", "", "pod_restart", "", 3.0, ""),  # a rise, a reset to 1 and a new pod's 1
    (END, None, "tail-b", "1", "gpu_health", "PCIE", 10.0, "WARN DCGM_FR_PCI_REPLAY_RATE"),
    (END, END, "tail-b", "", "no_data", "dcgm-exporter", 1.0, ""),
    (END, None, "tail-b", "", "cordon", "", 1.0, ""),
    (END, None, "tail-c", "0", "xid", "13", 1.0, ""),
    (END, None, "tail-c", "", "driver_change", NEW, 1.0, f"{OLD} -> {NEW}"),
    (END, None, "tail-c", "", "gfd_label", "nvidia.com/cuda.driver-version.full", 1.0, f"{OLD} -> {NEW}"),
    (END, None, "tail-d", "0", "xid", "79", 1.0, ""),
}


def _since(ev: pd.DataFrame, t: float) -> set[tuple]:
    """The rows from ``t`` on, as :data:`WANT` has them."""
    ev = ev[ev["time"] >= _at(t)]
    return {
        (
            r.time.timestamp(),
            None if pd.isna(r.end) else r.end.timestamp(),
            r.node,
            r.gpu,
            r.signal,
            r.code,
            float(r.value),
            r.detail,
        )
        for r in ev.itertuples()
    }


@pytest.mark.prometheus
def test_the_window_holds_what_came_after_its_last_mark(raw):
    ev = history_frame(prometheus_history(PrometheusSource(raw[2].url, end=_at(END)), WINDOW, None, path="raw"))
    assert _since(ev, G) == WANT
    # a spell that ended in the tail ends at END: tail-c's cordon, seen from the first mark after it began
    cordon = ev[(ev["signal"] == "cordon") & (ev["node"] == "tail-c")]
    assert [(t.timestamp(), e.timestamp()) for t, e in zip(cordon["time"], cordon["end"])] == [(G - 3300, END)]


@pytest.mark.prometheus
def test_a_window_that_ends_on_a_mark_has_no_tail(raw):
    ev = history_frame(prometheus_history(PrometheusSource(raw[2].url, end=_at(G)), WINDOW, None, path="raw"))
    want = {(t, None if e in (END,) else e, *rest) for t, e, *rest in WANT if t == G}
    assert _since(ev, G) == want


@pytest.mark.prometheus
@pytest.mark.parametrize("node", [None, "tail-b", "tail-c"])
def test_both_paths_give_the_tail_whether_the_last_mark_was_evaluated_or_not(ruled, node):
    server, _ = ruled
    src = PrometheusSource(server.url, end=_at(END))
    got = {p: history_frame(prometheus_history(src, WINDOW, node, path=p)) for p in ("raw", "rules")}
    assert _since(got["raw"], G) == {w for w in WANT if node in (None, w[2])}
    pd.testing.assert_frame_equal(got["rules"], got["raw"])


@pytest.mark.prometheus
def test_node_health_right_after_an_xid_is_not_an_all_clear(raw, monkeypatch):
    """tail-a is quiet up to the mark G; at END it has had XID 79 (fallen off the bus: devastating, a hardware
    class, gpulib/data/xid/xid_catalog.csv), a restart, Ready unknown: an open fault on GPU 1, not OK."""
    from gpulib.run.verdict import fast_verdict

    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", raw[2].url)
    got = {}
    for t in (G, END):
        monkeypatch.setenv("GPUOPS_END", _at(t).isoformat())
        fv = fast_verdict("node_health", {"source": "prometheus", "node": "tail-a", "window": "1d"})
        assert not fv.errors
        got[t] = (fv.worst, fv.findings[0].title)
    assert got[G][0] == "ok"
    assert got[END][0] == "critical" and "GPU 1" in got[END][1]


@pytest.mark.prometheus
def test_a_node_that_joined_in_the_last_coarse_step_of_a_long_window_is_read(raw):
    """node_health reads 30 days (the rules' lookback): tail-d's series began 2 hours ago, inside the last of the
    presence query's 48 coarse steps (15 hours), which must reach the window's end."""
    hist = prometheus_history(PrometheusSource(raw[2].url, end=_at(END)), timedelta(days=30), "tail-d", path="raw")
    assert "xid" in hist.read
    assert _since(history_frame(hist), G) == {w for w in WANT if w[2] == "tail-d"}


@pytest.mark.prometheus
def test_the_tail_queries_carry_the_cluster_matcher(raw):
    """One cluster of a shared Prometheus (gpulib/sources/promql_scope.py): the tail's instant queries are scoped like
    the marks' range queries, so another cluster's tail is not this one's (these series have no cluster label)."""
    src = PrometheusSource(raw[2].url, end=_at(END), cluster="eu-1")
    sent = []
    instant = src.http.instant
    src.http.instant = lambda promql, at: sent.append(promql) or instant(promql, at)
    hist = prometheus_history(src, WINDOW, None, path="raw")
    assert sent and all('cluster="eu-1"' in q for q in sent)
    assert hist.events.empty
