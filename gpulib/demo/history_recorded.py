"""The node history's recorded series (:mod:`gpulib.sources.history_rules`) written directly from the demo history,
for a Prometheus that holds only them: at fleet scale the raw series of 90 days cannot be backfilled on a small box
(1,024 nodes x ~30 series x 90 days), but what the rules record is sparse. Each series is what its rule records
over the raw series :mod:`gpulib.demo.history_series` writes, for each 5-minute mark of the clock (a multiple of 300 s
since the epoch, as the rules align their evaluations) written at the mark (a group evaluated at phase 0), one
OpenMetrics file per ``chunk`` of time for ``promtool tsdb create-blocks-from openmetrics``:

* ``node:kube_node_cordoned:5m`` / ``node:kube_node_not_ready:5m{status}`` / ``node:dcgm_exporter_down:5m``: 1 at each
  evaluation a cordon / NotReady (``unknown`` when unreachable) / exporter-gap spell covers;
* ``node:kube_pod_container_restarts:increase5m{change="rise"}``: the node's restarts since the evaluation before (a
  deleted pod's series ends and a new pod starts from 0: nothing recorded for either);
* ``gpu:dcgm_xid_errors_count:max5m{xid}``: the largest windowed count (dcgm-exporter's default 300000 ms window,
  scraped every 60 s) in the 5 minutes up to the evaluation; ``gpu:dcgm_xid_errors:changes5m``: the new code at
  the first evaluation after the gauge changed;
* ``node:kube_node_driver_label:new5m`` at the evaluation after a driver change, ``node:kube_node_driver_label:1h``
  every hour; ``node:gpu_runbooks_history_input:count1h`` every hour (per host for the XID count and gauge, one
  series for each kube-state-metrics input and the exporter's ``up``).

That the history read from these series is the demo's is tested against a real Prometheus
(tests/sources/test_prom_history_rules_live.py::test_the_generated_recorded_series_give_the_demo_history).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpulib.core.timeutil import parse_window
from gpulib.demo.history import demo_history
from gpulib.demo.history_series import XID_SCRAPE_S, XID_WINDOW_MS, _epoch
from gpulib.sources.history_rules import DRIVER, PRESENCE, RESTARTS, RULE, XID_COUNT, XID_GAUGE
from gpulib.sources.prom_history import STEP_S, UNREACHABLE

HOUR = 3600.0


def _labels(d: dict) -> str:
    return ",".join(f'{k}="{v}"' for k, v in d.items())


def _spells(ev, mask, grid) -> np.ndarray:
    on = np.zeros(len(grid), dtype=bool)
    for a, b in zip(_epoch(ev["time"][mask]), _epoch(ev["end"][mask])):
        on |= (grid >= a) & (grid < b)
    return on


def recorded_series(sim, window: str) -> list[tuple[str, dict, np.ndarray, np.ndarray]]:
    """(metric, labels, times, values) of every recorded series over the last ``window``."""
    end = sim.end_s
    start = end - parse_window(window).total_seconds()
    grid = np.arange(np.floor(end / STEP_S) * STEP_S, start - 1, -STEP_S)[::-1]  # the marks (prom_history.marks)
    hours = np.arange(end, start - 1, -HOUR)[::-1]
    ev = demo_history(sim)
    host = "Hostname" if sim.label_style == "old" else "hostname"
    out: list[tuple[str, dict, np.ndarray, np.ndarray]] = []

    def add(metric, labels, times, values):
        if len(times):
            out.append((metric, labels, np.asarray(times, dtype=float), np.asarray(values, dtype=float)))

    sig, node = ev["signal"].to_numpy(), ev["node"].to_numpy()
    unreachable = (ev["detail"] == UNREACHABLE).to_numpy()
    t_ev = _epoch(ev["time"])
    for n in [s["name"] for s in sim.node_specs]:
        mine = node == n
        for key, mask, extra in (
            ("cordon", mine & (sig == "cordon"), {}),
            ("not_ready", mine & (sig == "condition") & ~unreachable, {"status": "false"}),
            ("not_ready", mine & (sig == "condition") & unreachable, {"status": "unknown"}),
            ("exporter_down", mine & (sig == "no_data"), {}),
        ):
            on = _spells(ev, mask, grid) if mask.any() else np.zeros(0, dtype=bool)
            add(RULE[key], {"node": n, **extra}, grid[on], np.ones(on.sum()))
        r = t_ev[mine & (sig == "pod_restart")]
        if len(r):
            k = np.searchsorted(grid, r, side="left")  # the first evaluation at or after the restart
            k = k[(k < len(grid)) & (r > start)]
            steps, counts = np.unique(k, return_counts=True)
            add(RULE["restarts"], {"node": n, "change": "rise"}, grid[steps], counts)
        out += _xids(ev[mine & (sig == "xid")], n, host, sim, grid)
        drv = ev[mine & (sig == "driver_change")].sort_values("time")
        cur = np.full(len(hours), drv["detail"].iloc[0].split(" -> ")[0] if len(drv) else sim.driver_version, object)
        for _, c in drv.iterrows():
            new = c["detail"].split(" -> ")[1]
            cur[hours >= c["time"].timestamp()] = new
            k = np.searchsorted(grid, c["time"].timestamp(), side="left")
            if k < len(grid):
                add(RULE["driver_new"], {"node": n, DRIVER: new}, grid[k : k + 1], [1.0])
        for v in sorted(set(cur)):
            add(RULE["driver"], {"node": n, DRIVER: v}, hours[cur == v], np.ones((cur == v).sum()))
        gpus = float(sum(1 for d in sim.devices if d.node == n and not d.is_instance))
        for metric in (XID_COUNT, XID_GAUGE):
            add(PRESENCE, {host: n, "input": metric}, hours, np.full(len(hours), gpus))
    nodes = float(len(sim.node_specs))
    for metric in ("kube_node_spec_unschedulable", "kube_node_status_condition", RESTARTS, "kube_node_labels", "up"):
        add(PRESENCE, {"input": metric}, hours, np.full(len(hours), nodes))
    return out


def _xids(x, n: str, host: str, sim, grid: np.ndarray) -> list:
    """Per GPU and code the windowed count's step maxima; the gauge's changes."""
    out = []
    w = XID_WINDOW_MS / 1000.0
    for g, mine in x.groupby("gpu"):
        mine = mine.sort_values("time", kind="stable")
        xt, codes = _epoch(mine["time"]), mine["code"].astype(float).to_numpy()
        lab = {host: n, "gpu": str(g)}
        for code in sorted(set(codes)):
            at = xt[codes == code]
            scrapes = np.unique(np.concatenate([np.arange(a, a + w, XID_SCRAPE_S) for a in at]))
            count = np.searchsorted(at, scrapes, side="right") - np.searchsorted(at, scrapes - w, side="right")
            best: dict[int, float] = {}
            for s, c in zip(scrapes, count):  # every evaluation whose 5 minutes [t - 300, t] hold the scrape
                for k in range(np.searchsorted(grid, s, side="left"), np.searchsorted(grid, s + STEP_S, side="right")):
                    best[k] = max(best.get(k, 0.0), float(c))
            ks = sorted(best)
            if ks:
                out.append((RULE["xid_count"], {**lab, "xid": str(int(code))}, grid[ks], [best[k] for k in ks]))
        prev = np.r_[np.nan, codes[:-1]]
        k = np.searchsorted(grid, xt[codes != prev], side="left")
        keep = k < len(grid)
        if keep.any():
            out.append((RULE["xid_gauge"], lab, grid[k[keep]], codes[codes != prev][keep]))
    return out


def write_recorded_openmetrics(sim, out_dir: Path, window: str, chunk_s: float = 10 * 86400.0) -> list[Path]:
    """The recorded series as OpenMetrics files of ``chunk_s`` each (oldest first); returns their paths."""
    series = [
        (m, lab, np.asarray(ts, dtype=float), np.asarray(vs, dtype=float))
        for m, lab, ts, vs in recorded_series(sim, window)
    ]
    end = sim.end_s
    start = end - parse_window(window).total_seconds()
    paths = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(np.arange(start, end + 1, chunk_s)):
        b = a + chunk_s
        lines = []
        for metric in sorted({s[0] for s in series}):
            lines.append(f"# TYPE {metric} gauge")
            for m, labels, ts, vs in series:
                if m != metric:
                    continue
                sel = (ts >= a) & (ts < b)
                text = f"{metric}{{{_labels(labels)}}}"
                lines += [f"{text} {v:g} {t:.0f}" for t, v in zip(ts[sel], vs[sel])]
        lines.append("# EOF")
        p = out_dir / f"recorded-{i:03d}.om"
        p.write_text("\n".join(lines) + "\n")
        paths.append(p)
    return paths
