"""The steps of ``runbooks/node_health.ipynb`` and its definition (:data:`RUNBOOK`): each step gathers what it read
into one :class:`NodeHealthInputs` and :func:`findings` gives the run's findings in one call over it, so the notebook
and the headless verdict (:mod:`gpulib.run.verdict`) run the same code. A step whose data could not be read leaves
its input ``None`` (the runbook is then INCOMPLETE). What each step shows is in :mod:`gpulib.reliability.view`.

The analysis is :mod:`gpulib.reliability.timeline` and :mod:`gpulib.reliability.verdict`, the findings
:mod:`gpulib.reliability.findings`, the charts :mod:`gpulib.reliability.view`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpulib.core.errors import EmptyResult, GpulibError
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import settings
from gpulib.core.runbook import DIR, Param, Runbook, Step
from gpulib.core.timeutil import parse_window
from gpulib.core.validate import command
from gpulib.kube.device_health import device_health_frame, history_rows
from gpulib.nvidia.gpu_ids import gpu_id_map
from gpulib.nvidia.smi import parse_query
from gpulib.reliability.findings import node_findings
from gpulib.reliability.timeline import coverage, lanes, node_timeline, signal_table
from gpulib.reliability.verdict import lookback, node_verdict
from gpulib.sources.history import NodeHistory
from gpulib.xid import kernel_log_history, state_severity


@dataclass
class NodeHealthInputs:
    """What the node_health steps read: the history (display window and rule lookback), and the verdict."""

    node: str
    window: str
    history: Any = None  # gpulib.sources.base.NodeHistory over max(window, the rules' lookback)
    start: pd.Timestamp | None = None
    end: pd.Timestamp | None = None
    verdict: Any = None


def read_history(src, node: str, window: str) -> NodeHealthInputs:
    """The node's history over the display ``window`` and the longest rule lookback. UnknownNode (a usage error)
    for a node the source does not have; NotProvided where the source has no history; EmptyResult when a signal
    the verdict needs (``needed`` in ``history_lanes.csv``) could not be read."""
    win = pd.Timedelta(parse_window(window))
    hist = with_kernel_log_xids(src, node, src.node_history(max(win, lookback()).to_pytimedelta(), node=node))
    needed = [s for s, r in lanes().iterrows() if r["needed"] == "yes"]
    gone = [s for s in needed if s in hist.missing or s not in hist.read]
    if gone:
        raise EmptyResult(
            "the verdict needs " + ", ".join(f"{s} ({hist.missing.get(s, 'not read')})" for s in gone),
            hint="export DCGM_FI_DEV_XID_ERRORS (dcgm-exporter) to the Prometheus the source reads",
        )
    return NodeHealthInputs(node, window, with_pod_device_health(src, node, hist), hist.end - win, hist.end)


def with_pod_device_health(src, node: str, hist: NodeHistory) -> NodeHistory:
    """``hist`` with the devices kubelet reports not Healthy in the node's pod status (KEP-4680,
    :func:`gpulib.kube.device_health.history_rows`), at the end of the window; a source without pods adds none."""
    try:
        pods, gpus = src.pods(), src.gpus(node)
    except GpulibError:
        return hist
    rows = history_rows(device_health_frame(pods[pods["node"] == node], gpus), node, hist.end)
    if rows.empty:
        return hist
    events = pd.concat([hist.events, rows], ignore_index=True) if len(hist.events) else rows
    read = {**hist.read, "pod_device_health": f"pod status of {node}'s pods (allocatedResourcesStatus)"}
    return NodeHistory(events, read, dict(hist.missing), hist.start, hist.end)


def with_kernel_log_xids(src, node: str, hist: NodeHistory) -> NodeHistory:
    """``hist`` with the XIDs of the node's kernel log (:func:`gpulib.xid.kernel_log_history`) where the
    source read no XID series: the kernel log is the first evidence of an XID (a snapshot's ``dmesg-<node>.txt``,
    the live node's ring). GPU indices come from the node's ``nvidia-smi -q`` where the source has it."""
    if "xid" in hist.read:
        return hist
    text = src.kernel_log(node)
    if not text:
        return hist
    smi = src.smi_query(node)
    ids = gpu_id_map(parse_query(smi)) if smi else None
    xids = kernel_log_history(text, node, ids)
    xids = xids[(xids["time"] >= hist.start) & (xids["time"] <= hist.end)] if hist.start is not None else xids
    events = pd.concat([hist.events, xids], ignore_index=True) if len(hist.events) else xids
    read = {**hist.read, "xid": f"kernel log of {node} (dmesg: NVRM Xid lines), {len(xids)} in the window"}
    missing = {k: v for k, v in hist.missing.items() if k != "xid"}
    return NodeHistory(
        events.sort_values("time", kind="stable").reset_index(drop=True), read, missing, hist.start, hist.end
    )


def preflight(inp: NodeHealthInputs) -> pd.DataFrame:
    """Which history signals the source read, which it could not (and why), and which had events in the window."""
    tl = timeline(inp)
    return signal_table(inp.history.read, inp.history.missing, set(tl["signal"]))


def timeline(inp: NodeHealthInputs) -> pd.DataFrame:
    return node_timeline(inp.history.events, inp.node, inp.start, inp.end)


def verdicts(inp: NodeHealthInputs):
    """The node's verdict over the rules' lookback; EmptyResult (INCOMPLETE) when the exporter sent data for less
    than ``min_coverage`` of the display window."""
    cov_win = coverage(inp.history.events, inp.node, inp.start, inp.end)
    floor = float(settings("reliability_settings")["min_coverage"])
    if cov_win.share < floor:
        raise EmptyResult(
            f"{inp.node}: dcgm-exporter sent data for {cov_win.share:.0%} of the last {inp.window} "
            f"(a verdict needs {floor:.0%}): no data is not healthy",
            hint="check the node's dcgm-exporter pod and its Prometheus target, then run again",
        )
    cov = coverage(inp.history.events, inp.node, inp.history.start, inp.end)
    inp.verdict = node_verdict(inp.history.events, inp.node, inp.end, cov)
    return inp.verdict


def findings(inp: NodeHealthInputs | None) -> list[Finding]:
    """The run's findings: one per rule that matched (an OK finding when none), plus one per GPU kubelet reports not
    Healthy in pod status that no rule names (never OK); nothing when no verdict was made."""
    if inp is None or inp.verdict is None:
        return []
    fs = node_findings(inp.verdict)
    if inp.history is None:
        return fs
    ev = inp.history.events
    bad = ev[(ev["signal"] == "pod_device_health") & (ev["node"] == inp.node)] if len(ev) else ev
    named = {str(f.gpu) for f in fs if f.severity is not Severity.OK}
    extra = []
    for gpu, rows in bad.groupby(bad["gpu"].astype(str), sort=True) if len(bad) else []:
        if gpu in named:
            continue
        health = "Unhealthy" if (rows["code"] == "Unhealthy").any() else "Unknown"
        extra.append(
            Finding(
                state_severity(rule="POD_DEVICE_UNHEALTHY" if health == "Unhealthy" else "POD_DEVICE_UNKNOWN"),
                f"Kubelet reports {inp.node} GPU {gpu or '?'} {health} in pod status",
                summary="No rule of the node's history names this GPU; its device plugin or DRA driver does.",
                commands=[command("gpuops", "run", "xid_ecc_triage", "-p", "node", inp.node, "-p", "gpu", gpu)]
                if gpu
                else [command("gpuops", "run", "xid_ecc_triage", "-p", "node", inp.node)],
                evidence=list(rows["detail"].astype(str))[:5],
                category="reliability",
                node=inp.node,
                gpu=gpu or None,
                runbook="xid_ecc_triage",
                data={"verdict": "pod_device_health", "rule": "pod_device_health", "health": health},
            )
        )
    if extra:
        fs = [f for f in fs if f.severity is not Severity.OK] + extra
    return fs


# ------------------------------------------------------------------------------------------------- the runbook
def gather_history(c) -> None:
    """Read the node's history (:func:`read_history`) and which signals the source has (:func:`preflight`)."""
    c.inp = read_history(c.src, c.node, c.window)
    c.signals = preflight(c.inp)


def gather_timeline(c) -> None:
    c.events = timeline(c.inp)


#: what the thermal section draws, as xid_ecc_triage draws it (gpulib.xid.thermal_chart)
THERMAL_FIELDS = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE")


def gather_thermal(c) -> None:
    """The node's GPU temperature and power over the window (a field the source lacks is left out: temperature is
    shown, not a verdict input)."""
    c.thermal = {}
    for f in THERMAL_FIELDS:
        try:
            c.thermal[f] = c.src.series(f, c.window, node=c.node)
        except EmptyResult:
            continue


def gather_verdict(c) -> None:
    c.verdict = verdicts(c.inp)


def _start(c) -> dict[str, Any]:
    return {"inp": None}


def _findings(c) -> list[Finding]:
    return findings(c.inp)


_VIEW = "gpulib.reliability.view:"
RUNBOOK = Runbook(
    name="node_health",
    domain="reliability",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param(
            "snapshot_dir",
            "",
            "folder with nodes.json and events.json (kubectl get events -A -o json) when source: snapshot",
            kind=DIR,
        ),
        Param("node", "h200-infer-0", "the GPU node to look at (its hostname label)"),
        Param("window", "7d", "how far back the timeline shows (Prometheus duration: 1d, 7d, 30d)"),
    ),
    steps=(
        Step(
            "Read the node history",
            gather_history,
            _VIEW + "show_history",
            needs=("src",),
            inputs=("node history", "DCGM_FI_DEV_XID_ERRORS"),
        ),
        Step("Timeline", gather_timeline, _VIEW + "show_timeline", needs=("inp",), inputs=("node history",)),
        Step("Temperature and power", gather_thermal, _VIEW + "show_thermal", needs=("src",), inputs=THERMAL_FIELDS),
        Step(
            "Verdict rules",
            gather_verdict,
            _VIEW + "show_verdict",
            needs=("inp",),
            inputs=("node history", "node_health_rules.csv"),
        ),
    ),
    findings=_findings,
    start=_start,
)
