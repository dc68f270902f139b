"""Node history from Prometheus (``prometheus`` and ``live`` backends): Kubernetes events expire after an hour, so
the history is read from the series kube-state-metrics and dcgm-exporter leave behind, each the way its exporter
writes it (https://github.com/kubernetes/kube-state-metrics/tree/main/docs/metrics; NVIDIA/dcgm-exporter:
etc/default-counters.csv @ d5e5f510):

* ``kube_node_spec_unschedulable`` == 1: cordoned, from the first to the last step it holds;
* ``kube_node_status_condition{condition="Ready"}`` with ``status="false"`` or ``status="unknown"`` == 1: a
  NotReady spell. ``unknown`` is what the node lifecycle controller sets when the kubelet stops posting status
  (kubernetes/kubernetes: pkg/controller/nodelifecycle/node_lifecycle_controller.go @ 0b1dcaba, reason
  ``NodeStatusUnknown``, "Kubelet stopped posting node status."): the spell's reason is "unreachable";
* ``kube_pod_container_status_restarts_total``, one counter per container (kube-state-metrics:
  docs/metrics/workload/pod-metrics.md @ c92fe0c5), joined to the node by ``kube_pod_info``: the increments of each
  series first (a drop is a reset), then summed per node; a series that ends (a deleted pod) adds nothing;
* ``kube_node_labels`` ``label_nvidia_com_cuda_driver_version_full`` changes (kube-state-metrics needs
  ``--metric-labels-allowlist=nodes=[nvidia.com/cuda.driver-version.full]``): driver changes;
* XIDs, per node from ``DCGM_EXP_XID_ERRORS_COUNT`` where that node's exporter emits it, else from the
  ``DCGM_FI_DEV_XID_ERRORS`` gauge (:func:`_xids`);
* ``DCGM_EXP_GPU_HEALTH_STATUS`` (WARN 10 / FAIL 20 per ``health_watch``) and
  ``DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY`` (2 unhealthy, 3 limited capacity) spells, with
  ``DCGM_FI_DEV_FABRIC_HEALTH_MASK``, where the exporter has them (off by default);
* ``up{job=~".*dcgm-exporter.*"}`` == 0: the exporter sent nothing (no data, not zero).

The steps are the 5-minute marks of the clock (multiples of :data:`STEP_S` since the epoch) in the window
(:func:`marks`), on both paths, and the window's end (to the millisecond) where it falls after its last mark: the
tail, what happened since that mark (a node_health run minutes after an alert sees the alert's XID). At the end a
state (cordon, Ready false/unknown, ``up`` 0, GPU and fabric health) is the one at the end, and a change looks back
to the last mark instead of a step (:func:`arrays`): the windowed XID count's maximum over [last mark, end], the
gauge, the restart counters and the driver label against themselves at the last mark (``offset`` the time since
it). Prometheus evaluates ``X offset d`` at ``t`` as the last sample in [t - d - 5m, t - d] and ``X[d]`` as the
samples in [t - d, t] (prometheus/prometheus: promql/engine.go @ 225c6112, ``vectorSelectorSingle``,
``matrixIterSlice``: ``t >= mint``), so the tail holds what the next mark will hold of what came by the end and
nothing the last mark counted. A tail event is at the end; a spell still on at the last mark and off at the end
ends at the end.

Where this Prometheus records the history's recording rules (:mod:`gpulib.sources.history_rules`) over the
whole window, the same questions are asked of the recorded series instead (:func:`history_path`): each rule holds
the raw path's per-step expression at the last mark at or before its evaluation, so the history reads a few sparse
series and Prometheus does not walk every raw sample of the window. The value for the mark ``g`` is written at
``g`` plus the rule group's evaluation phase (a hash of the group and its rule file's path: any millisecond of the
5 minutes), so it is read at ``g`` from ``[g, g + 299.999 s]`` (:func:`recorded`; Prometheus 2.x range selectors
include their left end). The window's last mark may not be evaluated yet (a window that ends now): it is asked of
the raw series with the rule's own expression (:class:`Recorded`), and so is the tail, which no rule records (the
next mark is evaluated after the end), looking back to the last mark (``history_rules.step_expr``'s ``back``). So
both paths give the same events, times included, at any phase (tests/sources/test_prom_history_rules_live.py,
tests/sources/test_prom_history_tail.py). Two readings differ from the raw
path: whether an input is there at all is the hourly presence count (per host for the XID signals, per ``job``
elsewhere, so a node filter does not narrow it), and a driver change in the hour before the window opens can show
both values as the window's first.

A signal whose series this Prometheus does not hold at all over the window is reported in ``missing`` with its
name, so the preflight can say which series this Prometheus lacks.

Every query asks for changes, not samples, so what comes back grows with the events, not with the nodes x steps of
the window (a 30-day report reads 90 days: 25,920 steps per series): a filter (``== 1``, ``== 0``, ``> 0``) returns
only the steps a spell holds; a change is a step whose value differs from the step before (``X != X offset 300s``,
``X - X offset 300s``), a new series one absent a step before (``X unless X offset 300s``); whether a series exists
at all is a ``count`` at :data:`PRESENCE_STEPS` coarse steps. One reading differs from a sample-by-sample walk: the
XID gauge's value after a hole in its series (an exporter gap) is compared with nothing, so an XID whose code the
gauge took during the gap is not counted (the windowed count, where exported, still counts it).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpulib.core.schema import HISTORY_COLUMNS
from gpulib.core.validate import promql_string
from gpulib.sources.history import NodeHistory
from gpulib.sources.history_rules import PRESENCE, RULE, input_selector, step_expr
from gpulib.sources.signals import aliases

#: the step of the history queries: a NotReady spell or a cordon shorter than this can be missed
STEP_S = 300.0
#: presence queries ask "which nodes had this series" at this many coarse steps over the window, so each step
#: loads a slice of the samples, not all of them at once
PRESENCE_STEPS = 48
#: the detail of a NotReady spell whose Ready condition was Unknown (the node controller lost the kubelet)
UNREACHABLE = "Ready=Unknown: unreachable"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
GPU_HEALTH = "DCGM_EXP_GPU_HEALTH_STATUS"
FABRIC_SUMMARY = "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"
FABRIC_MASK = "DCGM_FI_DEV_FABRIC_HEALTH_MASK"
#: DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY values (NVIDIA/go-dcgm: pkg/dcgm/dcgm_fields.h @ b7fa3154)
FABRIC_STATES = {2: "unhealthy", 3: "limited_capacity"}
#: dcgm.HealthResult values (NVIDIA/go-dcgm: pkg/dcgm/const.go @ b7fa3154)
HEALTH_RESULTS = {10: "WARN", 20: "FAIL"}
#: a recorded sample's reach: one step less a millisecond, from the mark on (a negative offset), so that a mark
#: reads the one sample written for it
RECORDED_RANGE = f"{int(STEP_S * 1000) - 1}ms"
#: how far a change looks back from a mark: to the mark before
BACK = f"{int(STEP_S)}s"


def recorded(key: str, selector: str = "") -> str:
    """The recorded series of :data:`gpulib.sources.history_rules.RULE` ``key`` as read at each mark ``g``: the
    sample in ``[g, g + 299.999 s]``, the one the rule wrote for ``g``."""
    return f"last_over_time({RULE[key]}{selector}[{RECORDED_RANGE}] offset -{RECORDED_RANGE})"


def marks(end: float, seconds: float) -> tuple[float, float]:
    """(first, last) 5-minute mark of the window of ``seconds`` that ends at ``end``: the steps of both paths."""
    return math.ceil((end - seconds) / STEP_S) * STEP_S, math.floor(end / STEP_S) * STEP_S


class Recorded:
    """A recorded series as the history reads it: :func:`recorded` at every mark, and where a series has no sample
    at the last mark (its evaluation may still be to come), the rule's own expression
    (:func:`gpulib.sources.history_rules.step_expr`) on the raw series there, and the same looking back to the last
    mark at the window's tail (:func:`arrays`), joined per series (the labels less the metric name and the cluster
    label)."""

    def __init__(self, key: str, node: str | None, by: tuple[str, ...], change: str = ""):
        self.key, self.node, self.by, self.change = key, node, by, change

    def arrays(self, src, first: float, end: float) -> list[dict]:
        last, back = _last(end)
        extra = f'change="{self.change}"' if self.change else ""
        terms = [recorded(self.key, _sel(b, self.node, extra)) for b in (self.by if self.node else ("",))]
        got = src._range_arrays(" or ".join(terms), first, last, STEP_S) if last >= first else []
        fresh = src._range_arrays(step_expr(self.key, self.change), last, last, STEP_S) if last >= first else []
        tail = src._instant_arrays(step_expr(self.key, self.change, back), end) if back else []
        if self.node:
            fresh, tail = (
                [r for r in x if any(r["metric"].get(b) == self.node for b in self.by)] for x in (fresh, tail)
            )
        labels = {"change": self.change} if extra else {}
        fresh, tail = ([{**r, "metric": {**r["metric"], **labels}} for r in x] for x in (fresh, tail))
        drop = {"__name__", getattr(getattr(src, "settings", None), "cluster_label", "cluster")}
        return _join([(r, False) for r in got] + [(r, True) for r in fresh] + [(r, False) for r in tail], drop, last)


def _join(parts: list[tuple[dict, bool]], drop: set[str], last: float) -> list[dict]:
    """The series of ``parts`` (each ``(series, late)``, in time order) joined by their labels less ``drop``; a late
    part (the last mark asked of the raw series) only where the series has no sample at that mark."""
    series: dict[tuple, dict] = {}
    for r, late in parts:
        key = tuple(sorted((k, v) for k, v in r["metric"].items() if k not in drop))
        acc = series.setdefault(key, {"metric": r["metric"], "ts": [], "v": []})
        if late and acc["ts"] and acc["ts"][-1][-1:].tolist() == [last]:
            continue  # the mark was evaluated: its recorded value is the same
        acc["ts"].append(np.asarray(r["ts"], dtype=float))
        acc["v"].append(np.asarray(r["v"], dtype=float))
    return [
        {"metric": r["metric"], "ts": np.concatenate(r["ts"]), "v": np.concatenate(r["v"])} for r in series.values()
    ]


def _last(end: float) -> tuple[float, str]:
    """The window's last mark and, when ``end`` is after it, the time since it as a PromQL duration (milliseconds,
    Prometheus' resolution), else ``""``: the window has no tail."""
    last = math.floor(end / STEP_S) * STEP_S
    ms = round(end * 1000) - round(last * 1000)
    return last, f"{ms}ms" if ms > 0 else ""


def looking_back(template: str):
    """A change query as a function of its look-back (:func:`arrays`): ``template`` with ``{back}`` for it."""
    return lambda back: template.replace("{back}", back)


def arrays(src, promql, first: float, end: float) -> list[dict]:
    """``promql`` at every mark from ``first`` to the last at or before ``end``, and at ``end`` when it is after
    that mark (the window's tail). ``promql``: a :class:`Recorded`, a query on the raw series, or a function of the
    look-back of a change query (:data:`BACK` at the marks; from the tail, back to the last mark, so that what
    the last mark counted is not counted again; a state is the one at ``end``)."""
    if isinstance(promql, Recorded):
        return promql.arrays(src, first, end)
    last, back = _last(end)
    build = promql if callable(promql) else (lambda _: promql)
    got = src._range_arrays(build(BACK), first, last, STEP_S) if last >= first else []
    tail = src._instant_arrays(build(back), end) if back else []
    return _join([(r, False) for r in got + tail], set(), last)


def history_path(src, start: float, end: float) -> str:
    """``rules`` when this Prometheus recorded the history's input presence both in the window's first hours and at
    its end (the rules were installed, or backfilled, before the window opened), else ``raw``."""
    first = start + 7200
    if end - first < STEP_S:
        return "raw"
    res = src._range_arrays(f"count(last_over_time({PRESENCE}[7200s]))", first, end, end - first)
    return "rules" if res and len(res[0]["ts"]) >= 2 else "raw"


def _sel(label: str, node: str | None, extra: str = "", scope: str = "") -> str:
    parts = [p for p in (scope, extra, f"{label}={promql_string(node)}" if node else "") if p]
    return "{" + ",".join(parts) + "}"


def _row(t, node, signal, *, end=None, gpu="", code="", value=1.0, detail="", origin=""):
    stop = pd.Timestamp(end, unit="s", tz="UTC") if end else pd.NaT
    return {
        "time": pd.Timestamp(t, unit="s", tz="UTC"),
        "end": stop,
        "node": node,
        "gpu": gpu,
        "signal": signal,
        "code": code,
        "value": value,
        "detail": detail,
        "origin": origin,
    }


def intervals(ts: np.ndarray, v: np.ndarray, step: float) -> list[tuple[float, float | None]]:
    """(start, end) of each run of steps where ``v`` is 1; a run still on at the last sample has end None; a hole
    in the samples longer than two steps ends a run."""
    out, start, prev = [], None, None
    for t, x in zip(ts, v):
        if start is not None and prev is not None and t - prev > 2 * step:
            out.append((start, prev + step))
            start = None
        if x >= 1 and start is None:
            start = t
        elif x < 1 and start is not None:
            out.append((start, t))
            start = None
        prev = t
    if start is not None:
        out.append((start, None))
    return out


def window_arrivals(ts: np.ndarray, v: np.ndarray, step: float) -> list[tuple[float, float]]:
    """(time, how many) of the XIDs that entered a sliding-window count series (``DCGM_EXP_XID_ERRORS_COUNT``: the
    number of XIDs of one code in the exporter's last ``window_size_in_ms``, a series only while that code is in
    the window; NVIDIA/dcgm-exporter: internal/pkg/collector/expcollector.go @ d5e5f510). The first sample counts
    (the series appears when the XID arrives); a rise is that many new XIDs; a fall is XIDs leaving the window,
    not an event; a series that was gone for more than a step and comes back starts from zero."""
    out, prev, last = [], 0.0, None
    for t, x in zip(ts, v):
        if last is not None and t - last > 1.5 * step:
            prev = 0.0
        if x > prev:
            out.append((t, x - prev))
        prev, last = x, t
    return out


def _terms(src, metric: str, node: str | None, extra: str = "", scope: str = "") -> list[str]:
    """``metric`` under every name it has had and either host label when a node is given (join them by ``or``)."""
    hosts = src._host_labels if node else ("",)
    return [f"{name}{_sel(h, node, extra, scope)}" for name in aliases(metric) for h in hosts]


def spells(ts: np.ndarray, end: float) -> list[tuple[float, float | None]]:
    """(start, end) of each run of consecutive steps in ``ts`` (the steps a filtered query, ``X > 0``, returned): a
    run ends at the step after its last (:func:`_next`), or is open (None) when it lasts to the window's end."""
    out = []
    for a, b in intervals(ts, np.ones(len(ts)), STEP_S):
        last = float(ts[ts >= a][ts[ts >= a] < b][-1]) if b is not None else float(ts[-1])
        out.append((a, _next(last, end)))
    return out


def _next(last: float, end: float) -> float | None:
    """The step after ``last``: the next mark, or ``end`` when ``last`` is the window's last mark and the window
    has a tail; None when ``last`` is the window's last step (``end``): the run is open."""
    return None if last >= end else min(last + STEP_S, end)


def _either(src, metric: str, node: str | None, extra: str = "", scope: str = "") -> str:
    return " or ".join(_terms(src, metric, node, extra, scope))


def _host(src, metric: dict) -> str:
    return next((metric[h] for h in src._host_labels if metric.get(h)), "")


def _present(src, metric: str, node, scope: str, start: float, end: float, rules: bool = False) -> set[str]:
    """The nodes (host label values) that had any series of ``metric`` (any name) in [start, end]: a range query at
    :data:`PRESENCE_STEPS` coarse steps of ``count by (hosts) (last_over_time(...[step]))``; on the rules path, of
    the input's hourly presence count (a node label when the rule counts per ``job``: any node)."""
    first, top, step = _coarse(start, end)
    by = ", ".join(src._host_labels)
    if rules:
        hosts = src._host_labels if node else ("",)
        terms = [f"{PRESENCE}{_sel(h, node, f'input={chr(34)}{metric}{chr(34)}')}" for h in hosts]
        if metric in (GPU_HEALTH, FABRIC_SUMMARY):  # counted per job: present for every node, or none
            return {"*"} if _exists(src, input_selector(metric), start, end) else set()
    else:
        terms = _terms(src, metric, node, scope=scope)
    terms = " or ".join(f"last_over_time({t}[{int(step)}s])" for t in terms)
    res = src._range_arrays(f"count by ({by}) ({terms})", first, top, step)
    return {h for r in res if (h := _host(src, r["metric"]))}


def runs(ts: np.ndarray, end: float) -> list[tuple[float, float | None]]:
    """(start, end) of each run of consecutive steps in ``ts`` (the steps a filter such as ``X == 1`` kept): a run
    ends at the step after its last step (:func:`_next`), or is open (None) when its last step is the window's last."""
    ts = np.sort(np.asarray(ts, dtype=float))
    if not len(ts):
        return []
    cut = np.flatnonzero(np.diff(ts) > 1.5 * STEP_S)
    firsts, lasts = np.r_[ts[:1], ts[cut + 1]], np.r_[ts[cut], ts[-1:]]
    return [(float(a), _next(float(b), end)) for a, b in zip(firsts, lasts)]


def _exists(src, selector: str, start: float, end: float) -> bool:
    """Whether any series of ``selector`` was there in [start, end]: ``count(last_over_time(...))`` at
    :data:`PRESENCE_STEPS` coarse steps (a few points, whatever the window)."""
    first, top, step = _coarse(start, end)
    return bool(src._range_arrays(f"count(last_over_time({selector}[{int(step)}s]))", first, top, step))


def _coarse(start: float, end: float) -> tuple[int, int, int]:
    """(first, last, step) of the :data:`PRESENCE_STEPS` coarse steps of a presence query over [start, end]: whole
    seconds, the last at or just after ``end`` (the steps of a range query stop at its end or before it), each
    reading the step before it (``last_over_time(...[step])``)."""
    step = max(int(STEP_S), math.ceil((end - start) / PRESENCE_STEPS))
    top = math.ceil(end)
    return top - (top - math.floor(start)) // step * step, top, step


def prometheus_history(src, window, node: str | None, path: str | None = None) -> NodeHistory:
    """The node history of ``src`` (a PrometheusSource) over ``window``, from the recorded series (``path``
    ``rules``) or the raw ones (``raw``); None: :func:`history_path` chooses."""
    # the window's end to the millisecond before it: Prometheus' timestamps are milliseconds (prometheus/prometheus:
    # model/timestamp/timestamp.go @ 225c6112, FromTime)
    end = pd.Timestamp(src.end).value // 1_000_000 / 1000
    start, last = marks(end, window.total_seconds())
    rules = (path or history_path(src, start, last)) == "rules"
    scope = ""  # the cluster matcher is added to every query the source sends (gpulib/sources/promql_scope.py)
    rows, read, missing = [], {}, {}

    def q(name: str, selector: str, promql: str, signal: str | tuple, at: float | None = None, skip: int = 0):
        """``promql`` over the window less its first ``skip`` steps (or at ``at`` alone); ``signal`` read when
        ``selector`` has any series."""
        res = arrays(src, promql, at or start + skip * STEP_S, at or end)
        there = bool(res) or _exists(src, selector, start, end)
        for s in signal if isinstance(signal, tuple) else (signal,):
            (read if there else missing)[s] = name if there else f"no {name} series in this Prometheus"
        return res

    cordon = "kube_node_spec_unschedulable" + _sel("node", node, "", scope)
    if rules:
        cordon, expr = input_selector("kube_node_spec_unschedulable"), Recorded("cordon", node, ("node",))
    else:
        expr = f"{cordon} == 1"
    for r in q("kube_node_spec_unschedulable", cordon, expr, "cordon"):
        for a, b in runs(r["ts"], end):
            rows.append(_row(a, r["metric"].get("node", ""), "cordon", end=b, origin="kube_node_spec_unschedulable"))
    rows += _not_ready(q, node, scope, end, rules)
    rows += _restarts(q, node, scope, start, end, rules)
    rows += _drivers(q, node, scope, start, rules)
    rows += _xids(src, node, scope, start, end, read, missing, rules)
    rows += _health(src, node, scope, start, end, read, missing, rules)
    up = (
        'up{job=~".*dcgm-exporter.*"'
        + "".join(f",{p}" for p in (scope, f"node={promql_string(node)}" if node else "") if p)
        + "}"
    )
    down = up + " == 0"
    if rules:
        up, down = input_selector("up"), Recorded("exporter_down", node, ("node",))
    for r in q("up (dcgm-exporter)", up, down, "no_data"):
        for a, b in runs(r["ts"], end):
            rows.append(
                _row(
                    a,
                    r["metric"].get("node", ""),
                    "no_data",
                    end=b or end,
                    code="dcgm-exporter",
                    origin="up{job=dcgm-exporter}",
                )
            )
    if rules:
        read = {k: f"{v} (recorded: gpu-runbooks.history rules)" for k, v in read.items()}
    return NodeHistory(pd.DataFrame(rows, columns=HISTORY_COLUMNS), read, missing)


def _drivers(q, node, scope, start: float, rules: bool = False) -> list[dict]:
    """Driver changes from ``kube_node_labels``' driver label: each node's value when the window opens, then each
    step where a node shows a value it did not show a step before (a new label value is a new series)."""
    label = "label_nvidia_com_cuda_driver_version_full"
    sel = f"kube_node_labels{_sel('node', node, label + '!=' + chr(34) * 2, scope)}"
    name, signals = "kube_node_labels (driver label)", ("driver_change", "gfd_label")
    first, new = sel, looking_back(f"{sel} unless {sel} offset {{back}}")
    if rules:
        sel, first = input_selector("kube_node_labels"), f"last_over_time({RULE['driver']}{_sel('node', node)}[1h])"
        new = Recorded("driver_new", node, ("node",))
    seen = [(start, r) for r in q(name, sel, first, signals, at=start)]
    # from the second step: what the first step holds is the baseline read above
    seen += [(float(t), r) for r in q(name, sel, new, signals, skip=1) for t in r["ts"]]
    by_node: dict[str, list[tuple[float, str]]] = {}
    for t, r in seen:
        by_node.setdefault(r["metric"].get("node", ""), []).append((t, r["metric"].get(label, "")))
    rows = []
    for n, samples in by_node.items():
        cur = None
        for t, new in sorted(samples):
            if cur is not None and new != cur:
                for sig, code in (("driver_change", new), ("gfd_label", "nvidia.com/cuda.driver-version.full")):
                    rows.append(_row(t, n, sig, code=code, detail=f"{cur} -> {new}", origin="kube_node_labels"))
            cur = new
    return rows


def _not_ready(q, node, scope, end: float, rules: bool = False) -> list[dict]:
    """NotReady spells: Ready ``false`` or ``unknown`` (the node controller cannot reach the kubelet), one spell per
    run of steps where either holds; its detail says which, ``unknown`` as :data:`UNREACHABLE`."""
    cond = 'condition="Ready",status=~"false|unknown"'
    sel = "kube_node_status_condition" + _sel("node", node, cond, scope)
    per_node: dict[str, dict[float, set[str]]] = {}
    expr = f"{sel} == 1"
    if rules:
        sel, expr = input_selector("kube_node_status_condition"), Recorded("not_ready", node, ("node",))
    for r in q("kube_node_status_condition", sel, expr, "condition"):
        steps = per_node.setdefault(r["metric"].get("node", ""), {})
        for t in r["ts"]:
            steps.setdefault(float(t), set()).add(r["metric"].get("status", "false"))
    rows = []
    for n, steps in per_node.items():
        ts = np.array(sorted(steps))
        for a, b in runs(ts, end):
            seen = set().union(*(steps[t] for t in ts if t >= a and (b is None or t < b)))
            detail = UNREACHABLE if "unknown" in seen else "Ready=False"
            rows.append(
                _row(a, n, "condition", end=b, code="Ready", detail=detail, origin="kube_node_status_condition")
            )
    return rows


def _restarts(q, node, scope, start: float, end: float, rules: bool = False) -> list[dict]:
    """Container restarts per node: each container's counter read on its own, joined to its node by
    ``kube_pod_info``, as the steps it changed only: a rise is that many restarts, a drop is a reset (the new value
    is the count since), a series that starts after the window opened is a pod created in the window (its first
    value counts); then summed per node and step. A series that ends (a deleted pod) adds nothing; a counter
    carried into the window is its baseline, not restarts."""
    x = f"kube_pod_container_status_restarts_total{_sel('', None, '', scope)}"
    off = f"{x} offset {{back}}"
    on_node = (
        f" * on (namespace, pod) group_left (node) max by (namespace, pod, node) "
        f"(kube_pod_info{_sel('node', node, '', scope)})"
    )
    name = "kube_pod_container_status_restarts_total with kube_pod_info"
    per: dict[tuple[str, float], float] = {}
    # a series already there in the window's first two steps was there when it opened: its count is a baseline
    exprs = [(0, f"(({x} - {off}) > 0)"), (0, f"(({x} < {off}) > 0)"), (2, f"(({x} unless {off}) > 0)")]
    exprs = [(skip, looking_back(e + on_node)) for skip, e in exprs]
    if rules:  # the same three changes, per container first, summed per node by the rule
        x = input_selector("kube_pod_container_status_restarts_total")
        change = ("rise", "reset", "new")
        exprs = [(s, Recorded("restarts", node, ("node",), c)) for (s, _), c in zip(exprs, change)]
    for skip, expr in exprs:
        for r in q(name, x, expr, "pod_restart", skip=skip):
            for t, d in zip(r["ts"], r["v"]):
                key = (r["metric"].get("node", ""), float(t))
                per[key] = per.get(key, 0.0) + float(d)
    return [
        _row(t, n, "pod_restart", value=d, origin="kube_pod_container_status_restarts_total")
        for (n, t), d in sorted(per.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]


def _xids(src, node, scope, start, end, read: dict, missing: dict, rules: bool = False) -> list[dict]:
    """XIDs per node: from ``DCGM_EXP_XID_ERRORS_COUNT`` (:func:`window_arrivals`, one series per GPU and code; the
    series without an ``xid`` label is the exporter's zero) where the node's exporter emits it; elsewhere from the
    ``DCGM_FI_DEV_XID_ERRORS`` gauge's changes (either name, gpulib/data/sources/signals.csv): a sticky last value,
    so its value carried in from before the window is not an XID, and the same XID twice in a row shows once."""
    rows = []
    counted = _present(src, XID_COUNT, node, scope, start, end, rules)
    if counted:
        expr = " or ".join(f"max_over_time({t}[{{back}}])" for t in _terms(src, XID_COUNT, node, 'xid!=""', scope))
        expr = looking_back(expr)
        if rules:
            expr = Recorded("xid_count", node, tuple(src._host_labels))
        res = arrays(src, expr, start, end)
        for r in res:
            host = _host(src, r["metric"])
            for t, d in window_arrivals(r["ts"], r["v"], STEP_S):
                for _ in range(int(round(d))):
                    rows.append(
                        _row(
                            t,
                            host,
                            "xid",
                            gpu=r["metric"].get("gpu", ""),
                            code=r["metric"].get("xid", ""),
                            origin=XID_COUNT,
                        )
                    )
    gauged = _present(src, XID_GAUGE, node, scope, start, end, rules) - counted
    if gauged:
        # the steps where the gauge differs from the step before: its value carried in from before the window is
        # the baseline, not an XID, and the same XID twice in a row is one change
        terms = [f"({t} != {t} offset {{back}})" for t in _terms(src, XID_GAUGE, node, "", scope)]
        changes = Recorded("xid_gauge", node, tuple(src._host_labels)) if rules else looking_back(" or ".join(terms))
        for r in arrays(src, changes, start, end):
            host = _host(src, r["metric"])
            if host not in gauged:
                continue
            for t, v in zip(r["ts"], r["v"]):
                if t > start and v > 0:
                    rows.append(
                        _row(
                            t,
                            host,
                            "xid",
                            gpu=r["metric"].get("gpu", ""),
                            code=str(int(v)),
                            detail="gauge change (a repeat of the same XID is not visible)",
                            origin=XID_GAUGE,
                        )
                    )
    if counted or gauged:
        read["xid"] = "; ".join(
            f"{name} ({len(hosts)} node{'s' * (len(hosts) != 1)})"
            for name, hosts in ((XID_COUNT, counted), (f"{XID_GAUGE} changes", gauged))
            if hosts
        )
    else:
        missing["xid"] = f"no {XID_COUNT} or {' / '.join(aliases(XID_GAUGE))} series in this Prometheus"
    return rows


def _health(src, node, scope, start, end, read: dict, missing: dict, rules: bool = False) -> list[dict]:
    """``gpu_health`` spells (DCGM_EXP_GPU_HEALTH_STATUS WARN/FAIL per health watch; NVIDIA/dcgm-exporter:
    internal/pkg/collector/gpu_health_collector.go @ d5e5f510) and ``fabric_health`` spells (fabric summary
    unhealthy or limited capacity, with the fabric health mask at the spell's start), where they are exported."""
    rows = []

    def expr(key: str, raw: str):
        return Recorded(key, node, tuple(src._host_labels)) if rules else raw

    if _present(src, GPU_HEALTH, node, scope, start, end, rules):
        read["gpu_health"] = GPU_HEALTH
        health = expr("gpu_health", f"({_either(src, GPU_HEALTH, node, '', scope)}) > 0")
        for r in arrays(src, health, start, end):
            lab = r["metric"]
            for a, b in spells(r["ts"], end):
                worst = float(r["v"][(r["ts"] >= a) & ((r["ts"] < b) if b else True)].max())
                rows.append(
                    _row(
                        a,
                        _host(src, lab),
                        "gpu_health",
                        end=b,
                        gpu=lab.get("gpu", ""),
                        code=lab.get("health_watch", ""),
                        value=worst,
                        detail=f"{HEALTH_RESULTS.get(int(worst), worst)} {lab.get('health_error_code', '')}".strip(),
                        origin=GPU_HEALTH,
                    )
                )
    else:
        missing["gpu_health"] = f"no {GPU_HEALTH} series in this Prometheus (off in dcgm-exporter's default counters)"
    if not _present(src, FABRIC_SUMMARY, node, scope, start, end, rules):
        missing["fabric_health"] = f"no {FABRIC_SUMMARY} series in this Prometheus"
        return rows
    read["fabric_health"] = FABRIC_SUMMARY
    masks = {}
    for r in arrays(src, expr("fabric_mask", f"({_either(src, FABRIC_MASK, node, '', scope)}) != 0"), start, end):
        masks[(_host(src, r["metric"]), r["metric"].get("gpu", ""))] = (r["ts"], r["v"])
    summary = expr("fabric_summary", f"({_either(src, FABRIC_SUMMARY, node, '', scope)}) >= 2")
    for r in arrays(src, summary, start, end):
        lab, host = r["metric"], _host(src, r["metric"])
        for a, b in spells(r["ts"], end):
            state = int(r["v"][r["ts"] >= a][0])
            mts, mv = masks.get((host, lab.get("gpu", "")), (np.array([]), np.array([])))
            at = mv[mts >= a]
            detail = FABRIC_STATES.get(state, str(state)) + (f", mask 0x{int(at[0]):x}" if len(at) else "")
            rows.append(
                _row(
                    a,
                    host,
                    "fabric_health",
                    end=b,
                    gpu=lab.get("gpu", ""),
                    code=FABRIC_STATES.get(state, str(state)),
                    value=float(state),
                    detail=detail,
                    origin=FABRIC_SUMMARY,
                )
            )
    return rows
