"""90 days of node history for the demo fleet (``gpulib/data/demo/demo_history.yaml``), served as
``Source.node_history()``.

The history is a list of events (``gpulib.core.schema.HISTORY_COLUMNS``): the planted cases of the YAML (a
driver upgrade that raises one XID class on one pool, a repeat offender, a flapping node, a recovering node,
exporter gaps), a Poisson background of minor events, and the incidents the demo scenario itself injects (its
XIDs, DBE and row-remap failure, at the same times as its DCGM series), so the history agrees with the series.
Nothing here changes the DCGM series, nodes, pods or kernel logs the other runbooks read.

Every time is a pure function of (seed, node, GPU, signal, index): the same scenario gives the same history.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np
import pandas as pd
import yaml

from gpulib.core.knowledge import data_path
from gpulib.core.schema import HISTORY_COLUMNS
from gpulib.core.timeutil import parse_window
from gpulib.demo.scenario import DAY
from gpulib.sources.prom_history import UNREACHABLE

MIN = 60.0
HOUR = 3600.0
#: what each demo signal would be read from on a live cluster (the origin column)
ORIGINS = {
    "xid": "DCGM_FI_DEV_XID_ERRORS",
    "ecc_sbe": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "ecc_dbe": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "remap_failure": "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "pcie_replay": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "pod_restart": "kube_pod_container_status_restarts_total",
    "eviction": "kube_pod_status_reason",
    "condition": "kube_node_status_condition",
    "cordon": "kube_node_spec_unschedulable",
    "remediation": "gpuops remediation audit log",
    "serve_verdict": "gpuops serve run store",
    "nccl_probe": "gpuops run nccl_check",
    "diag": "dcgmi diag -r 2",
    "reset": "gpuops remediation audit log",
    "gfd_label": "kube_node_labels",
    "driver_change": "kube_node_labels",
    "operator_change": "kube_pod_container_info",
    "no_data": "up{job=dcgm-exporter}",
}
#: signals dcgm-exporter carries: none of them is seen while the node's exporter is down
DCGM_SIGNALS = ("xid", "ecc_sbe", "ecc_dbe", "remap_failure", "pcie_replay")
DRIVER_LABEL = "nvidia.com/cuda.driver-version.full"


def _rel(spec, end: float) -> float:
    s = str(spec).strip()
    if s.lstrip("+-") in ("0", "0d", "0s"):
        return end
    sign = -1.0 if s.startswith("-") else 1.0
    return end + sign * parse_window(s.lstrip("+-"), name="history time").total_seconds()


def _rng(*parts) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:12], 16))


@lru_cache(maxsize=4)
def _plan(path: str) -> dict:
    return yaml.safe_load(open(path).read())


def history_plan(scenario: dict | None = None) -> dict:
    """The history description: the scenario's own ``history:`` block, else ``demo_history.yaml``."""
    if scenario and isinstance(scenario.get("history"), dict):
        return scenario["history"]
    return _plan(str(data_path("demo_history.yaml")))


def _row(t, node, gpu, signal, code="", value=1.0, detail="", end=None) -> dict:
    return {
        "time": t,
        "end": end,
        "node": node,
        "gpu": "" if gpu is None else str(gpu),
        "signal": signal,
        "code": str(code),
        "value": float(value),
        "detail": detail,
        "origin": ORIGINS.get(signal, "demo"),
    }


def _pool(spec: dict) -> str:
    return str(spec.get("instance_type", ""))


def demo_history(sim) -> pd.DataFrame:
    """Every event of the demo fleet's history (all nodes, the whole history), sorted by time."""
    plan = history_plan(sim.scenario)
    end = sim.end_s
    rows: list[dict] = []
    specs = {s["name"]: s for s in sim.node_specs}
    gpus = {n: [d.index for d in sim.devices if d.node == n and not d.is_instance] for n in specs}
    gaps = [
        (g["node"], _rel(g["from"], end), _rel(g["from"], end) + parse_window(g["for"]).total_seconds())
        for g in plan.get("exporter_gaps", [])
    ]
    for node, a, b in gaps:
        rows.append(_row(a, node, None, "no_data", "dcgm-exporter", 0.0, "exporter sent nothing", end=b))

    def in_pool(spec, pool):
        return pool in ("*", _pool(spec))

    for ch in plan.get("changes", []):
        at = _rel(ch["at"], end)
        kind = "driver_change" if ch["kind"] == "driver" else "operator_change"
        for name, spec in specs.items():
            if in_pool(spec, ch["pool"]):
                rows.append(_row(at, name, None, kind, ch["to"], 1.0, f"{ch['from']} -> {ch['to']}"))
                if kind == "driver_change":
                    rows.append(_row(at, name, None, "gfd_label", DRIVER_LABEL, 1.0, f"{ch['from']} -> {ch['to']}"))
    for k, bg in enumerate(plan.get("background", [])):
        a, b = _rel(bg["from"], end), _rel(bg["to"], end)
        for name, spec in specs.items():
            if not in_pool(spec, bg["pool"]):
                continue
            for g in gpus[name]:
                rng = _rng(sim.seed, "bg", k, name, g)
                n = rng.poisson(float(bg["per_gpu_day"]) * (b - a) / DAY)
                for t in np.sort(rng.uniform(a, b, n)):
                    rows.append(_row(float(t), name, g, bg["signal"], bg.get("code", ""), 1.0))
    for cyc in plan.get("cycles", []):
        out_for = parse_window(cyc["out_for"]).total_seconds()
        for at in cyc["at"]:
            t = _rel(at, end)
            node, g = cyc["node"], cyc["gpu"]
            rows.append(_row(t, node, g, "xid", cyc["xid"]))
            rows.append(_row(t + 10 * MIN, node, None, "remediation", "cordon", 1.0, "gpuops remediate cordon --apply"))
            rows.append(_row(t + 10 * MIN, node, None, "cordon", "", 1.0, "cordoned by gpuops", end=t + out_for))
            rows.append(_row(t + HOUR, node, g, "reset", cyc.get("recovery", "reset")))
            rows.append(_row(t + 1.5 * HOUR, node, g, "diag", "dcgmi diag -r 2", 1.0, "pass"))
            rows.append(_row(t + out_for, node, None, "remediation", "uncordon", 1.0, "gpuops remediate uncordon"))
    for fl in plan.get("flaps", []):
        down = parse_window(fl["down_for"]).total_seconds()
        for i, at in enumerate(fl["at"]):
            t = _rel(at, end)
            # a flap listed as unreachable is the kubelet going silent: the node lifecycle controller sets Ready
            # Unknown (gpulib/sources/prom_history.py); the others are the kubelet reporting Ready=False
            detail = UNREACHABLE if at in fl.get("unreachable", []) else "Ready=False"
            rows.append(_row(t, fl["node"], None, "condition", fl["condition"], 1.0, detail, end=t + down))
            rows.append(_row(t + down, fl["node"], None, "pod_restart", "", 1.0, "restarted after NotReady"))
            if i % 2 == 0:
                rows.append(_row(t + 5 * MIN, fl["node"], None, "eviction", "", 1.0, "evicted by the node lifecycle"))
    for d in sim.devices:  # the scenario's own incidents, at the times its DCGM series show them
        if d.is_instance:
            continue
        for t, code in sim.xid_events(d):
            rows.append(_row(float(t), d.node, d.index, "xid", code))
        for inc in d.incidents:
            if inc["type"] == "dbe_remap_failure":
                rows.append(_row(inc["at"], d.node, d.index, "ecc_dbe", "", 1.0))
                rows.append(_row(inc["at"] + 60, d.node, d.index, "remap_failure", "", 1.0))
    for pr in plan.get("nccl_probes", []):
        step = parse_window(pr["every"]).total_seconds()
        for t in np.arange(_rel(pr["from"], end), end, step):
            rows.append(_row(float(t), pr["node"], None, "nccl_probe", "all_reduce_perf", 1.0, pr["result"]))
    df = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    df = _drop_unseen(df, gaps)
    df = pd.concat([df, _serve_rows(df, plan)], ignore_index=True)
    for col in ("time", "end"):
        df[col] = pd.to_datetime(df[col], unit="s", utc=True)
    return df.sort_values(["time", "node", "gpu", "signal"], kind="stable").reset_index(drop=True)


def _drop_unseen(df: pd.DataFrame, gaps) -> pd.DataFrame:
    """dcgm-exporter signals inside an exporter gap were never scraped: they are not in the history."""
    keep = np.ones(len(df), dtype=bool)
    for node, a, b in gaps:
        keep &= ~((df["node"] == node) & df["signal"].isin(DCGM_SIGNALS) & (df["time"] >= a) & (df["time"] < b))
    return df[keep]


def _serve_rows(df: pd.DataFrame, plan: dict) -> pd.DataFrame:
    """The gpuops serve run each alert rule started, with the severity of its verdict."""
    rows = []
    for rule in plan.get("serve", []):
        follow = rule["follow"]
        hits = df[(df["signal"] == "xid") & (df["code"] == str(follow["xid"]))]
        for i, (_, ev) in enumerate(hits.iterrows()):
            if i % int(rule.get("every", 1)):
                continue
            rows.append(
                _row(ev["time"] + 2 * MIN, ev["node"], ev["gpu"], "serve_verdict", rule["rule"], 1.0, rule["verdict"])
            )
    return pd.DataFrame(rows, columns=HISTORY_COLUMNS)


def demo_history_signals(sim) -> dict[str, str]:
    """signal -> where a live cluster would read it, for each signal the demo history carries."""
    return dict(ORIGINS)
