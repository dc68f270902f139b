"""The steps of the mig_sizing runbook, one call per notebook step: parameter checks, the data each step pulls
from the source, and the tables and charts it shows. The nodes and today's layout are :mod:`gpulib.mig.inventory`,
the sizing, packing and savings :mod:`gpulib.mig.sizing`, :mod:`gpulib.mig.plan` and :mod:`gpulib.mig.plan_cost`,
the SOP :mod:`gpulib.mig.findings`, the figures :mod:`gpulib.mig.view`; this module only wires them to a source."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

import gpulib.kube.remediate as remediate
import gpulib.mig.view as mig_view
from gpulib.core.errors import InvalidParameter
from gpulib.core.runbook import DIR, Param, Runbook, Step
from gpulib.mig.config import validate_mig_parted_config
from gpulib.mig.findings import mig_change_sop, plan_findings, sizing_findings
from gpulib.mig.inventory import current_gpus_for, current_layout, inventory_for, select_nodes, target_model
from gpulib.mig.parted_merge import config_for_cluster, configs_in_use
from gpulib.mig.plan import Plan, plan_layout
from gpulib.mig.plan_cost import gpu_price, savings
from gpulib.mig.sizing import size_from_usage, workloads_from_sizing

__all__ = [
    "HEADROOM_RANGE",
    "check_headroom",
    "Layout",
    "current_step",
    "Usage",
    "usage_step",
    "Proposal",
    "proposed_step",
    "Change",
    "change_sop",
    "change_remediation",
    "change_step",
    "RUNBOOK",
]

#: the ``headroom`` parameter: a fraction of the need (0.2 = 20 %)
HEADROOM_RANGE = (0.0, 2.0)
_NODE_COLUMNS = ["node", "gpu_product", "gpu_count", "mig_strategy", "mig_config", "mig_config_state", "mig_capacity"]
_SIZING_COLUMNS = [
    "namespace",
    "pod",
    "node",
    "current_profile",
    "gpus",
    "fb_p95_gib",
    "fb_max_gib",
    "activity_p95",
    "need_gib",
    "compute_slices",
    "profile",
    "preallocated",
]


def check_headroom(headroom) -> float:
    """``headroom`` as a float in :data:`HEADROOM_RANGE`, else :class:`InvalidParameter` (exit 2)."""
    lo, hi = HEADROOM_RANGE
    try:
        h = float(headroom)
    except (TypeError, ValueError):
        h = float("nan")
    if not lo <= h <= hi:
        raise InvalidParameter(f"headroom={headroom!r}: use a fraction between {lo:g} and {hi:g} (0.2 = 20 %)")
    return h


@dataclass
class Layout:
    """The selected nodes, the GPU model planned for, their FB_USED summaries (p95 and max) and today's layout."""

    nodes: pd.DataFrame
    model: str
    fb: pd.DataFrame
    current: pd.DataFrame
    title: str

    @property
    def fb_max(self) -> pd.DataFrame:
        return self.fb[self.fb["stat"] == "max"]

    def node_table(self) -> pd.DataFrame:
        return self.nodes[[c for c in _NODE_COLUMNS if c in self.nodes.columns]]

    def diagram(self):
        return mig_view.slot_diagram(self.current, self.title)


def current_step(src, *, node: str, gpu_model: str, window: str, headroom) -> Layout:
    """Step "Current layout": check ``headroom``, select the nodes, pick the model, read FB_USED p95/max."""
    check_headroom(headroom)
    sel = select_nodes(src.nodes(), node, gpu_model)
    model = target_model(gpu_model, sel)
    fb = pd.concat([src.summary("DCGM_FI_DEV_FB_USED", window, st, node=node or None) for st in ("p95", "max")])
    fb = fb[fb["node"].isin(set(sel["node"]))]
    current = current_layout(sel, fb[fb["stat"] == "max"])
    return Layout(sel, model, fb, current, f"Current layout on {node or 'MIG-capable nodes'} (planning for {model})")


@dataclass
class Usage:
    """What step "Observed usage" found: the workloads to pack, their memory needs (GiB), a table to show,
    findings and notes (text, level)."""

    workloads: list = field(default_factory=list)
    needs: dict[str, float] = field(default_factory=dict)
    table: pd.DataFrame | None = None
    findings: list = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)


def usage_step(
    src,
    layout: Layout,
    *,
    window: str,
    node: str,
    namespace: str,
    headroom,
    model_workloads: tuple[list, pd.DataFrame] | None = None,
    max_model_len: int = 0,
    concurrency: int = 1,
) -> Usage:
    """Step "Observed usage": the catalog models already sized with the vLLM memory model
    (``model_workloads`` = :func:`gpulib.vllm.workloads_from_models`'s result; the vllm domain builds on mig, so
    mig takes its result rather than importing it), or else the pods seen on the selected nodes (only
    ``namespace`` when set) from their FB_USED and activity."""
    h = check_headroom(headroom)
    if model_workloads is not None:
        workloads, table = model_workloads
        note = (
            f"Sizing {len(workloads)} model(s) with the vLLM memory model (weights + KV cache for {concurrency} "
            f"request(s) of {max_model_len} tokens + activations + runtime), plus {h:.0%} headroom."
        )
        return Usage(
            workloads, {w.name: w.memory_gib * (1 + h) for w in workloads}, table.round(2), notes=[(note, "info")]
        )
    act = src.summary("DCGM_FI_PROF_GR_ENGINE_ACTIVE", window, "p95", node=node or None)
    usage = layout.fb if not namespace else layout.fb[layout.fb["namespace"] == namespace]
    sizing = size_from_usage(usage, act, gpu_model=layout.model, headroom=h)
    findings = sizing_findings(usage, sizing, headroom=h)
    if sizing.empty:
        return Usage(findings=findings, notes=[("No pod uses a GPU here in the window: nothing to size.", "warning")])
    workloads = workloads_from_sizing(sizing, preallocated="keep")
    out = Usage(workloads, {w.name: w.memory_gib for w in workloads}, sizing[_SIZING_COLUMNS].round(3), findings)
    pre = sizing[sizing["preallocated"]]
    if not pre.empty:
        out.notes.append(
            (
                "Memory looks pre-allocated for "
                + ", ".join(pre["namespace"] + "/" + pre["pod"])
                + ": kept at their current size; size them from the model to shrink them.",
                "warning",
            )
        )
    return out


@dataclass
class Proposal:
    """Step "Proposed layout": the plan for the workloads, its instances with their headroom (LAYOUT_COLUMNS), GPUs
    and $ against whole-GPU placement, and the plan's findings."""

    plan: Plan
    layout: pd.DataFrame
    savings: pd.DataFrame
    title: str

    @property
    def findings(self) -> list:
        return plan_findings(self.plan)

    def diagram(self):
        return mig_view.slot_diagram(self.layout, self.title)

    def headroom_table(self) -> pd.DataFrame:
        return mig_view.headroom_table(self.layout)

    def savings_chart(self):
        return mig_view.savings_chart(self.savings)


def proposed_step(layout: Layout, workloads: list, needs: dict[str, float], *, headroom, models: str = "") -> Proposal:
    """Step "Proposed layout": pack ``workloads`` into the selected nodes' GPUs of the planned model (priced per
    GPU-hour), with ``headroom`` on top of each need when the workloads are catalog ``models`` (observed usage
    already carries it), and compare against whole GPUs and, for observed usage, the GPUs that hold them today."""
    inv, node_names, per_node = inventory_for(layout.nodes, layout.model, sum(w.replicas for w in workloads))
    plan = plan_layout(
        workloads,
        inv,
        headroom=check_headroom(headroom) if models else 0.0,
        nodes=node_names,
        gpus_per_node=per_node,
        prices={layout.model: gpu_price(layout.model)},
    )
    proposed = mig_view.proposed_layout(plan, needs)
    held = current_gpus_for(layout.current, list(needs)) if not models else None
    return Proposal(
        plan, proposed, savings(plan, layout.model, held), f"Proposed layout on {layout.model}: {plan.gpus_used} GPU(s)"
    )


@dataclass
class Change:
    """Step "Guided MIG change": the SOP findings, notes, and the remediation steps that did not print themselves."""

    findings: list = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    steps: list = field(default_factory=list)


def change_sop(src, plan, layout: Layout) -> Change:
    """Per node of ``plan``: the MIG change SOP (pre-checks from the source's pods, nodes and FB_USED), or a note
    for a node the selection does not have."""
    out = Change()
    pods, nodes = src.pods(), src.nodes()
    for target, (config, _) in plan.node_configs().items():
        if target not in set(layout.nodes["node"]):
            out.notes.append(
                (
                    f"{target}: no such node here (the plan needs more {layout.model} GPUs than the selected "
                    "nodes have)",
                    "warning",
                )
            )
            continue
        out.findings += mig_change_sop(target, config, pods=pods, nodes=nodes, fb_used=layout.fb_max)
    return out


def change_remediation(plan, layout: Layout, *, cluster=None, reason: str = "MIG change (mig_sizing runbook)") -> list:
    """Per node of ``plan`` the selection has: a cordon and the ``nvidia.com/mig.config`` label change (dry-run plans
    unless ``cluster`` is a KubeCluster: the runbook passes ``src.kube_cluster()``, see :mod:`gpulib.kube.remediate`),
    those that did not print themselves."""
    steps = []
    for target, (config, _) in plan.node_configs().items():
        if target not in set(layout.nodes["node"]):
            continue
        for step in (
            remediate.cordon(target, cluster=cluster, reason=reason),
            remediate.set_mig_config(target, config, cluster=cluster, reason=reason),
        ):
            if step.mode != "plan":  # a plan prints itself
                steps.append(step)
    return steps


def change_step(src, plan, layout: Layout, *, cluster=None, reason: str = "MIG change (mig_sizing runbook)") -> Change:
    """Per node of ``plan``: the MIG change SOP (:func:`change_sop`), then a cordon and the ``nvidia.com/mig.config``
    label change (:func:`change_remediation`)."""
    out = change_sop(src, plan, layout)
    out.steps = change_remediation(plan, layout, cluster=cluster, reason=reason)
    return out


# ------------------------------------------------------------------------------------------------- the runbook
def gather_current(c) -> None:
    c.lay = current_step(c.src, node=c.node, gpu_model=c.gpu_model, window=c.window, headroom=c.headroom)
    c.lay_model = c.lay.model


def gather_usage(c) -> None:
    """Observed usage, or the catalog ``models`` sized by the vLLM memory model: ``c.model_workloads`` is
    :func:`gpulib.vllm.workloads_from_models`, which this domain may not import (vLLM's memory model reads the MIG
    catalog); the run's context gives it (``model_workloads`` in :data:`gpulib.run.catalogue.RUNBOOKS`)."""
    sized = (
        c.model_workloads(c.models, max_model_len=c.max_model_len, concurrency=c.concurrency, replicas=c.replicas)
        if c.models
        else None
    )
    c.use = usage_step(
        c.src,
        c.lay,
        window=c.window,
        node=c.node,
        namespace=c.namespace,
        headroom=c.headroom,
        model_workloads=sized,
        max_model_len=c.max_model_len,
        concurrency=c.concurrency,
    )
    c.workloads, c.needs = c.use.workloads, c.use.needs


def gather_proposed(c) -> None:
    c.prop = proposed_step(c.lay, c.workloads, c.needs, headroom=c.headroom, models=c.models)
    c.plan = c.prop.plan
    c.plan_gpus = c.plan.gpus
    c.prop_findings = c.prop.findings


def gather_configs_in_use(c) -> None:
    """The MIG Manager configs in use; a ConfigMap that exists but could not be read makes the run incomplete
    (its error raised once what was read is kept: the next step still builds on the fallback)."""
    c.base = configs_in_use(c.src, c.current_mig_config, c.operator_namespace)
    c.base_findings = c.base.findings()
    c.base.raise_error()


def gather_config(c) -> None:
    """The mig-parted config for the cluster (when the configs in use were read, even with a fallback)."""
    if c.base is None:
        return
    c.text = config_for_cluster(c.plan, c.src, c.base)
    c.problems = validate_mig_parted_config(c.plan.mig_parted_config(), c.lay.model)  # the plan's own layouts


def gather_change(c) -> None:
    """The guided change's pre-checks and SOP per node (the remediation is the next step, a dry run)."""
    c.change = change_sop(c.src, c.plan, c.lay)


def gather_change_dry_run(c) -> None:
    """The cordon and label change per node as a dry run: server-side on a live cluster, with an audit record
    (``effects``: the notebook's alone)."""
    if c.change is None:
        return
    c.change.steps = change_remediation(c.plan, c.lay, cluster=c.src.kube_cluster())


def _start(c) -> dict:
    return {
        "lay": None,
        "lay_model": None,
        "plan": None,
        "plan_gpus": None,
        "workloads": [],
        "needs": {},
        "use": None,
        "prop_findings": None,
        "base": None,
        "base_findings": None,
        "text": None,
        "change": None,
    }


def _findings(c) -> list:
    """What the steps added, in their order: the usage's, the plan's, the configs in use's, the change's SOP."""
    out: list = []
    if c.use is not None:
        out += c.use.findings
    for fs in (c.prop_findings, c.base_findings, c.change.findings if c.change is not None else None):
        out += fs or []
    return out


_VIEW = "gpulib.mig.view:"
_NO_GPU = "the proposed layout places nothing on a GPU: "
RUNBOOK = Runbook(
    name="mig_sizing",
    domain="mig",
    params=(
        Param("source", "demo", "demo | live | snapshot"),
        Param("snapshot_dir", "", "folder with nodes.json, pods.json, metrics*.txt when source: snapshot", kind=DIR),
        Param("gpu_model", "", "GPU model to plan for (A100-40GB, H100-80GB, ...); empty: the nodes model"),
        Param("node", "a100-40-mig-0", "node to size; empty: every MIG-capable node (of gpu_model when set)"),
        Param("namespace", "", "only workloads in this namespace; empty: all"),
        Param("window", "6h", "usage window (Prometheus duration: 30m, 6h, 7d)"),
        Param("headroom", 0.2, "extra memory on top of observed max FB_USED (or the models need), as a fraction"),
        Param(
            "models",
            "",
            "empty: size from observed usage; else catalog LLMs served by vLLM: Qwen2.5-7B,Llama-3.1-8B",
        ),
        Param("max_model_len", 4096, "vLLM sizing (models only): context length per request, tokens"),
        Param("concurrency", 8, "vLLM sizing (models only): concurrent full-length requests per replica"),
        Param("replicas", 1, "vLLM sizing (models only): replicas of each model"),
        Param(
            "current_mig_config",
            "",
            "path of the MIG Manager ConfigMap config.yaml in use; empty: read it from the source "
            "(else the mig-parted defaults, flagged)",
        ),
        Param("operator_namespace", "gpu-operator", "namespace of the GPU Operator and its MIG Manager ConfigMap"),
    ),
    steps=(
        Step(
            "Current layout",
            gather_current,
            _VIEW + "show_current",
            needs=("src",),
            inputs=("nodes", "DCGM_FI_DEV_FB_USED"),
        ),
        Step(
            "Observed usage",
            gather_usage,
            _VIEW + "show_usage",
            needs=("lay", "lay_model"),
            why="no GPU model to plan for on the selected nodes (see Current layout).",
            inputs=("DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        ),
        Step(
            "Proposed layout",
            gather_proposed,
            _VIEW + "show_proposed",
            needs=("lay", "workloads"),
            why="no workload to size (see Observed usage).",
        ),
        Step(
            "MIG Manager configs in use",
            gather_configs_in_use,
            needs=("plan", "plan_gpus"),
            why=_NO_GPU + "no config to write.",
            inputs=("MIG Manager ConfigMap",),
        ),
        # where the base came from, also when reading it failed (the step above raised once it had the fallback)
        Step("Base config", None, _VIEW + "show_configs_in_use"),
        Step("mig-parted config and requests", gather_config, _VIEW + "show_config"),
        Step(
            "Guided MIG change",
            gather_change,
            _VIEW + "show_change",
            needs=("plan", "plan_gpus", "text"),
            why=_NO_GPU + "no MIG change to make.",
            inputs=("pods", "nodes"),
        ),
        Step("Guided MIG change (dry run)", gather_change_dry_run, _VIEW + "show_change_dry_run", effects=True),
    ),
    findings=_findings,
    start=_start,
)
