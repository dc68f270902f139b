"""Node history from Prometheus (``prometheus`` and ``live`` backends): Kubernetes events expire after an hour, so
the history is read from the series kube-state-metrics and dcgm-exporter leave behind
(https://github.com/kubernetes/kube-state-metrics/tree/main/docs/metrics; NVIDIA/dcgm-exporter:
etc/default-counters.csv @ d5e5f510):

* ``kube_node_spec_unschedulable`` == 1: cordoned, from the first to the last step it holds;
* ``kube_node_status_condition{condition="Ready",status="false"}`` == 1: a NotReady spell;
* ``kube_pod_container_status_restarts_total`` increments joined to the node by ``kube_pod_info``;
* ``kube_node_labels`` ``label_nvidia_com_cuda_driver_version_full`` changes (kube-state-metrics needs
  ``--metric-labels-allowlist=nodes=[nvidia.com/cuda.driver-version.full]``): driver changes;
* ``DCGM_EXP_XID_ERRORS_COUNT`` increments per GPU and XID (off in dcgm-exporter's default counters); without it
  the ``DCGM_FI_DEV_XID_ERRORS`` gauge's changes (under either name it has had: ``DCGM_FI_DEV_XID_ERROR`` from
  dcgm-exporter 4.9, gpulib/data/sources/signals.csv), which cannot show the same XID twice in a row;
* ``up{job=~".*dcgm-exporter.*"}`` == 0: the exporter sent nothing (no data, not zero).

A query that returns no series at all is reported in ``missing`` with its name, so the preflight can say which
series this Prometheus lacks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpulib.core.schema import HISTORY_COLUMNS
from gpulib.core.validate import promql_string
from gpulib.sources.history import NodeHistory
from gpulib.sources.signals import aliases

#: the step of the history queries: a NotReady spell or a cordon shorter than this can be missed
STEP_S = 300.0


def _sel(label: str, node: str | None, extra: str = "") -> str:
    parts = [p for p in (extra, f"{label}={promql_string(node)}" if node else "") if p]
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


def increments(ts: np.ndarray, v: np.ndarray) -> list[tuple[float, float]]:
    """(time, increase) of each step a counter went up (a drop is a reset: the new value is the increase)."""
    out = []
    for i in range(1, len(v)):
        d = v[i] - v[i - 1]
        if d > 0 or (d < 0 and v[i] > 0):
            out.append((ts[i], d if d > 0 else v[i]))
    return out


def prometheus_history(src, window, node: str | None) -> NodeHistory:
    """The node history of ``src`` (a PrometheusSource) over ``window``."""
    end = src.end.timestamp()
    start = end - window.total_seconds()
    rows, read, missing = [], {}, {}

    def q(name: str, promql: str, signal: str | tuple):
        res = src._range_arrays(promql, start, end, STEP_S)
        for s in signal if isinstance(signal, tuple) else (signal,):
            (read if res else missing)[s] = name if res else f"no {name} series in this Prometheus"
        return res

    for r in q("kube_node_spec_unschedulable", "kube_node_spec_unschedulable" + _sel("node", node), "cordon"):
        for a, b in intervals(r["ts"], r["v"], STEP_S):
            rows.append(_row(a, r["metric"].get("node", ""), "cordon", end=b, origin="kube_node_spec_unschedulable"))
    cond = 'condition="Ready",status="false"'
    for r in q("kube_node_status_condition", "kube_node_status_condition" + _sel("node", node, cond), "condition"):
        for a, b in intervals(r["ts"], r["v"], STEP_S):
            rows.append(
                _row(
                    a,
                    r["metric"].get("node", ""),
                    "condition",
                    end=b,
                    code="Ready",
                    detail="Ready=False",
                    origin="kube_node_status_condition",
                )
            )
    restarts = (
        "sum by (node) (kube_pod_container_status_restarts_total * on (namespace, pod) group_left (node) "
        f"max by (namespace, pod, node) (kube_pod_info{_sel('node', node)}))"
    )
    for r in q("kube_pod_container_status_restarts_total with kube_pod_info", restarts, "pod_restart"):
        for t, d in increments(r["ts"], r["v"]):
            rows.append(
                _row(
                    t,
                    r["metric"].get("node", ""),
                    "pod_restart",
                    value=float(d),
                    origin="kube_pod_container_status_restarts_total",
                )
            )
    label = "label_nvidia_com_cuda_driver_version_full"
    drv = q(
        "kube_node_labels (driver label)",
        f"kube_node_labels{_sel('node', node, label + '!=' + chr(34) * 2)}",
        ("driver_change", "gfd_label"),
    )
    by_node: dict[str, list[tuple[float, str]]] = {}
    for r in drv:
        for t in r["ts"]:
            by_node.setdefault(r["metric"].get("node", ""), []).append((t, r["metric"].get(label, "")))
    for n, samples in by_node.items():
        samples.sort()
        for (_, old), (t, new) in zip(samples, samples[1:]):
            if new != old:
                for sig, code in (("driver_change", new), ("gfd_label", "nvidia.com/cuda.driver-version.full")):
                    rows.append(_row(t, n, sig, code=code, detail=f"{old} -> {new}", origin="kube_node_labels"))
    rows += _xids(src, q, node, start, end, read)
    for r in q(
        "up (dcgm-exporter)",
        'up{job=~".*dcgm-exporter.*"' + (f",node={promql_string(node)}" if node else "") + "} == bool 0",
        "no_data",
    ):
        for a, b in intervals(r["ts"], r["v"], STEP_S):
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
    return NodeHistory(pd.DataFrame(rows, columns=HISTORY_COLUMNS), read, missing)


def _xids(src, q, node, start, end, read: dict) -> list[dict]:
    rows = []
    for host in src._host_labels:
        res = src._range_arrays(f"DCGM_EXP_XID_ERRORS_COUNT{_sel(host, node)}", start, end, STEP_S)
        for r in res:
            for t, d in increments(r["ts"], r["v"]):
                for _ in range(int(d)):
                    rows.append(
                        _row(
                            t,
                            r["metric"].get(host, ""),
                            "xid",
                            gpu=r["metric"].get("gpu", ""),
                            code=r["metric"].get("xid", ""),
                            origin="DCGM_EXP_XID_ERRORS_COUNT",
                        )
                    )
        if res:
            read["xid"] = "DCGM_EXP_XID_ERRORS_COUNT"
            return rows
    gauge = "DCGM_FI_DEV_XID_ERRORS"
    either = " or ".join(f"{name}{_sel(h, node)}" for name in aliases(gauge) for h in src._host_labels)
    for r in q(gauge, either, "xid"):
        host = next((r["metric"][h] for h in src._host_labels if h in r["metric"]), "")
        prev = 0.0
        for t, v in zip(r["ts"], r["v"]):
            if v != prev and v > 0:
                rows.append(
                    _row(
                        t,
                        host,
                        "xid",
                        gpu=r["metric"].get("gpu", ""),
                        code=str(int(v)),
                        detail="gauge change (a repeat of the same XID is not visible)",
                        origin=gauge,
                    )
                )
            prev = v
    return rows
