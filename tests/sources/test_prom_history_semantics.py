"""The live node history reads each series the way its exporter writes it (gpulib/sources/prom_history.py), checked
against a fake Prometheus that holds exact series at the history's 300 s steps and answers each query the way
Prometheus would for those series:

* ``DCGM_EXP_XID_ERRORS_COUNT`` is a sliding-window count, one series per GPU and code while the code is in the
  window, plus a zero series without ``xid`` (NVIDIA/dcgm-exporter: internal/pkg/collector/expcollector.go @
  d5e5f510): a lone XID is one XID, a rise is new XIDs, a fall is not;
* the XID gauge is sticky: its value when the window opens is not an XID; a node without the count falls back to it;
* Ready ``unknown`` (the node controller lost the kubelet) is a NotReady spell whose reason is unreachable;
* restarts are per container: a deleted pod's series ends and is not a restart; a pod created in the window
  counts from 0;
* DCGM_EXP_GPU_HEALTH_STATUS and the fabric health summary/mask give spells when present.
"""

from __future__ import annotations

import re
from datetime import timedelta

import numpy as np
import pandas as pd

from gpulib.sources.prom_history import STEP_S, UNREACHABLE, prometheus_history

END = pd.Timestamp("2026-12-01T00:00:00Z")
WINDOW = timedelta(days=1)
T0 = END.timestamp() - WINDOW.total_seconds()
N = int(WINDOW.total_seconds() // STEP_S) + 1
STEPS = T0 + STEP_S * np.arange(N)


def at(k: int) -> pd.Timestamp:
    return pd.Timestamp(T0 + k * STEP_S, unit="s", tz="UTC")


def series(name: str, labels: dict, values: dict[int, float] | float, steps: range | None = None) -> dict:
    """One series: ``values`` a constant over ``steps`` (default: every step) or {step index: value} (absent
    elsewhere)."""
    if isinstance(values, dict):
        ks = sorted(values)
        v = [values[k] for k in ks]
    else:
        ks = list(steps if steps is not None else range(N))
        v = [float(values)] * len(ks)
    return {"metric": {"__name__": name, **labels}, "ts": STEPS[ks], "v": np.array(v, dtype=float)}


class FakePrometheus:
    """Holds exact series and answers the history's query shapes over them as Prometheus would: selectors by metric
    name and label matchers, ``count by (hosts)`` and ``count(last_over_time(...))`` presence, a trailing comparison
    as a filter, a series against itself a step before (``offset 300s``: the change queries), a query at one
    instant, ``and changes(...)`` (keeps the series that changed), ``and on (...) (max_over_time(...) > 0)``,
    ``xid!=""``, the join to ``kube_pod_info`` (keeps per-container series, adds ``node``) and the older
    ``sum by (node)`` of that join."""

    _host_labels = ("hostname", "Hostname")

    def __init__(self, data: list[dict]):
        self.end = END
        self.data = data
        self.queries: list[str] = []

    def _named(self, promql: str) -> list[dict]:
        names = set(re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{", promql)) | set(
            re.findall(r"\b((?:DCGM|kube)_[A-Za-z0-9_]+)\b", promql)
        )
        out = [s for s in self.data if s["metric"]["__name__"] in names and s["metric"]["__name__"] != "kube_pod_info"]
        for lab, want in re.findall(r'(condition|status)="([^"]*)"', promql):  # the tests ask for no node
            out = [s for s in out if s["metric"].get(lab) == want]
        m = re.search(r'status=~"([^"]+)"', promql)
        if m:
            out = [s for s in out if s["metric"].get("status") in m.group(1).split("|")]
        if 'xid!=""' in promql:
            out = [s for s in out if s["metric"].get("xid")]
        return out

    def _range_arrays(self, promql: str, start: float, end: float, step: float) -> list[dict]:
        self.queries.append(promql)
        found = self._named(promql)
        if promql.startswith("count by"):
            hosts = {next(s["metric"][h] for h in self._host_labels if h in s["metric"]) for s in found}
            return [{"metric": {"hostname": h}, "ts": STEPS[-1:], "v": np.ones(1)} for h in sorted(hosts)]
        if promql.startswith("count(last_over_time("):
            return [{"metric": {}, "ts": STEPS[-1:], "v": np.array([float(len(found))])}] if found else []
        if start == end:  # asked at one instant
            found = [{**s, "ts": s["ts"][s["ts"] == start], "v": s["v"][s["ts"] == start]} for s in found]
            found = [s for s in found if len(s["v"])]
        if f"offset {int(STEP_S)}s" in promql:
            found = [_against_step_before(s, promql) for s in found]
        inside = [(s, (s["ts"] >= start) & (s["ts"] <= end)) for s in found]  # the range asked for
        found = [{**s, "ts": s["ts"][k], "v": s["v"][k]} for s, k in inside if k.any()]
        if "and changes(" in promql:
            found = [s for s in found if len(np.unique(s["v"])) > 1]
        if "(max_over_time(" in promql and "> 0)" in promql:
            found = [s for s in found if s["v"].max() > 0]
        if "kube_pod_info" in promql:
            pods = {
                (i["metric"]["namespace"], i["metric"]["pod"]): i["metric"]["node"]
                for i in self.data
                if i["metric"]["__name__"] == "kube_pod_info"
            }
            found = [
                {**s, "metric": {**s["metric"], "node": pods[(s["metric"]["namespace"], s["metric"]["pod"])]}}
                for s in found
            ]
            if promql.startswith("sum by (node)"):
                return _sum_by_node(found)
        cmp = re.search(r"[)}]\s*(>=|>|!=|==)\s*(\d+)$", promql)
        if cmp:
            op, x = cmp.group(1), float(cmp.group(2))
            keep = {">": np.greater, ">=": np.greater_equal, "!=": np.not_equal, "==": np.equal}[op]
            found = [{**s, "ts": s["ts"][keep(s["v"], x)], "v": s["v"][keep(s["v"], x)]} for s in found]
            found = [s for s in found if len(s["v"])]
        if promql.endswith("== bool 0"):
            found = [{**s, "v": (s["v"] == 0).astype(float)} for s in found]
        return [{**s, "metric": {k: v for k, v in s["metric"].items() if k != "__name__"}} for s in found]


def _against_step_before(s: dict, promql: str) -> dict:
    """One series against itself a step before (``X offset 300s``), as the history's change queries ask: ``X !=
    X offset`` (a changed value), ``(X - X offset) > 0`` (a rise), ``(X < X offset) > 0`` (a reset to a count above
    0), ``X unless X offset`` (a series absent a step before; ``> 0`` when asked)."""
    k = np.rint((s["ts"] - T0) / STEP_S).astype(int)
    before = dict(zip(k, s["v"]))
    has = np.array([i - 1 in before for i in k], dtype=bool)
    prev = np.array([before.get(i - 1, np.nan) for i in k])
    v = s["v"]
    if " unless " in promql:
        keep, val = ~has, v
        if ") > 0)" in promql:
            keep &= v > 0
    elif " - " in promql:
        keep, val = has & (v - prev > 0), v - prev
    elif " < " in promql:
        keep, val = has & (v < prev) & (v > 0), v
    else:  # !=
        keep, val = has & (v != prev), v
    return {**s, "ts": s["ts"][keep], "v": val[keep]}


def _sum_by_node(found: list[dict]) -> list[dict]:
    per: dict[str, dict[float, float]] = {}
    for s in found:
        acc = per.setdefault(s["metric"]["node"], {})
        for t, v in zip(s["ts"], s["v"]):
            acc[float(t)] = acc.get(float(t), 0.0) + float(v)
    return [
        {"metric": {"node": n}, "ts": np.array(sorted(acc)), "v": np.array([acc[t] for t in sorted(acc)])}
        for n, acc in per.items()
    ]


def history(data: list[dict]) -> pd.DataFrame:
    return prometheus_history(FakePrometheus(data), WINDOW, None).events


def _xids(ev: pd.DataFrame) -> list[tuple]:
    x = ev[ev["signal"] == "xid"]
    return sorted(zip(x["node"], x["gpu"], x["code"], x["time"]))


W = {"window_size_in_ms": "300000"}


def test_the_windowed_xid_count_gives_each_xid_once_including_a_lone_one():
    gpu = {"hostname": "n1", "gpu": "5", **W}
    data = [
        # the exporter's zero series (no xid label) where no code is in the window
        series("DCGM_EXP_XID_ERRORS_COUNT", gpu, 0.0, [k for k in range(N) if k not in (10, 11, 20, 21, 22)]),
        # a lone XID 79: in the window for two steps
        series("DCGM_EXP_XID_ERRORS_COUNT", {**gpu, "xid": "79"}, {10: 1, 11: 1}),
        # two XID 13 a few minutes apart: 1, 2, then the first leaves the window
        series("DCGM_EXP_XID_ERRORS_COUNT", {**gpu, "xid": "13"}, {20: 1, 21: 2, 22: 1}),
        # the same code again much later: a new series sample after the code had left the window
        series("DCGM_EXP_XID_ERRORS_COUNT", {**gpu, "xid": "13"}, {200: 1}),
    ]
    data[-2]["ts"] = np.concatenate([data[-2]["ts"], data[-1]["ts"]])
    data[-2]["v"] = np.concatenate([data[-2]["v"], data[-1]["v"]])
    data.pop()
    assert _xids(history(data)) == [
        ("n1", "5", "13", at(20)),
        ("n1", "5", "13", at(21)),
        ("n1", "5", "13", at(200)),
        ("n1", "5", "79", at(10)),
    ]


def test_a_sticky_xid_gauge_carried_into_the_window_is_not_an_xid_and_a_node_without_the_count_falls_back():
    data = [
        # n1 runs the count: its gauge is not read (the count is exact)
        series("DCGM_EXP_XID_ERRORS_COUNT", {"hostname": "n1", "gpu": "0", **W}, 0.0),
        series(
            "DCGM_FI_DEV_XID_ERROR", {"hostname": "n1", "gpu": "0"}, {k: 13.0 if k < 50 else 79.0 for k in range(N)}
        ),
        # n2: the count is off; its 4.10 gauge holds XID 13 from before the window, then XID 79 at step 50
        series(
            "DCGM_FI_DEV_XID_ERROR", {"hostname": "n2", "gpu": "3"}, {k: 13.0 if k < 50 else 79.0 for k in range(N)}
        ),
        # n3: a 4.8 gauge that holds 43 the whole window: nothing happened in it
        series("DCGM_FI_DEV_XID_ERRORS", {"Hostname": "n3", "gpu": "1"}, 43.0),
    ]
    assert _xids(history(data)) == [("n2", "3", "79", at(50))]


def test_ready_unknown_is_a_not_ready_spell_whose_reason_is_unreachable():
    def cond(status, on):
        return series(
            "kube_node_status_condition",
            {"node": "n3", "condition": "Ready", "status": status},
            {k: float(k in on) for k in range(N)},
        )

    data = [
        cond("true", set(range(N)) - set(range(30, 36)) - set(range(60, 63))),
        cond("false", set(range(60, 63))),
        cond("unknown", set(range(30, 36))),
    ]
    ev = history(data)
    spells = ev[ev["signal"] == "condition"]
    assert list(zip(spells["time"], spells["end"], spells["code"], spells["detail"])) == [
        (at(30), at(36), "Ready", UNREACHABLE),
        (at(60), at(63), "Ready", "Ready=False"),
    ]


def test_restarts_are_per_container_and_a_deleted_pod_is_not_a_restart():
    def pod(ns, name, container, node, values):
        return [
            series(
                "kube_pod_container_status_restarts_total",
                {"namespace": ns, "pod": name, "container": container},
                values,
            ),
            series("kube_pod_info", {"namespace": ns, "pod": name, "node": node}, dict.fromkeys(values, 1.0)),
        ]

    data = [
        # restarted twice before the window, never since
        *pod("gpu-operator", "exporter-n4", "exporter", "n4", dict.fromkeys(range(N), 2.0)),
        # restarts once at step 10, deleted after step 40
        *pod("work", "worker-0", "main", "n4", {k: float(k >= 10) for k in range(41)}),
        # its replacement: created at step 41 with 0, restarts at step 60
        *pod("work", "worker-1", "main", "n4", {k: float(k >= 60) for k in range(41, N)}),
        # a pod created at step 70 that restarted before its first sample
        *pod("work", "worker-2", "main", "n4", dict.fromkeys(range(70, N), 1.0)),
        # two containers of one pod on n5: each restarts once, in the same step
        *pod("work", "two", "a", "n5", {k: float(k >= 90) for k in range(N)}),
        series(
            "kube_pod_container_status_restarts_total",
            {"namespace": "work", "pod": "two", "container": "b"},
            {k: 3.0 + (k >= 90) for k in range(N)},
        ),
    ]
    ev = history(data)
    r = ev[ev["signal"] == "pod_restart"]
    assert sorted(zip(r["node"], r["time"], r["value"])) == [
        ("n4", at(10), 1.0),
        ("n4", at(60), 1.0),
        ("n4", at(70), 1.0),
        ("n5", at(90), 2.0),
    ]


def test_gpu_health_and_fabric_health_are_read_when_present():
    gpu = {"hostname": "n6", "gpu": "2"}
    data = [
        series(
            "DCGM_EXP_GPU_HEALTH_STATUS",
            {**gpu, "health_watch": "ALL", "health_error_code": "DCGM_FR_XID_ERROR"},
            {k: 20.0 if 10 <= k < 13 else 0.0 for k in range(N)},
        ),
        series(
            "DCGM_EXP_GPU_HEALTH_STATUS", {**gpu, "health_watch": "THERMAL", "health_error_code": "DCGM_FR_OK"}, 0.0
        ),
        series("DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", gpu, {k: 3.0 if 5 <= k < 9 else 1.0 for k in range(N)}),
        series("DCGM_FI_DEV_FABRIC_HEALTH_MASK", gpu, {k: 2.0 if 5 <= k < 9 else 0.0 for k in range(N)}),
    ]
    hist = prometheus_history(FakePrometheus(data), WINDOW, None)
    ev = hist.events
    health = ev[ev["signal"] == "gpu_health"]
    assert list(zip(health["time"], health["end"], health["gpu"], health["code"], health["detail"])) == [
        (at(10), at(13), "2", "ALL", "FAIL DCGM_FR_XID_ERROR")
    ]
    fabric = ev[ev["signal"] == "fabric_health"]
    assert list(zip(fabric["time"], fabric["end"], fabric["code"], fabric["detail"])) == [
        (at(5), at(9), "limited_capacity", "limited_capacity, mask 0x2")
    ]
    assert hist.read["gpu_health"] == "DCGM_EXP_GPU_HEALTH_STATUS"
    assert hist.read["fabric_health"] == "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"


def test_absent_health_series_are_missing_not_healthy():
    hist = prometheus_history(FakePrometheus([]), WINDOW, None)
    assert {"gpu_health", "fabric_health", "xid"} <= set(hist.missing)
