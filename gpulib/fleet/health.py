"""Fleet overview analysis: inventory, allocation, activity, and which GPUs and pods the fleet-wide health, idle and
telemetry rules pick out.

Each rule is a pure function over the source frames returning the rows it selects; :mod:`gpulib.fleet.findings`
turns them into Findings (SOP text from ``gpulib/data/fleet/fleet_sop.csv`` and the cost domain's ``cost_sop.csv``),
each pointing to the runbook that goes deeper.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gpulib.core.errors import EmptyResult
from gpulib.core.findings import Severity
from gpulib.core.knowledge import threshold
from gpulib.core.timeutil import parse_window
from gpulib.cost import classify_idle

#: summaries the health checks need: field -> stat
HEALTH_FIELDS = {
    "DCGM_FI_DEV_XID_ERRORS": "last",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "max",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "increase",
    "DCGM_FI_DEV_GPU_TEMP": "max",
    "DCGM_FI_DEV_POWER_USAGE": "avg",
    "DCGM_FI_DEV_SM_CLOCK": "min",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "avg",
    "DCGM_FI_DEV_FB_USED": "max",
}
#: DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL is a bandwidth in MB/s, not a byte counter: DCGM's field table gives it the
#: unit DCGM_FIELD_UNIT_BW_MBPS (NVIDIA/DCGM: dcgmlib/src/dcgm_fields.cpp @0fb66990, "nvlink_bandwidth_total"), though
#: dcgm-exporter's default CSV declares it a counter (gpulib/data/nvidia/dcgm_fields.csv records both). So it is
#: averaged over the window, not differenced; 1 GB/s = 1000 MB/s (decimal, as nccl-tests' GB/s).
NVLINK_MB_PER_GB = 1000.0
GPU_KEYS = ["node", "gpu"]


@dataclass
class HealthFrames:
    """Summaries fetched for the health checks, and which fields were unavailable."""

    window: str
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def get(self, name: str) -> pd.DataFrame | None:
        return self.frames.get(name)


def health_frames(src, window: str) -> HealthFrames:
    """Fetch the health summaries (server-side); a field the backend lacks is listed in ``missing``."""
    hf = HealthFrames(window=window)
    for name, stat in HEALTH_FIELDS.items():
        try:
            hf.frames[name] = src.summary(name, window, stat)
        except EmptyResult:
            hf.missing.append(name)
    return hf


# ------------------------------------------------------------------------------------- inventory
def inventory(nodes: pd.DataFrame, pods: pd.DataFrame) -> pd.DataFrame:
    """Per node: GPU product, GPUs (or MIG slices) allocatable, requested by running pods, free, spot, taints."""
    running = pods[pods["phase"].isin(["Running", "Pending"])] if len(pods) else pods
    req = running.groupby("node")["gpu_request"].sum() if len(running) else pd.Series(dtype=float)
    mig_req = (
        running.groupby("node")["mig_requests"].apply(lambda s: sum(sum(d.values()) for d in s if d))
        if len(running)
        else pd.Series(dtype=float)
    )
    out = pd.DataFrame(
        {
            "node": nodes["node"],
            "gpu_product": nodes["gpu_product"],
            "gpus": nodes["gpu_count"],
            "allocatable": nodes["gpu_allocatable"].fillna(0).astype(int)
            + nodes["mig_allocatable"].apply(lambda d: sum(d.values()) if isinstance(d, dict) else 0)
            # GPUs a DRA driver advertises in ResourceSlices (gpulib.kube.dra.attach_nodes)
            + (nodes["dra_gpus"].fillna(0).astype(int) if "dra_gpus" in nodes else 0),
            "mig": nodes["mig_allocatable"].apply(
                lambda d: (
                    ", ".join(f"{k.split('mig-')[-1]}×{v}" for k, v in sorted(d.items()))
                    if isinstance(d, dict) and d
                    else ""
                )
            ),
            "spot": nodes["spot"],
            "schedulable": nodes["schedulable"],
            "ready": nodes["ready"],
        }
    )
    out["requested"] = out["node"].map(req).fillna(0).astype(int) + out["node"].map(mig_req).fillna(0).astype(int)
    out["free"] = (out["allocatable"] - out["requested"]).clip(lower=0)
    out["allocated_pct"] = np.where(
        out["allocatable"] > 0, 100 * out["requested"] / out["allocatable"].where(out["allocatable"] > 0, 1), 0
    ).round(1)
    return out.sort_values("node").reset_index(drop=True)


def activity(src, window: str, metric: str) -> pd.DataFrame:
    """Activity series as a 0..100 % column ``pct`` (GPU_UTIL is already %, PROF_* ratios are scaled)."""
    df = src.series(metric, window)
    scale = 1.0 if metric == "DCGM_FI_DEV_GPU_UTIL" else 100.0
    return df.assign(pct=df["value"].astype(float) * scale)


def utilisation_matrix(act: pd.DataFrame, bucket: str = "15min") -> pd.DataFrame:
    """Node × time matrix of mean activity % (MIG instances weighted equally within their node)."""
    if act.empty:
        return pd.DataFrame()
    t = act["timestamp"].dt.floor(bucket)
    return act.assign(t=t).pivot_table(index="node", columns="t", values="pct", aggfunc="mean").sort_index()


# ---------------------------------------------------------------------------------- health rules
def xid_gpus(hf: HealthFrames) -> pd.DataFrame | None:
    """GPUs whose sticky XID gauge holds a non-zero code (None: the field was not read)."""
    df = hf.get("DCGM_FI_DEV_XID_ERRORS")
    return None if df is None else df[df["value"] > 0]


def remap_failures(hf: HealthFrames) -> pd.DataFrame | None:
    """GPUs with a row-remap failure in the window (None: the field was not read)."""
    rrf = hf.get("DCGM_FI_DEV_ROW_REMAP_FAILURE")
    return None if rrf is None else rrf[rrf["value"] > 0]


def dbe_gpus(hf: HealthFrames) -> pd.DataFrame | None:
    """GPUs whose uncorrectable (DBE) ECC count grew, less those with a row-remap failure (that finding covers
    them). None: the field was not read."""
    dbe = hf.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
    if dbe is None:
        return None
    failed = remap_failures(hf)
    seen = set() if failed is None else {(r.node, str(r.gpu)) for r in failed.itertuples()}
    hit = dbe[dbe["value"] > 0]
    return hit[np.array([(n, str(g)) not in seen for n, g in zip(hit["node"], hit["gpu"])], dtype=bool)]


@dataclass
class HotGpu:
    """A GPU at or above ``gpu_temp_warn_c`` (thresholds.csv) in the window."""

    node: str
    gpu: Any
    temp_c: float
    severity: Severity
    warn_c: float
    crit_c: float
    #: lowest SM clock over the window (MHz), None when DCGM_FI_DEV_SM_CLOCK was not read for the GPU
    min_sm_clock: float | None = None


def hot_gpus(hf: HealthFrames) -> list[HotGpu]:
    """GPUs at or above the warn temperature: critical from ``gpu_temp_crit_c``."""
    temp = hf.get("DCGM_FI_DEV_GPU_TEMP")
    if temp is None:
        return []
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    clk = hf.get("DCGM_FI_DEV_SM_CLOCK")
    clk_min = clk.set_index(GPU_KEYS)["value"] if clk is not None else pd.Series(dtype=float)
    out = []
    for r in temp[temp["value"] >= warn].itertuples():
        c = clk_min.get((r.node, r.gpu))
        out.append(
            HotGpu(
                r.node,
                r.gpu,
                r.value,
                Severity.CRITICAL if r.value >= crit else Severity.WARNING,
                warn,
                crit,
                c if c is not None and pd.notna(c) else None,
            )
        )
    return out


@dataclass
class NvlinkLaggard:
    """A GPU of a multi-GPU job moving less than ``nvlink_degraded_ratio`` (thresholds.csv) of the job's median."""

    node: str
    namespace: str
    pod: str
    gpu: Any
    mb_s: float
    median_mb_s: float


def nvlink_laggards(hf: HealthFrames) -> list[NvlinkLaggard]:
    """GPUs of a multi-GPU job moving far less NVLink traffic than the job's other GPUs.

    Collective traffic (all-reduce rings/trees) is symmetric across the GPUs of one job, so peers are
    the GPUs that carry the same pod label on the same node; idle or single-GPU pods are not compared.
    """
    nv = hf.get("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")
    if nv is None or nv.empty:
        return []
    ratio_min = threshold("nvlink_degraded_ratio")
    out = []
    jobs = nv[(nv["pod"] != "") & (nv["gpu_i_id"] == "")]
    for (node, ns, pod), g in jobs.groupby(["node", "namespace", "pod"]):
        if len(g) < 2:
            continue
        med = g["value"].median()
        if med <= 0:
            continue
        for r in g[g["value"] < ratio_min * med].itertuples():
            out.append(NvlinkLaggard(node, ns, pod, r.gpu, r.value, med))
    return out


def stale_gpus(
    series: pd.DataFrame, end: pd.Timestamp, tolerance: str = "5m", last_seen: pd.DataFrame | None = None
) -> list[tuple[str, Any, pd.Timestamp]]:
    """(node, gpu, last sample) of the GPUs whose series stopped before the window end minus ``tolerance`` (a GPU
    off the bus stops reporting).

    ``last_seen`` (``Source.last_seen``: the newest sample of each series, from an instant query) is what
    decides: the last point of a range query lies on its step grid, up to one step before the end, so on a
    7-day window every GPU would look stale. Without it the range's last point is used."""
    if series.empty:
        return []
    last = series.groupby(GPU_KEYS)["timestamp"].max()
    if last_seen is not None and len(last_seen):
        fresh = last_seen.groupby(GPU_KEYS)["timestamp"].max()
        last = pd.concat([last, fresh]).groupby(level=[0, 1]).max().reindex(last.index)
    cutoff = pd.Timestamp(end) - parse_window(tolerance)
    return [(node, gpu, ts) for (node, gpu), ts in last[last < cutoff].items()]


def unrequested_pods(act: pd.DataFrame, pods: pd.DataFrame) -> list[Any]:
    """Rows (namespace, pod, node, gpu) of pods that DCGM sees on a GPU but that request no nvidia.com/gpu or MIG
    resource."""
    if act.empty or pods.empty:
        return []
    on_gpu = act[act["pod"] != ""][["namespace", "pod", "node", "gpu"]].drop_duplicates()
    p = pods.set_index(["namespace", "pod"])
    out = []
    for r in on_gpu.itertuples():
        if (r.namespace, r.pod) not in p.index:
            continue
        row = p.loc[(r.namespace, r.pod)]
        if int(row["gpu_limit"] or 0) == 0 and not row["mig_limits"]:
            out.append(r)
    return out


# ---------------------------------------------------------------------------------------- idle
@dataclass
class IdleInputs:
    """What the idle/zombie check reads: the samples the utilization report uses (:func:`gpulib.cost.idle_samples`),
    the activity field they came from, the pod list (owners) and the thresholds of the one idle/zombie rule."""

    window: str
    samples: pd.DataFrame
    metric: str
    pods: pd.DataFrame | None
    thresholds: Any


@dataclass
class IdlePod:
    """One allocated pod the one idle/zombie rule (:func:`gpulib.cost.classify_idle`) calls zombie or idle."""

    verdict: Any  # its row of classify_idle
    workload: str
    owner_kind: str
    #: other replicas of its owner are busy
    busy_sibling: bool
    #: an idle pod that served work in the window or whose sibling replicas are busy: low load, not a reservation
    lightly_used: bool


def idle_pods(idle: IdleInputs) -> list[IdlePod]:
    """Allocated pods that are zombie or idle, in the order :func:`gpulib.cost.classify_idle` returns them."""
    pods, th = idle.pods, idle.thresholds
    owners = (
        {}
        if pods is None or pods.empty
        else {
            (r.namespace, r.pod): (str(r.workload or ""), str(r.owner_kind or "")) for r in pods.itertuples(index=False)
        }
    )
    verdicts = classify_idle(idle.samples, th)
    state_of: dict[tuple[str, str], list[str]] = {}  # (namespace, owner) -> the states of its replicas
    for v in verdicts.itertuples(index=False):
        wl = owners.get((v.namespace, v.pod), ("", ""))[0]
        if wl:
            state_of.setdefault((v.namespace, wl), []).append(v.state)
    out = []
    for r in verdicts[verdicts["state"] != "busy"].itertuples(index=False):
        wl, owner_kind = owners.get((r.namespace, r.pod), ("", ""))
        busy_sibling = bool(wl) and any(s == "busy" for s in state_of.get((r.namespace, wl), ()))
        # served work in the window, or its sibling replicas are busy: low load, not a reservation to release
        lightly_used = r.state != "zombie" and (r.activity_max >= th.idle_activity_max or busy_sibling)
        out.append(IdlePod(r, wl, owner_kind, busy_sibling, lightly_used))
    return out
