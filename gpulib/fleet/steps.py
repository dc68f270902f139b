"""The steps of ``runbooks/fleet_overview.ipynb``: each step gathers its inputs into one :class:`FleetInputs`, and
:func:`findings` turns what was gathered into the run's findings in one call, so a caller without a notebook gets
the same verdict. A step whose data could not be read leaves its input ``None`` and :func:`findings` skips it (the
runbook has already marked the run INCOMPLETE).

The analysis is :mod:`gpulib.fleet.health` and :mod:`gpulib.fleet.scheduling`, the Findings
:mod:`gpulib.fleet.findings`, the charts :mod:`gpulib.fleet.view`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from gpulib.core.findings import Finding
from gpulib.core.runbook import DIR, Param, Runbook, Step
from gpulib.cost import Thresholds, idle_samples
from gpulib.fleet.cliques import CLIQUE_LABEL, clique_findings, clique_units, fabric_verdicts
from gpulib.fleet.findings import health_findings, idle_findings, stale_telemetry, unrequested_gpu_use
from gpulib.fleet.health import (
    HEALTH_FIELDS,
    HealthFrames,
    IdleInputs,
    activity,
    health_frames,
    inventory,
    utilisation_matrix,
)
from gpulib.fleet.merge import merge_findings
from gpulib.fleet.scheduling import check_scheduling, pod_specs_from, require_frames
from gpulib.nvidia.smi import parse_query

#: the activity metric when the preflight could not say which one the source exports (the notebook's fallback)
DEFAULT_ACTIVITY_METRIC = "DCGM_FI_DEV_GPU_UTIL"


@dataclass
class SchedulingInputs:
    """The frames the scheduling checks read: nodes, pods and the raw Pod objects (when the source has them)."""

    nodes: pd.DataFrame
    pods: pd.DataFrame
    pod_specs: list[dict] = field(default_factory=list)


@dataclass
class ActivityInputs:
    """The activity series of the window, its end, and the newest sample of each series (``Source.last_seen``)."""

    series: pd.DataFrame
    end: Any
    last_seen: pd.DataFrame | None = None


@dataclass
class FleetInputs:
    """Everything the fleet overview's findings are computed from, step by step; None: the step could not read it."""

    window: str
    #: the metric preflight (``Source.preflight``): its findings come first
    caps: Any = None
    pods: pd.DataFrame | None = None
    scheduling: SchedulingInputs | None = None
    activity: ActivityInputs | None = None
    health: HealthFrames | None = None
    idle: IdleInputs | None = None
    #: per-GPU fabric verdicts of the nodes that carry a clique label (:func:`gpulib.fleet.cliques.fabric_verdicts`)
    fabric: pd.DataFrame | None = None


def scheduling_inputs(src, pods: pd.DataFrame | None) -> SchedulingInputs:
    """The nodes and raw Pod objects of ``src`` with ``pods``; SourceError when the nodes or pods could not be read."""
    nodes = src.nodes()
    specs = pod_specs_from(src)
    require_frames(nodes, pods)
    return SchedulingInputs(nodes, pods, specs)


def activity_inputs(src, series: pd.DataFrame, metric: str) -> ActivityInputs:
    """The activity ``series`` (:func:`gpulib.fleet.health.activity`) with the window end and the newest sample of
    ``metric`` per series, which the stale-telemetry check needs."""
    return ActivityInputs(series, src.end, src.last_seen(metric))


def idle_inputs(src, window: str) -> IdleInputs:
    """The samples the utilization report's idle/zombie rule runs on (:func:`gpulib.cost.idle_samples`), the pod
    list and the rule's thresholds (``gpulib/data/core/thresholds.csv``)."""
    samples, metric = idle_samples(src, window)
    return IdleInputs(window, samples, metric, src.pods(), Thresholds.from_table())


def findings(inp: FleetInputs) -> list[Finding]:
    """The findings of the run from what the steps gathered, in the order of the steps (preflight, scheduling,
    stale telemetry, GPUs used without a request, health, idle/zombie), each symptom folded into its root cause
    (:func:`gpulib.fleet.merge.merge_findings`)."""
    fs: list[Finding] = []
    if inp.caps is not None:
        fs += inp.caps.findings
    if inp.scheduling is not None:
        s = inp.scheduling
        fs += check_scheduling(s.nodes, s.pods, pod_specs=s.pod_specs)
        fs += clique_findings(clique_units(s.nodes, inp.fabric), inp.fabric)
    if inp.activity is not None:
        a = inp.activity
        fs += stale_telemetry(a.series, a.end, last_seen=a.last_seen)
        if inp.pods is not None:
            fs += unrequested_gpu_use(a.series, inp.pods)
    if inp.health is not None:
        fs += health_findings(inp.health)
    if inp.idle is not None:
        fs += idle_findings(inp.idle)
    return merge_findings(fs)


# ------------------------------------------------------------------------------------------------- the runbook
def gather_preflight(c) -> None:
    """Which DCGM fields and labels the source exports (``Source.preflight``); its findings come first."""
    c.caps = c.src.preflight(c.window)
    c.caps_table = c.caps.table()
    c.inp.caps = c.caps


def gather_inventory(c) -> None:
    """Nodes and GPU pods: capacity against what is allocated (:func:`gpulib.fleet.health.inventory`)."""
    c.pods = c.inp.pods = c.src.pods()
    c.inv = inventory(c.src.nodes(), c.pods)


def gather_scheduling(c) -> None:
    c.inp.scheduling = scheduling_inputs(c.src, c.pods)
    c.inp.fabric = fabric_inputs(c.src, c.inp.scheduling.nodes)


def fabric_inputs(src, nodes: pd.DataFrame) -> pd.DataFrame | None:
    """The fabric verdicts of the GPUs of every node labelled ``nvidia.com/gpu.clique`` whose ``nvidia-smi -q`` the
    source has (None when no node carries the label: no multi-node NVLink domain, nothing read)."""
    members = [r.node for r in nodes.itertuples() if (r.labels or {}).get(CLIQUE_LABEL)]
    if not members:
        return None
    smi = {n: parse_query(t) for n in members if (t := src.smi_query(n))}
    return fabric_verdicts(smi, nodes)


def gather_activity(c) -> None:
    """The activity series of the preflight's activity metric (its fallback when the preflight could not run)."""
    c.metric = c.caps.activity_metric if c.caps else DEFAULT_ACTIVITY_METRIC
    c.act = activity(c.src, c.window, c.metric)
    c.matrix = utilisation_matrix(c.act)
    c.inp.activity = activity_inputs(c.src, c.act, c.metric)


def gather_health(c) -> None:
    c.hf = c.inp.health = health_frames(c.src, c.window)


def gather_idle(c) -> None:
    c.inp.idle = idle_inputs(c.src, c.window)


def _start(c) -> dict[str, Any]:
    return {"inp": FleetInputs(c.window), "caps": None, "pods": None}


def _verdict(c) -> list[Finding]:
    return findings(c.inp)


_VIEW = "gpulib.fleet.view:"
RUNBOOK = Runbook(
    name="fleet_overview",
    domain="fleet",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param("snapshot_dir", "", "folder with nodes.json, pods.json, metrics*.txt when source: snapshot", kind=DIR),
        Param("window", "6h", "Prometheus duration: 30m, 6h, 7d"),
    ),
    steps=(
        Step(
            "Metric preflight",
            gather_preflight,
            _VIEW + "show_preflight",
            needs=("src",),
            inputs=("DCGM metric names and labels",),
        ),
        Step(
            "Inventory and allocation",
            gather_inventory,
            _VIEW + "show_inventory",
            needs=("src",),
            inputs=("nodes", "pods"),
        ),
        Step("Scheduling checks", gather_scheduling, None, needs=("src",), inputs=("nodes", "pods", "pod specs")),
        Step(
            "Activity heatmap",
            gather_activity,
            _VIEW + "show_activity",
            needs=("src",),
            inputs=("DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL",),
        ),
        Step("Health summaries", gather_health, _VIEW + "show_health", needs=("src",), inputs=tuple(HEALTH_FIELDS)),
        Step(
            "Idle and zombie GPUs",
            gather_idle,
            None,
            needs=("src",),
            inputs=("DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "pods"),
        ),
    ),
    findings=_verdict,
    start=_start,
)
