"""The demo history (:func:`gpulib.demo.history.demo_history`) as the series a live cluster keeps of it, written the way
kube-state-metrics and dcgm-exporter write them, for ``promtool tsdb create-blocks-from openmetrics``:

* ``kube_node_status_condition{condition="Ready",status="true|false|unknown"}``: one series per status, the bad
  one 1 during a NotReady spell; a spell whose node was unreachable is ``unknown`` (what the node lifecycle
  controller sets when the kubelet stops posting status, kubernetes/kubernetes:
  pkg/controller/nodelifecycle/node_lifecycle_controller.go @ 0b1dcaba), the others ``false``;
* ``kube_pod_container_status_restarts_total`` per container (kube-state-metrics:
  docs/metrics/workload/pod-metrics.md @ c92fe0c5): each node runs a dcgm-exporter pod that restarted twice
  before the window (a count carried in, never an event) and a worker pod that takes the node's restarts; an
  eviction deletes the worker pod (its series ends) and a new one starts from 0 (``kube_pod_info`` follows);
* ``DCGM_EXP_XID_ERRORS_COUNT``: per GPU and code, the number of that code's XIDs in the exporter's last
  ``window_size_in_ms`` (300000, the default of ``--xid-count-window-size``), a series only while the code is in
  the window, sampled every scrape; and a zero series without ``xid`` for a GPU with none in the window
  (NVIDIA/dcgm-exporter: internal/pkg/collector/expcollector.go @ d5e5f510, pkg/cmd/app.go @ d5e5f510);
* the XID gauge under the simulator's exporter generation's name (``DCGM_FI_DEV_XID_ERRORS`` /
  ``DCGM_FI_DEV_XID_ERROR``, gpulib/data/sources/signals.csv): the last XID's code, sticky, so a GPU whose last
  XID came before the window holds that code from the first sample on;
* ``kube_node_spec_unschedulable``, ``kube_node_labels`` (the driver label), the exporter's ``up`` (0 in a gap).

dcgm-exporter series are absent in an exporter gap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gpulib.core.timeutil import parse_window
from gpulib.demo.history import demo_history
from gpulib.sources.prom_history import UNREACHABLE
from gpulib.sources.signals import name_in

#: dcgm-exporter's default XID count window (``--xid-count-window-size``, ms)
XID_WINDOW_MS = 300000
#: how often the windowed count is sampled (a scrape) while a code is in the window
XID_SCRAPE_S = 60.0
#: how often kube-state-metrics is scraped around a NotReady spell or a cordon
KSM_SCRAPE_S = 60.0
#: restarts the dcgm-exporter pod of every node had before the window starts (carried in, not events)
EXPORTER_POD_RESTARTS = 2.0


def _om_labels(d: dict) -> str:
    return ",".join(f'{k}="{v}"' for k, v in d.items())


def _epoch(col: pd.Series) -> np.ndarray:
    return col.map(lambda x: x.timestamp() if pd.notna(x) else np.nan).to_numpy(dtype=float)


def write_history_openmetrics(sim, path, window: str = "60d", step: float = 600.0, *, xid_count: bool = True) -> None:
    """Write the demo history's series over the last ``window``, one sample per ``step`` (the windowed XID count
    every :data:`XID_SCRAPE_S` while a code is in its window). ``xid_count=False`` leaves
    ``DCGM_EXP_XID_ERRORS_COUNT`` out, as dcgm-exporter's default counters do."""
    end = sim.end_s
    start = end - parse_window(window).total_seconds()
    ts = np.arange(start, end + 1, step)
    ev = demo_history(sim)
    ev_t, ev_e = _epoch(ev["time"]), _epoch(ev["end"])
    hostname = "Hostname" if sim.label_style == "old" else "hostname"
    out: list[str] = []

    def family(name, kind, series):
        out.append(f"# TYPE {name} {kind}")
        for labels, times, values in series:
            prefix = f"{name}{{{_om_labels(labels)}}} "  # once a series: 1.7 M samples in 60 days
            values = np.asarray(values, dtype=float)
            ok = ~np.isnan(values)
            kept = values[ok]
            uniq, which = np.unique(kept, return_inverse=True)  # a few values each: 0/1, counts, codes
            text = [f"{prefix}{v:g} " for v in uniq.tolist()]
            out.extend(
                text[i] + f"{t:.0f}" for i, t in zip(which.tolist(), np.asarray(times, dtype=float)[ok].tolist())
            )

    def inside(mask, times=ts):
        on = np.zeros(len(times), dtype=bool)
        for a, b in zip(ev_t[mask], ev_e[mask]):
            on |= (times >= a) & (times < b)
        return on

    nodes = [s["name"] for s in sim.node_specs]
    of = {n: (ev["node"] == n).to_numpy() for n in nodes}
    sig = {s: (ev["signal"] == s).to_numpy() for s in ev["signal"].unique()}
    none = np.zeros(len(ev), dtype=bool)
    gap = {n: inside(of[n] & sig.get("no_data", none)) for n in nodes}

    def scraped(mask):
        """``ts`` and a sample every :data:`KSM_SCRAPE_S` around each spell of ``mask``: kube-state-metrics is
        scraped far more often than ``step``, so a spell of a few minutes is in the series."""
        extra = [
            np.arange(a - 2 * KSM_SCRAPE_S, b + 2 * KSM_SCRAPE_S, KSM_SCRAPE_S) for a, b in zip(ev_t[mask], ev_e[mask])
        ]
        times = np.union1d(ts, np.concatenate(extra)) if extra else ts
        return times[(times >= ts[0]) & (times <= ts[-1])]

    cordons = []
    for n in nodes:
        times = scraped(of[n] & sig.get("cordon", none))
        cordons.append(({"node": n}, times, inside(of[n] & sig.get("cordon", none), times).astype(float)))
    family("kube_node_spec_unschedulable", "gauge", cordons)
    conditions = []
    unreachable = (ev["detail"] == UNREACHABLE).to_numpy()
    for n in nodes:
        spell = of[n] & sig.get("condition", none)
        times = scraped(spell)
        bad = {"false": inside(spell & ~unreachable, times), "unknown": inside(spell & unreachable, times)}
        bad["true"] = ~(bad["false"] | bad["unknown"])
        for status in ("true", "false", "unknown"):
            conditions.append(({"node": n, "condition": "Ready", "status": status}, times, bad[status].astype(float)))
    family("kube_node_status_condition", "gauge", conditions)
    family("up", "gauge", [({"job": "nvidia-dcgm-exporter", "node": n}, ts, np.where(gap[n], 0.0, 1.0)) for n in nodes])
    restarts, info = _pods(ev, ev_t, of, sig, none, nodes, ts)
    family("kube_pod_container_status_restarts_total", "unknown", restarts)
    family("kube_pod_info", "gauge", info)
    family("kube_node_labels", "gauge", _driver_labels(sim, ev, of, sig, none, nodes, ts))
    gauges, counts = [], []
    for n in nodes:
        x = ev[of[n] & sig.get("xid", none)]
        for g in [d.index for d in sim.devices if d.node == n and not d.is_instance]:
            mine = x[x["gpu"] == str(g)].sort_values("time", kind="stable")
            xt, codes = _epoch(mine["time"]), mine["code"].astype(float).to_numpy()
            gpu = {hostname: n, "gpu": str(g)}
            # the sticky gauge: the last XID's code, at each sample and at each XID
            gt = np.union1d(ts, xt[xt >= start])
            last = np.searchsorted(xt, gt, side="right") - 1
            val = codes[np.maximum(last, 0)] if len(codes) else np.zeros(len(gt))
            val = np.where(last >= 0, val, 0.0)
            gauges.append((gpu, gt, np.where(inside(of[n] & sig.get("no_data", none), gt), np.nan, val)))
            if xid_count:
                counts += _window_counts(
                    gpu, xt, codes, ts, gap[n], lambda g: inside(of[n] & sig.get("no_data", none), g)
                )
    family(name_in("DCGM_FI_DEV_XID_ERRORS", sim.exporter), "gauge", gauges)
    if xid_count:
        family("DCGM_EXP_XID_ERRORS_COUNT", "gauge", counts)
    out.append("# EOF")
    Path(path).write_text("\n".join(out) + "\n")


def _window_counts(gpu: dict, xt, codes, ts, gap, in_gap) -> list:
    """The windowed count series of one GPU: per code, samples every scrape while it is in the window; the zero
    series at the regular samples where no code is."""
    w = XID_WINDOW_MS / 1000.0
    lab = {**gpu, "window_size_in_ms": str(XID_WINDOW_MS)}
    series, busy = [], np.zeros(len(ts), dtype=bool)
    for code in sorted(set(codes)):
        at = xt[codes == code]
        grid = np.unique(np.concatenate([np.arange(a, a + w, XID_SCRAPE_S) for a in at]))
        grid = grid[(grid >= ts[0]) & (grid <= ts[-1])]
        n = np.searchsorted(at, grid, side="right") - np.searchsorted(at, grid - w, side="right")
        v = np.where((n > 0) & ~in_gap(grid), n.astype(float), np.nan)
        series.append(({**lab, "xid": str(int(code))}, grid, v))
        for a in at:
            busy |= (ts >= a) & (ts < a + w)
    series.append((lab, ts, np.where(busy | gap, np.nan, 0.0)))
    return series


def _pods(ev, ev_t, of, sig, none, nodes, ts):
    """Per node: the dcgm-exporter pod (restarts carried in, constant) and the worker pods, each from its creation
    (a sample of 0 then) to the eviction that deletes it, taking the node's restarts while it lives."""
    restarts, info = [], []
    for n in nodes:
        exporter = {
            "namespace": "gpu-operator",
            "pod": f"nvidia-dcgm-exporter-{n}",
            "container": "nvidia-dcgm-exporter",
        }
        restarts.append((exporter, ts, np.full(len(ts), EXPORTER_POD_RESTARTS)))
        info.append(({"namespace": "gpu-operator", "pod": exporter["pod"], "node": n}, ts, np.ones(len(ts))))
        r = np.sort(ev_t[of[n] & sig.get("pod_restart", none)])
        cuts = [ts[0], *np.sort(ev_t[of[n] & sig.get("eviction", none)]), ts[-1] + 1]
        cuts = sorted(c for c in set(cuts) if ts[0] <= c <= ts[-1] + 1)
        for k, (a, b) in enumerate(zip(cuts, cuts[1:])):
            pod = {"namespace": "gpu-workloads", "pod": f"{n}-worker-{k}", "container": "main"}
            if k == 0:  # the worker pod running when the window opens: its count so far is carried in
                times = ts[ts < b]
                v = np.searchsorted(r, times, side="right")
            else:  # created at the eviction with 0 restarts
                times = np.union1d([a], ts[(ts > a) & (ts < b)])
                v = np.searchsorted(r, times, side="right") - np.searchsorted(r, a, side="left")
            restarts.append((pod, times, v.astype(float)))
            info.append(({"namespace": pod["namespace"], "pod": pod["pod"], "node": n}, times, np.ones(len(times))))
    return restarts, info


def _driver_labels(sim, ev, of, sig, none, nodes, ts):
    labels = []
    for n in nodes:
        drv = ev[of[n] & sig.get("driver_change", none)].sort_values("time")
        cur = np.full(len(ts), "", dtype=object)
        cur[:] = drv["detail"].iloc[0].split(" -> ")[0] if len(drv) else sim.driver_version
        for _, c in drv.iterrows():
            cur[ts >= c["time"].timestamp()] = c["detail"].split(" -> ")[1]
        for v in sorted(set(cur)):
            labels.append(
                ({"node": n, "label_nvidia_com_cuda_driver_version_full": v}, ts, np.where(cur == v, 1.0, np.nan))
            )
    return labels
