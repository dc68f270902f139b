"""Lesson ``learn_k8s_gpu_resources``: how a GPU becomes a schedulable extended resource, MIG resource names under
the single and mixed strategies, and what the project's pod checks say about specs that get it wrong; defined once
in :data:`RUNBOOK`, rendered by ``runbooks/learn/learn_k8s_gpu_resources.ipynb``."""

from __future__ import annotations

import html

import gpulib.fleet.health as fleet
import gpulib.mig as mig
from gpulib.core.runbook import LESSON, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.lessons import md_table, pod_resources_outcome, question, resources_text, show_md
from gpulib.learn.session import next_step, source_params

__all__ = ["EXAMPLES", "RUNBOOK"]

#: container ``resources`` blocks a newcomer writes, right and wrong (the API rules: kubernetes
#: pkg/apis/core/validation/validation.go ValidateResourceRequirements, https://github.com/kubernetes/kubernetes)
EXAMPLES = {
    "limit only (request defaulted)": {"limits": {"nvidia.com/gpu": 1}},
    "request without a limit": {"requests": {"nvidia.com/gpu": 1}},
    "request != limit": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}},
    "half a GPU": {"requests": {"nvidia.com/gpu": "0.5"}, "limits": {"nvidia.com/gpu": "0.5"}},
    "MIG 2g.10gb (mixed name)": {"limits": {"nvidia.com/mig-2g.10gb": 1}},
    "MIG profile of another GPU model": {"limits": {"nvidia.com/mig-3g.40gb": 1}},
}


def gather_allocation(c) -> None:
    c.nodes, pods = c.src.nodes(), c.src.pods()
    c.inv = fleet.inventory(c.nodes, pods)
    c.figures["free_devices"] = int(c.inv["free"].sum())
    whole = c.inv[c.inv["mig"].astype(str) == ""]
    c.max_free_whole = int(whole["free"].max()) if len(whole) else 0


def show_allocation(c, ui) -> None:
    inv = c.inv
    show_md(
        md_table(
            inv,
            {
                "node": "node",
                "gpu_product": "GPU product",
                "gpus": "GPUs",
                "allocatable": "allocatable devices",
                "mig": "MIG devices",
                "requested": "requested",
                "free": "free",
            },
        )
    )
    free = c.figures["free_devices"]
    show_md(
        f"Nodes where requests exceed allocatable: **{frames.overcommitted_nodes(inv)}** (the scheduler cannot place "
        f"beyond it). Free devices across the fleet: **{free}** of {int(inv['allocatable'].sum())}."
    )
    question(
        "A team asks for one pod with 8 whole GPUs for a training run today. Can the fleet above take it, and why is "
        "the fleet's free total the wrong number to look at?",
        f"{'Yes' if c.max_free_whole >= 8 else 'Not as one pod'}: the most whole GPUs free on one node is "
        f"{c.max_free_whole} (the fleet has {free} devices free in all, MIG instances included).",
        "Extended resources are counted per node and one pod never spans nodes, so the question is the free count "
        "of the best node; MIG instances are separate resources and do not add up to a whole GPU.",
    )


def gather_mig_names(c) -> None:
    prof = mig.profiles("A100-40GB")
    c.prof = prof.assign(
        single=[mig.resource_name(p, "single") for p in prof["profile"]],
        mixed=[mig.resource_name(p, "mixed") for p in prof["profile"]],
    )
    c.mig_layouts = []
    if c.get("nodes") is not None:
        for r in frames.mig_nodes(c.nodes).itertuples():
            layout = [{k.replace("nvidia.com/mig-", ""): v for k, v in r.mig_capacity.items()}]
            ok, why = mig.single_strategy_ok(layout)
            c.mig_layouts.append((r.node, r.mig_strategy, ok, why))


def show_mig_names(c, ui) -> None:
    show_md(
        md_table(
            c.prof,
            {
                "profile": "profile",
                "memory_gib": "memory GiB",
                "compute_slices": "compute slices",
                "max_count": "max per GPU",
                "single": "single strategy",
                "mixed": "mixed strategy",
            },
            floatfmt="g",
        )
    )
    for node, strategy, ok, why in c.mig_layouts:
        show_md(
            f"Demo node `{node}` runs the **{strategy}** strategy; could it use single? **{'yes' if ok else 'no'}**: "
            f"{html.escape(why)}."
        )
    question(
        "An A100-40GB node will host 3g.20gb and 1g.5gb instances side by side. Which MIG strategy do you "
        "configure, and what does a pod request for one 3g.20gb?",
        f"mixed, and the pod requests {mig.resource_name('3g.20gb', 'mixed')}: 1. Under single every instance is "
        f"called {mig.resource_name('3g.20gb', 'single')} and all instances on the node must be one profile.",
        "gpulib.mig.resources.resource_name: the strategy decides the names the device plugin advertises, so it "
        "follows from the layout you need, not the other way round.",
    )


def gather_specs(c) -> None:
    node_frame = c.get("nodes")
    c.spec_rows = [
        {"spec": k, "resources": resources_text(v), **pod_resources_outcome(v, node_frame)} for k, v in EXAMPLES.items()
    ]
    c.half = pod_resources_outcome(EXAMPLES["half a GPU"])
    c.other = pod_resources_outcome(EXAMPLES["MIG profile of another GPU model"], node_frame)


def show_specs(c, ui) -> None:
    show_md(
        md_table(
            c.spec_rows,
            {
                "spec": "spec",
                "resources": "resources",
                "parsed": "as the API reads it",
                "check": "project check",
                "schedulable_on": "demo nodes that can take it",
            },
        )
    )
    question(
        "A data scientist wants half a GPU for a notebook and writes nvidia.com/gpu: 0.5. What happens, and what do "
        "you offer instead?",
        f"The API server rejects the pod ({c.half['check']}). Offer a MIG instance (isolated memory) or a "
        "time-sliced share of a GPU (no isolation, fine for notebooks).",
        "Extended resources are whole numbers; fractional sharing is done by MIG, time-slicing or MPS, which the "
        "next lesson compares.",
    )
    question(
        "A pod that requests nvidia.com/mig-3g.40gb stays Pending on the demo fleet. What is wrong, and what do you "
        "change?",
        f"No node advertises it (schedulable on: {c.other['schedulable_on']}): request a profile the MIG node has "
        "(3g.20gb), or add an 80 GB A100 or H100 node with that profile.",
        "3g.40gb is a profile of the 80 GB A100 and H100 (mig_profiles.csv; H200 has 3g.71gb instead); the demo MIG "
        "node is an A100-40GB that advertises 3g.20gb and smaller.",
    )


RUNBOOK = Runbook(
    name="learn_k8s_gpu_resources",
    domain="learn",
    kind=LESSON,
    params=source_params(),
    steps=(
        Step("Allocation on the demo fleet", gather_allocation, show_allocation, needs=("src",), inputs=("nodes",)),
        Step("MIG resource names", gather_mig_names, show_mig_names, inputs=("mig_profiles.csv",)),
        Step("Pod spec checks", gather_specs, show_specs),
        next_step("fleet_overview", "mig_sizing"),
    ),
)
