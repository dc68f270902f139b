"""Fleet overview: where on-call starts. Inventory, allocation, utilisation and fleet-wide health findings.

Each check is a pure function over the source frames and points to the runbook that goes deeper.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpulib.core.validate import shell_quote as _q

from gpulib.core.errors import EmptyResult
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import threshold
from gpulib.core.timeutil import format_duration, parse_window

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


def _run(node: str, gpu=None) -> str:
    """``-p node N [-p gpu G]`` with both shell-quoted (the node comes from a DCGM label: data, not code)."""
    return f"-p node {_q(node)}" + (f" -p gpu {_q(gpu)}" if gpu not in (None, "") else "")


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
    mig_req = (running.groupby("node")["mig_requests"].apply(lambda s: sum(sum(d.values()) for d in s if d))
               if len(running) else pd.Series(dtype=float))
    out = pd.DataFrame({
        "node": nodes["node"], "gpu_product": nodes["gpu_product"], "gpus": nodes["gpu_count"],
        "allocatable": nodes["gpu_allocatable"].fillna(0).astype(int)
        + nodes["mig_allocatable"].apply(lambda d: sum(d.values()) if isinstance(d, dict) else 0),
        "mig": nodes["mig_allocatable"].apply(lambda d: ", ".join(f"{k.split('mig-')[-1]}×{v}" for k, v in sorted(d.items()))
                                              if isinstance(d, dict) and d else ""),
        "spot": nodes["spot"], "schedulable": nodes["schedulable"], "ready": nodes["ready"]})
    out["requested"] = out["node"].map(req).fillna(0).astype(int) + out["node"].map(mig_req).fillna(0).astype(int)
    out["free"] = (out["allocatable"] - out["requested"]).clip(lower=0)
    out["allocated_pct"] = np.where(out["allocatable"] > 0, 100 * out["requested"] / out["allocatable"].where(out["allocatable"] > 0, 1), 0).round(1)
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


# ---------------------------------------------------------------------------------- health checks
def _xid_findings(hf: HealthFrames) -> list[Finding]:
    from gpulib.xid import lookup

    df = hf.get("DCGM_FI_DEV_XID_ERRORS")
    if df is None:
        return []
    out = []
    for r in df[df["value"] > 0].itertuples():
        rec = lookup(int(r.value))
        sev = Severity.CRITICAL if rec.fatal else Severity.WARNING
        out.append(Finding(
            sev, f"XID {int(r.value)} ({rec.mnemonic}) on {r.node} GPU {r.gpu}", node=r.node, gpu=str(r.gpu),
            category="xid", runbook="xid_ecc_triage", confidence=0.9,
            summary=f"Last XID reported by DCGM is {int(r.value)}: {rec.category}; NVIDIA's immediate action: {rec.immediate_action}.",
            evidence=[f"DCGM_FI_DEV_XID_ERRORS last value {int(r.value)} in the last {hf.window} "
                      "(a sticky gauge: it holds the last XID until the driver or DCGM restarts)"]
            + ([f"pod {r.namespace}/{r.pod} on this GPU"] if r.pod else []),
            sop_step="Open the XID/ECC triage runbook for this GPU: it reads the kernel log, decodes the XID and lists the pods hit.",
            commands=[f"gpuops run xid_ecc_triage {_run(r.node, r.gpu)}",
                      f"kubectl debug {_q('node/' + str(r.node))} -it --image=busybox -- chroot /host dmesg -T | grep -i 'NVRM: Xid'"]))
    return out


def _memory_findings(hf: HealthFrames) -> list[Finding]:
    out = []
    rrf = hf.get("DCGM_FI_DEV_ROW_REMAP_FAILURE")
    if rrf is not None:
        for r in rrf[rrf["value"] > 0].itertuples():
            out.append(Finding(
                Severity.CRITICAL, f"Row-remap failure on {r.node} GPU {r.gpu}", node=r.node, gpu=str(r.gpu),
                category="memory", runbook="xid_ecc_triage",
                summary="The GPU could not remap a failing HBM row: NVIDIA treats this as an RMA condition.",
                evidence=[f"DCGM_FI_DEV_ROW_REMAP_FAILURE = {int(r.value)} in the last {hf.window}"],
                sop_step="Cordon the node, drain GPU workloads, run the triage runbook and open an RMA case.",
                commands=[f"kubectl cordon {_q(r.node)}", f"gpuops run xid_ecc_triage {_run(r.node, r.gpu)}"],
                escalation=f"RMA: collect nvidia-bug-report.sh and the board serial (nvidia-smi --query-gpu=serial --format=csv -i {_q(r.gpu)} on the node)"))
    dbe = hf.get("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
    if dbe is not None:
        seen = {(f.node, f.gpu) for f in out}
        for r in dbe[dbe["value"] > 0].itertuples():
            if (r.node, str(r.gpu)) in seen:
                continue
            out.append(Finding(
                Severity.CRITICAL, f"Uncorrectable (DBE) ECC errors on {r.node} GPU {r.gpu}", node=r.node, gpu=str(r.gpu),
                category="memory", runbook="xid_ecc_triage",
                evidence=[f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL +{r.value:.0f} in the last {hf.window}"],
                sop_step="Drain the GPU and run the triage runbook (pending row remap → reset; failure → RMA).",
                commands=[f"gpuops run xid_ecc_triage {_run(r.node, r.gpu)}"]))
    return out


def _thermal_findings(hf: HealthFrames) -> list[Finding]:
    temp = hf.get("DCGM_FI_DEV_GPU_TEMP")
    if temp is None:
        return []
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    clk = hf.get("DCGM_FI_DEV_SM_CLOCK")
    clk_min = clk.set_index(GPU_KEYS)["value"] if clk is not None else pd.Series(dtype=float)
    out = []
    for r in temp[temp["value"] >= warn].itertuples():
        sev = Severity.CRITICAL if r.value >= crit else Severity.WARNING
        ev = [f"GPU temperature reached {r.value:.0f} °C in the last {hf.window} (warn {warn:.0f} °C, HW slowdown {crit:.0f} °C)"]
        c = clk_min.get((r.node, r.gpu))
        if c is not None and pd.notna(c):
            ev.append(f"lowest SM clock {c:.0f} MHz over the window")
        out.append(Finding(
            sev, f"GPU running hot on {r.node} GPU {r.gpu}", node=r.node, gpu=str(r.gpu), category="thermal",
            runbook="xid_ecc_triage", evidence=ev, confidence=0.9,
            summary="High temperature cuts clocks (thermal slowdown) and slows every job on the GPU.",
            sop_step="Check clock-event reasons and cooling; if throttling persists, drain the GPU and ask facilities to check airflow.",
            commands=[f"kubectl debug {_q('node/' + str(r.node))} -it --image=nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04 -- "
                      f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {r.gpu}",
                      f"gpuops run xid_ecc_triage {_run(r.node, r.gpu)}"],
            escalation="Data-centre facilities if several GPUs of one chassis run hot; vendor if one GPU throttles alone at low load."))
    return out


def _nvlink_findings(hf: HealthFrames) -> list[Finding]:
    """A GPU of a multi-GPU job moving far less NVLink traffic than the job's other GPUs.

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
            out.append(Finding(
                Severity.WARNING, f"NVLink traffic far below peers on {node} GPU {r.gpu}", node=node, gpu=str(r.gpu),
                category="nvlink", runbook="nccl_check", confidence=0.7,
                summary=f"GPU {r.gpu} moves much less NVLink traffic than the other GPUs of {ns}/{pod}: "
                        "a degraded or down link is likely, and every collective of the job runs at its pace.",
                evidence=[f"mean NVLink bandwidth {r.value / NVLINK_MB_PER_GB:.3g} GB/s vs the job's median "
                          f"{med / NVLINK_MB_PER_GB:.3g} GB/s ({r.value / med:.0%}) over {hf.window}"],
                sop_step="Check link state and error counters, then run the NCCL check runbook on this node.",
                commands=[f"kubectl debug {_q('node/' + str(node))} -it --image=nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04 -- nvidia-smi nvlink -s -i {_q(r.gpu)}",
                          f"gpuops run nccl_check -p node {_q(node)}"],
                escalation="Vendor ticket if a link reports down or CRC/replay errors keep rising after a GPU reset."))
    return out


def stale_telemetry(series: pd.DataFrame, end: pd.Timestamp, tolerance: str = "5m",
                    last_seen: pd.DataFrame | None = None) -> list[Finding]:
    """GPUs whose series stopped before the window end (a GPU off the bus stops reporting).

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
    out = []
    for (node, gpu), ts in last[last < cutoff].items():
        out.append(Finding(
            Severity.CRITICAL, f"Telemetry stopped for {node} GPU {gpu}", node=node, gpu=str(gpu), category="telemetry",
            runbook="xid_ecc_triage", confidence=0.8,
            summary="DCGM stopped reporting this GPU: it may have fallen off the bus (XID 79) or the exporter lost it.",
            evidence=[f"last sample {ts:%Y-%m-%d %H:%M} UTC, {format_duration((pd.Timestamp(end) - ts).total_seconds())} before the window end"],
            sop_step="Check the kernel log for XIDs and whether nvidia-smi still sees the GPU.",
            commands=[f"gpuops run xid_ecc_triage {_run(node, gpu)}",
                      f"kubectl -n gpu-operator logs --tail=50 $(kubectl -n gpu-operator get pods -l app=nvidia-dcgm-exporter "
                      f"--field-selector {_q('spec.nodeName=' + str(node))} -o name)"]))
    return out


def idle_findings(src, window: str) -> list[Finding]:
    """Allocated pods that the one idle/zombie rule (:func:`gpulib.cost.classify_idle`) calls zombie or idle, on
    the samples the utilization report uses (:func:`gpulib.cost.idle_samples`), so both give the same verdict."""
    from gpulib.cost import Thresholds, classify_idle, idle_samples, verdict_sop

    samples, metric = idle_samples(src, window)
    pods = src.pods()
    owners = {} if pods is None or pods.empty else {
        (r.namespace, r.pod): (str(r.workload or ""), str(r.owner_kind or "")) for r in pods.itertuples(index=False)}
    th = Thresholds.from_table()
    has_fb = bool(samples["fb_used_mib"].notna().any())
    verdicts = classify_idle(samples, th)
    state_of: dict[tuple[str, str], list[str]] = {}   # (namespace, owner) -> the states of its replicas
    for v in verdicts.itertuples(index=False):
        wl = owners.get((v.namespace, v.pod), ("", ""))[0]
        if wl:
            state_of.setdefault((v.namespace, wl), []).append(v.state)
    out = []
    for r in verdicts[verdicts["state"] != "busy"].itertuples(index=False):
        zombie = r.state == "zombie"
        ns, pod = r.namespace, r.pod
        held = 0.0 if pd.isna(r.fb_used_max_mib) else float(r.fb_used_max_mib)
        # zombie (stuck) and idle allocated (reserved, unused) get the report's SOPs (gpulib/data/cost/cost_sop.csv)
        wl, owner_kind = owners.get((ns, pod), ("", ""))
        busy_sibling = bool(wl) and any(s == "busy" for s in state_of.get((ns, wl), ()))
        # served work in the window, or its sibling replicas are busy: low load, not a reservation to release
        lightly_used = not zombie and (r.activity_max >= th.idle_activity_max or busy_sibling)
        kind, sop, commands = verdict_sop(r.state, ns, pod, wl, owner_kind, low_load=lightly_used)
        evidence = [f"mean activity {100 * r.activity_mean:.1f} % over {window} (idle below {100 * th.idle_activity_max:.0f} %), "
                    f"peak {100 * r.activity_max:.1f} % on {', '.join(r.devices)}",
                    f"max memory held {held / 1024:.1f} GiB" if has_fb else "FB_USED not exported: zombie check skipped"]
        if lightly_used:
            evidence.append("served work in the window (peak at or above the idle threshold)" if not busy_sibling else
                            f"other replicas of {owner_kind or 'its owner'} {wl} are busy")
        if zombie:
            evidence.append(f"held >= {th.zombie_fb_used_min_mib:,.0f} MiB with activity below {th.zombie_activity_max:.0%} "
                            f"for {format_duration(r.zombie_s)} (zombie from {format_duration(th.zombie_min_duration_s)}; "
                            "gpulib/data/core/thresholds.csv)")
        out.append(Finding(
            Severity.WARNING if zombie else Severity.INFO,
            f"{'Zombie' if zombie else 'Lightly used' if lightly_used else 'Idle'} GPU workload {ns}/{pod}", node=r.node, category="cost",
            runbook="gpu_utilization_report", confidence=0.8 if metric != "DCGM_FI_DEV_GPU_UTIL" else 0.6,
            summary=("Holds GPU memory while doing no work." if zombie else
                     "Low load on its GPU(s): a right-sizing question, not a reservation to release." if lightly_used
                     else "Allocated GPU(s) almost unused.")
            + f" Activity from {metric.replace('DCGM_FI_', '')}.",
            evidence=evidence,
            sop_step=sop, commands=[*commands, "gpuops report --window 7d"],
            data={"pod": f"{ns}/{pod}", "state": r.state, "sop_kind": kind, "impact": round(held / 1024, 1),
                  "impact_unit": "GiB held"}))
    return out


def unrequested_gpu_use(act: pd.DataFrame, pods: pd.DataFrame) -> list[Finding]:
    """Pods that DCGM sees on a GPU but that request no nvidia.com/gpu or MIG resource."""
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
            out.append(Finding(
                Severity.WARNING, f"{r.namespace}/{r.pod} uses a GPU it never requested", node=r.node, gpu=str(r.gpu),
                category="scheduling", runbook="operator_install",
                summary="The pod bypasses the device plugin (e.g. NVIDIA_VISIBLE_DEVICES=all): the scheduler may place "
                        "another pod on the same GPU and neither gets isolation.",
                evidence=[f"DCGM attributes GPU {r.gpu} on {r.node} to this pod; its containers have no nvidia.com/gpu limit"],
                sop_step="Give the pod a nvidia.com/gpu limit (or MIG resource) and remove NVIDIA_VISIBLE_DEVICES from its spec.",
                commands=[f"kubectl -n {_q(r.namespace)} get pod {_q(r.pod)} -o jsonpath='{{.spec.containers[*].env}}'"],
                data={"pod": f"{r.namespace}/{r.pod}"}))
    return out


def health_findings(hf: HealthFrames) -> list[Finding]:
    return _xid_findings(hf) + _memory_findings(hf) + _thermal_findings(hf) + _nvlink_findings(hf)


# ------------------------------------------------------------------------------------------ charts
def allocation_chart(inv: pd.DataFrame):
    import plotly.graph_objects as go

    fig = go.Figure([go.Bar(name="requested", x=inv["node"], y=inv["requested"], marker_color="#1f5fa8"),
                     go.Bar(name="free", x=inv["node"], y=inv["free"], marker_color="#b8c7dc")])
    fig.update_layout(barmode="stack", title="GPU allocation per node (GPUs or MIG instances)",
                      xaxis_title="node", yaxis_title="devices (count)", height=360)
    return fig


def heatmap(matrix: pd.DataFrame, metric: str):
    import plotly.graph_objects as go

    fig = go.Figure(go.Heatmap(z=matrix.to_numpy(), x=list(matrix.columns), y=list(matrix.index), zmin=0, zmax=100,
                               colorscale="Viridis", colorbar={"title": "activity (%)"}))
    fig.update_layout(title=f"GPU activity per node ({metric.replace('DCGM_FI_', '')}, mean per 15 min)",
                      xaxis_title="time (UTC)", yaxis_title="node", height=60 + 32 * max(len(matrix), 4))
    return fig


def temp_power_chart(hf: HealthFrames):
    import plotly.express as px

    t, p = hf.get("DCGM_FI_DEV_GPU_TEMP"), hf.get("DCGM_FI_DEV_POWER_USAGE")
    if t is None or p is None:
        return None
    df = t[GPU_KEYS + ["value"]].rename(columns={"value": "temp_max"}).merge(
        p[GPU_KEYS + ["value"]].rename(columns={"value": "power_avg"}), on=GPU_KEYS)
    fig = px.scatter(df, x="power_avg", y="temp_max", color="node", hover_data=["gpu"],
                     title=f"Temperature vs power per GPU (last {hf.window})",
                     labels={"power_avg": "mean power draw (W)", "temp_max": "max temperature (°C)"})
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    # labels on opposite sides (critical above its line at the left, warn below its line at the right): two
    # thresholds a degree apart both read
    fig.add_hline(y=crit, line_dash="dash", line_color="#b00020", annotation_text=f"critical {crit:.0f} °C",
                  annotation_position="top left")
    fig.add_hline(y=warn, line_dash="dot", line_color="#b36b00", annotation_text=f"warn {warn:.0f} °C",
                  annotation_position="bottom right")
    fig.update_layout(height=380)
    return fig
