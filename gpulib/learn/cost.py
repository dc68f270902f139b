"""Lesson ``learn_cost``: the GPU cost optimisation checklist priced by :func:`gpulib.cost.analysis.analyze_cost` on
the fleet; defined once in :data:`RUNBOOK`, rendered by ``runbooks/learn/learn_cost.ipynb``."""

from __future__ import annotations

import gpulib.cost.analysis as cost
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.lessons import cost_checklist, cost_report, md_table, money, question, show_md
from gpulib.learn.session import next_step, source_params

__all__ = ["RUNBOOK"]


def gather_cost(c) -> None:
    c.rep = cost_report(c.src, c.window)
    c.summary = cost.executive_summary(c.rep)
    for k in ("idle_gpu_hours", "idle_cost", "potential_monthly_saving", "monthly_cost"):
        c.figures[k] = round(float(c.summary[k]), 2)


def show_cost(c, ui) -> None:
    s = c.summary
    cur = s["currency"]
    show_md(
        f"Window **{s['window_hours']:.0f} h** · GPU-hours **{s['gpu_hours']:,.0f}** · allocated "
        f"**{s['allocated_pct']:.0f}%** · active while allocated **{s['active_pct']:.0f}%** · idle allocated "
        f"**{s['idle_gpu_hours']:,.0f} GPU-h = {money(s['idle_cost'], cur)}** · never allocated "
        f"**{s['unallocated_gpu_hours']:,.0f} GPU-h = {money(s['unallocated_cost'], cur)}** · monthly spend "
        f"**{money(s['monthly_cost'], cur)}**"
    )


def gather_checklist(c) -> None:
    c.ck = cost_checklist(c.rep)


def show_checklist(c, ui) -> None:
    rep, ck = c.rep, c.ck
    show_md(
        md_table(
            ck.assign(saving=[money(x, rep.currency) for x in ck["monthly_saving"]]),
            {"checklist item": "checklist item", "targets": "targets on the demo fleet", "saving": "monthly saving"},
        )
    )
    show_md(
        "**Top actions:**\n"
        + "\n".join(
            f"- {a['label']} → `{a['target']}`: {money(a['monthly_saving'], rep.currency)}/month ({a['detail']})"
            for a in c.summary["top_actions"]
        )
    )


def show_checks(c, ui) -> None:
    s, th = c.summary, c.summary["thresholds"]
    question(
        "A team says its GPUs are busy because its pods hold them. What do you ask for, and why is allocated not "
        "the same as used?",
        f"The activity behind the allocation: here {s['idle_gpu_hours']:,.0f} allocated GPU-hours "
        f"({money(s['idle_cost'], s['currency'])}) ran below {th['idle_activity_max']:g} activity. Ask which "
        "workloads they are and whether they can release the GPUs or share them (MIG, time-slicing).",
        "Allocation is what the scheduler reserved; activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE, else GPU_UTIL) is what "
        "the GPU did. The bill follows allocation, the value follows activity.",
    )
    best = frames.best_row(c.ck, "monthly_saving")
    question(
        "You have time for one action this week. Which checklist item do you start with, and what would make you "
        "pick another?",
        f"{best['checklist item']} ({money(best.monthly_saving, c.rep.currency)}/month), unless its owners cannot "
        "change this week (moving to spot needs checkpointing, right-sizing needs a redeploy): then the largest "
        "item that is a one-line change.",
        "Rank by money first (the checklist sums gpulib.cost.analysis.savings_actions per action), then by effort "
        "and risk: a saving nobody can make this week saves nothing.",
    )
    question(
        "A pod holds GPU memory but has shown no activity for hours. Do you delete it?",
        f"Not yet ({s['zombie_pods']} such pods here): ask its owner (a notebook between sessions, a hung job) and "
        "reclaim after the grace period your cost policy sets; a hung job also needs its cause found.",
        f"A zombie is FB_USED above {th['zombie_fb_used_min_mib']:g} MiB with activity below "
        f"{th['zombie_activity_max']:g} for {th['zombie_min_duration_s'] / 60:g} min (thresholds.csv): the memory "
        "may hold state its owner still wants.",
    )


RUNBOOK = Runbook(
    name="learn_cost",
    domain="learn",
    kind=LESSON,
    start=lambda c: {"rep": None, "summary": None},
    params=(*source_params(), Param("window", "24h", "analysis window; monthly figures extrapolate it")),
    steps=(
        Step("Cost analysis", gather_cost, show_cost, needs=("src",), inputs=("DCGM_FI_PROF_GR_ENGINE_ACTIVE",)),
        Step("Checklist", gather_checklist, show_checklist, needs=("rep",)),
        Step("Self-check", show=show_checks, needs=("summary",)),
        next_step("gpu_utilization_report"),
    ),
)
