"""Prometheus recording rules for the node history (:mod:`gpulib.sources.prom_history`): what the history asks of the
raw kube-state-metrics and dcgm-exporter series at each 5-minute step, computed once in the store, so that a 30-day
report (90 days of history) reads a few sparse recorded series instead of making Prometheus walk every raw sample
of 90 days (https://prometheus.io/docs/prometheus/latest/configuration/recording_rules/).

Two groups, generated with the alert rules (:func:`gpulib.xid.alerts.rules_document`):

* :data:`EVENTS_GROUP`, every :data:`STEP` (the history's step, ``prom_history.STEP_S``): each rule is the history's
  own per-step expression on the raw series (:func:`step_expr`), evaluated at the last 5-minute mark of the clock
  (a multiple of 300 s since the epoch) at or before the evaluation: ``last_over_time((expr)[299999ms:5m])``, a
  subquery, whose steps Prometheus aligns to multiples of its step (prometheus/prometheus: promql/engine.go @
  225c6112, "aligned with the step (multiple of 'newEv.interval')"), and whose 299.999 s (a range includes its
  left end: ``t >= mint`` in ``matrixIterSlice``, same file) hold exactly one mark. So the value recorded for the
  mark ``g``, written at ``g`` plus the group's phase, is what the raw path computes at ``g``, whatever the phase:
  Prometheus derives the phase from a hash of the group's name and its rule file's path (rules/manager.go @
  225c6112, ``Group.hash``, ``EvalTimestamp``), so it differs between installations, between a backfill by
  ``promtool`` and the running server, and after a rule file moves. Every rule is a filter or a change, so its series
  exist only while something happens (a quiet fleet records almost nothing):

  - ``node:kube_node_cordoned:5m`` -- ``kube_node_spec_unschedulable == 1``;
  - ``node:kube_node_not_ready:5m`` -- ``kube_node_status_condition{condition="Ready",status=~"false|unknown"} == 1``
    with ``status`` kept: ``unknown`` is what the node lifecycle controller sets when the kubelet stops posting
    status (kubernetes/kubernetes: pkg/controller/nodelifecycle/node_lifecycle_controller.go @ 0b1dcaba), read as
    NotReady, unreachable;
  - ``node:kube_pod_container_restarts:increase5m`` -- per container first (``kube_pod_container_status_restarts_total``
    is one counter per container: kube-state-metrics docs/metrics/workload/pod-metrics.md @ c92fe0c5), joined to
    its node by ``kube_pod_info``, then summed per node; ``change="rise"`` (a rise of the counter), ``"reset"`` (a
    drop: the new value is the count since the reset), ``"new"`` (a series that was not there a step before: a pod
    created, its first value counts). A series that ends (a deleted pod) records nothing;
  - ``node:kube_node_driver_label:new5m`` -- a ``kube_node_labels`` driver label value a node did not show a step
    before (a new label value is a new series);
  - ``node:dcgm_exporter_down:5m`` -- how many dcgm-exporter targets of the node have ``up`` 0
    (https://prometheus.io/docs/concepts/jobs_instances/#automatically-generated-labels-and-time-series);
  - ``gpu:dcgm_xid_errors_count:max5m`` -- ``max_over_time(DCGM_EXP_XID_ERRORS_COUNT{xid!=""}[5m])``, one series per
    GPU and XID code while that code is in the exporter's window (NVIDIA/dcgm-exporter:
    internal/pkg/collector/expcollector.go @ d5e5f510); the reader counts a series' first value and its rises;
  - ``gpu:dcgm_xid_errors:changes5m`` -- the XID gauge (``DCGM_FI_DEV_XID_ERRORS`` or its 4.9+ name, the signal
    contract gpulib/data/sources/signals.csv) where it differs from a step before (``X != X offset 5m``): the value
    is the new code, a value carried in is no change;
  - ``gpu:dcgm_gpu_health:gt0_5m``, ``gpu:dcgm_fabric_health_summary:ge2_5m``, ``gpu:dcgm_fabric_health_mask:ne0_5m``
    -- ``DCGM_EXP_GPU_HEALTH_STATUS > 0`` (NVIDIA/dcgm-exporter: internal/pkg/collector/gpu_health_collector.go @
    d5e5f510), ``DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY >= 2``, ``DCGM_FI_DEV_FABRIC_HEALTH_MASK != 0``.

* :data:`INPUTS_GROUP`, every hour: ``node:gpu_runbooks_history_input:count1h{input="<metric>"}`` counts the raw series
  of each input over the last hour (``last_over_time(X[1h])``, so a scrape interval longer than the lookback still
  counts), per host for the XID signals (the history reads the windowed count on the nodes that export it and the
  gauge elsewhere) and per ``job`` for the others: whether an input is there at all, and the driver label value per
  node (``node:kube_node_driver_label:1h``, the value a window opens with).

Every rule aggregates ``by`` the labels the history reads (the configurable cluster label is added by
:func:`gpulib.xid.alerts.with_cluster`), so a recorded series keeps well under 30 labels, and each rule reads raw
series only, not another recorded rule, so a remote rule evaluator gives the same values. Names follow
``level:metric:operations`` (https://prometheus.io/docs/practices/rules/). A Prometheus that installs these rules
late can backfill them with ``promtool tsdb create-blocks-from rules``
(https://prometheus.io/docs/prometheus/latest/storage/#backfilling-for-recording-rules).
"""

from __future__ import annotations

from typing import Any

from gpulib.sources.signals import aliases

__all__ = ["EVENTS_GROUP", "INPUTS_GROUP", "STEP", "history_groups", "PRESENCE", "RULE", "input_selector", "step_expr"]

EVENTS_GROUP = "gpu-runbooks.history"
INPUTS_GROUP = "gpu-runbooks.history-inputs"
#: the events group's interval: the history's step (prom_history.STEP_S)
STEP = "5m"
INPUTS_INTERVAL = "1h"
#: the events rules' subquery range: one step less a millisecond, so that it holds exactly one 5-minute mark on
#: Prometheus 2 (ranges include their left end). Prometheus 3 leaves the left end out (prometheus/prometheus:
#: promql/engine.go @ c5d009d5, v3.0.0: ``t > mintFloats``): there a group whose phase is 299.999 s records
#: nothing, and the reader (prom_history.recorded) misses the samples of phase 0.000 s: 2 of the 300,000
#: millisecond phases
ALIGN = "299999ms"
HOSTS = "Hostname, hostname"
DRIVER = "label_nvidia_com_cuda_driver_version_full"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
GPU_HEALTH = "DCGM_EXP_GPU_HEALTH_STATUS"
FABRIC_SUMMARY = "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"
FABRIC_MASK = "DCGM_FI_DEV_FABRIC_HEALTH_MASK"
RESTARTS = "kube_pod_container_status_restarts_total"
DCGM_UP = 'up{job=~".*dcgm-exporter.*"}'

#: the recorded metric of each history need
RULE = {
    "cordon": "node:kube_node_cordoned:5m",
    "not_ready": "node:kube_node_not_ready:5m",
    "restarts": "node:kube_pod_container_restarts:increase5m",
    "driver_new": "node:kube_node_driver_label:new5m",
    "driver": "node:kube_node_driver_label:1h",
    "exporter_down": "node:dcgm_exporter_down:5m",
    "xid_count": "gpu:dcgm_xid_errors_count:max5m",
    "xid_gauge": "gpu:dcgm_xid_errors:changes5m",
    "gpu_health": "gpu:dcgm_gpu_health:gt0_5m",
    "fabric_summary": "gpu:dcgm_fabric_health_summary:ge2_5m",
    "fabric_mask": "gpu:dcgm_fabric_health_mask:ne0_5m",
}
PRESENCE = "node:gpu_runbooks_history_input:count1h"


def _each(template: str, metric: str) -> str:
    """``template`` over every name ``metric`` has had (the signal contract), joined by ``or``."""
    names = aliases(metric)
    return " or ".join(template.format(m=n) for n in names) if len(names) > 1 else template.format(m=names[0])


def _restarts(change: str, back: str = STEP) -> str:
    x, off = RESTARTS, f"{RESTARTS} offset {back}"
    inner = {"rise": f"(({x} - {off}) > 0)", "reset": f"(({x} < {off}) > 0)", "new": f"(({x} unless {off}) > 0)"}
    return (
        f"sum by (node) ({inner[change]} * on (namespace, pod) group_left (node) "
        f"max by (namespace, pod, node) (kube_pod_info))"
    )


def input_selector(metric: str) -> str:
    """The presence series of one input (``metric``: its canonical name or the ``kube_*``/``up`` selector)."""
    return f'{PRESENCE}{{input="{metric}"}}'


def _presence(metric: str, by: str, selector: str | None = None) -> dict:
    expr = _each(f"last_over_time({{m}}[{INPUTS_INTERVAL}])", metric) if selector is None else selector
    return {"record": PRESENCE, "expr": f"count by ({by}) ({expr})", "labels": {"input": metric}}


def _step_rules(back: str = STEP) -> list[dict[str, Any]]:
    """The events rules with their per-step expressions, before they are aligned to the 5-minute marks; ``back``:
    how far a change looks back (a step; the window's tail looks back to its last mark)."""
    cond = 'kube_node_status_condition{condition="Ready",status=~"false|unknown"}'
    labels = f'kube_node_labels{{{DRIVER}!=""}}'
    return [
        {"record": RULE["cordon"], "expr": "max by (node) (kube_node_spec_unschedulable == 1)"},
        {"record": RULE["not_ready"], "expr": f"max by (node, status) ({cond} == 1)"},
        *(
            {"record": RULE["restarts"], "expr": _restarts(c, back), "labels": {"change": c}}
            for c in ("rise", "reset", "new")
        ),
        {
            "record": RULE["driver_new"],
            "expr": f"max by (node, {DRIVER}) ({labels} unless {labels} offset {back})",
        },
        {"record": RULE["exporter_down"], "expr": f"count by (node) ({DCGM_UP} == 0)"},
        {
            "record": RULE["xid_count"],
            "expr": f"max by ({HOSTS}, gpu, xid) ("
            + _each('max_over_time({m}{{xid!=""}}[' + back + "])", XID_COUNT)
            + ")",
        },
        {
            "record": RULE["xid_gauge"],
            "expr": f"max by ({HOSTS}, gpu) (" + _each(f"({{m}} != {{m}} offset {back})", XID_GAUGE) + ")",
        },
        {
            "record": RULE["gpu_health"],
            "expr": f"max by ({HOSTS}, gpu, health_watch, health_error_code) (" + _each("({m} > 0)", GPU_HEALTH) + ")",
        },
        {
            "record": RULE["fabric_summary"],
            "expr": f"max by ({HOSTS}, gpu) (" + _each("({m} >= 2)", FABRIC_SUMMARY) + ")",
        },
        {"record": RULE["fabric_mask"], "expr": f"max by ({HOSTS}, gpu) (" + _each("({m} != 0)", FABRIC_MASK) + ")"},
    ]


def step_expr(key: str, change: str = "", back: str = STEP) -> str:
    """The per-step expression of :data:`RULE` ``key`` (``change``: the restarts rule's ``rise``/``reset``/``new``)
    on the raw series: what the rule records for a 5-minute mark, asked at that mark; with ``back`` the time since
    the window's last mark, what the window's tail adds after it (prom_history.arrays)."""
    return next(
        r["expr"]
        for r in _step_rules(back)
        if r["record"] == RULE[key] and r.get("labels", {}).get("change", "") == change
    )


def history_groups() -> list[dict[str, Any]]:
    """The two rule groups (Prometheus rule-file ``groups`` entries), before the cluster label is added."""
    labels = f'kube_node_labels{{{DRIVER}!=""}}'
    events = [{**r, "expr": f"last_over_time(({r['expr']})[{ALIGN}:{STEP}])"} for r in _step_rules()]
    inputs = [
        _presence(XID_COUNT, HOSTS),
        _presence(XID_GAUGE, HOSTS),
        _presence(GPU_HEALTH, "job"),
        _presence(FABRIC_SUMMARY, "job"),
        *(
            _presence(m, "job", f"last_over_time({m}[{INPUTS_INTERVAL}])")
            for m in ("kube_node_spec_unschedulable", "kube_node_status_condition", RESTARTS)
        ),
        _presence("kube_node_labels", "job", f"last_over_time({labels}[{INPUTS_INTERVAL}])"),
        _presence("up", "job", f"last_over_time({DCGM_UP}[{INPUTS_INTERVAL}])"),
        {
            "record": RULE["driver"],
            "expr": f"max by (node, {DRIVER}) (last_over_time({labels}[{INPUTS_INTERVAL}]))",
        },
    ]
    return [
        {"name": EVENTS_GROUP, "interval": STEP, "rules": events},
        {"name": INPUTS_GROUP, "interval": INPUTS_INTERVAL, "rules": inputs},
    ]
