"""Lesson ``learn_interview_prep``: a four-part answer framework (resource management, inference deployment,
monitoring and cost, incident experience) with figures from the project's analyses on the fleet, practice questions,
model answers built from those figures and the interviewer's follow-ups; defined once in :data:`RUNBOOK`, rendered
by ``runbooks/learn/learn_interview_prep.ipynb``."""

from __future__ import annotations

import gpulib.cost.analysis as cost
import gpulib.fleet as fleet
import gpulib.mig.sharing as sharing
import gpulib.vllm.memory as vllm
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.interview import follow_up_html, model_answer
from gpulib.learn.lessons import cost_report, md_table, mig_fit_count, money, question, show_html, show_md, xid_sop
from gpulib.learn.session import next_step, source_params

__all__ = ["RUNBOOK"]


def _answer_step(part: str, title: str) -> Step:
    def show(c, ui) -> None:
        show_md("**Model answer** (figures from the demo fleet above): " + model_answer(part, c.figures))
        show_html(follow_up_html(part))

    return Step(title, show=show)


def gather_fleet(c) -> None:
    c.nodes, c.pods = c.src.nodes(), c.src.pods()
    c.inv = fleet.inventory(c.nodes, c.pods)
    c.figures["gpus"] = int(c.inv["gpus"].sum())
    c.figures["allocated_pct_devices"] = round(100 * c.inv["requested"].sum() / c.inv["allocatable"].sum(), 1)
    c.isolation = sharing.recommend("A100-80GB", workload="inference", isolation="hard", memory_gib=15)
    c.beside = mig_fit_count("H100-80GB", "1g.10gb", ["3g.40gb"])


def show_fleet(c, ui) -> None:
    inv = c.inv
    show_md(
        f"The fleet: **{len(inv)} nodes, {c.figures['gpus']} GPUs** ({', '.join(sorted(set(inv['gpu_product'])))}); "
        f"**{c.figures['allocated_pct_devices']:.0f}%** of allocatable devices (GPUs and MIG instances) requested "
        f"now; MIG on {frames.mig_node_count(inv)} node(s)."
    )
    question(
        "Two teams need hard isolation for 15 GiB models on A100-80GB. What do you choose and why?",
        f"{c.isolation.title}: one instance per team, sized to its model, each with its own memory.",
        c.isolation.summary,
    )
    question(
        "A team takes a 3g.40gb on an H100-80GB for a 13B model; others want the rest for notebooks. What do you "
        "offer them, and what can they not have?",
        f"Up to {c.beside} x 1g.10gb beside it (placed by the MIG geometry), each with its own memory and faults "
        "isolated; not a 4g or a second 3g: the 3g.40gb holds half the memory slices.",
        "gpulib.mig.geometry.place over mig_profiles.csv: profiles take fixed memory and compute slices at fixed "
        "positions, so what fits depends on what is already placed, not only on free memory.",
    )


def gather_inference(c) -> None:
    v = frames.workload_pods(c.pods, prefix="vllm")
    c.vllm_deployments = frames.deployments(v) if len(v) else None
    c.b70 = vllm.budget("Llama-3-70B", "H200", tp=2, max_model_len=8192)
    c.figures["llama70b_h200_tp2_concurrency"] = round(c.b70.max_concurrency, 2)


def show_inference(c, ui) -> None:
    if c.vllm_deployments is not None:
        show_md(
            md_table(
                c.vllm_deployments,
                {"workload": "deployment", "replicas": "replicas", "gpus": "GPUs per replica", "node": "node"},
            )
        )
    b = c.b70
    question(
        "Would you serve Llama-3-70B BF16 on 2x H200 (TP=2) for 8 users who each send 8,192-token requests at "
        "once? Say how you decide.",
        f"{'Yes' if b.max_concurrency >= 8 else 'Not as is'}: the KV cache holds {b.max_concurrency:.1f} "
        "full-length requests; "
        + (
            "the rest is headroom for bursts."
            if b.max_concurrency >= 8
            else "add a replica, use --kv-cache-dtype fp8 or TP=4, or cap max_model_len."
        ),
        f"{b.kv_tokens:,} KV tokens / 8,192 after {b.weights_gib:.1f} GiB of weights per GPU: decide from the "
        "memory arithmetic, not from the parameter count.",
    )


def gather_cost(c) -> None:
    c.rep = cost_report(c.src, c.window)
    s = c.summary = cost.executive_summary(c.rep)
    for k in ("idle_gpu_hours", "idle_cost", "potential_monthly_saving", "monthly_cost", "active_pct", "zombie_pods"):
        c.figures[k] = round(float(s[k]), 2)
    c.figures["currency"] = s["currency"]
    c.figures["uplift_pct_points"] = round(100 * s["idle_gpu_hours"] / max(s["gpu_hours"], 1), 1)


def show_cost(c, ui) -> None:
    s, cur = c.summary, c.summary["currency"]
    show_md(
        f"In the last **{c.window}**: **{s['idle_gpu_hours']:,.0f}** allocated GPU-hours idle = "
        f"**{money(s['idle_cost'], cur)}**; active **{s['active_pct']:.0f}%** of allocated time; "
        f"**{s['zombie_pods']}** zombie pods; checklist saving **{money(s['potential_monthly_saving'], cur)}/month** "
        f"of {money(s['monthly_cost'], cur)}."
    )
    question(
        "You propose reclaiming idle allocated GPUs. How much could it raise fleet utilisation, and why would you "
        "not reclaim all of it?",
        f"At most {c.figures['uplift_pct_points']:.1f} percentage points of GPU time. Not all of it: some idle time "
        "is headroom someone pays for on purpose (an inference replica kept warm for peaks, a job between epochs).",
        "Idle allocated GPU-hours / all GPU-hours in the window; reclaim what an owner cannot justify, after asking.",
    )
    top = s["top_actions"][0] if s["top_actions"] else None
    question(
        "Which saving would you lead with in the interview, and how do you defend it?",
        f"{top['label']}: {top['target']} ({money(top['monthly_saving'], cur)}/month)" if top else "none on this fleet",
        (top["detail"] + ": lead with the money and the measurement behind it, then the risk of the change.")
        if top
        else "",
    )


def gather_incidents(c) -> None:
    hf = fleet.health_frames(c.src, c.window)
    c.critical = [f for f in fleet.health_findings(hf) if f.severity.value == "critical"]
    c.figures["critical_incidents"] = [f.title for f in c.critical]


def show_incidents(c, ui) -> None:
    show_md(
        "Critical findings the fleet check raises now:\n"
        + "\n".join(f"- **{f.title}** → {f.sop_step}" for f in c.critical)
    )


def gather_xids(c) -> None:
    c.xid_rows = [xid_sop(code) for code in (48, 79)]


def show_xids(c, ui) -> None:
    rows = c.xid_rows
    show_md(
        md_table(
            rows,
            {
                "code": "XID",
                "mnemonic": "mnemonic",
                "bucket": "NVIDIA bucket",
                "sop_step": "SOP step",
                "escalation": "escalate when",
            },
        )
    )
    question(
        "XID 48 vs XID 79: do you reset the GPU or reboot the node?",
        f"XID 48: {rows[0]['recovery']} · XID 79: {rows[1]['recovery']}",
        f"XID 48: {rows[0]['description']}. XID 79: {rows[1]['description']}. A GPU that fell off the bus cannot "
        "be reset from software that no longer sees it.",
    )


RUNBOOK = Runbook(
    name="learn_interview_prep",
    domain="learn",
    kind=LESSON,
    start=lambda c: {"pods": None},
    params=(*source_params(), Param("window", "24h", "analysis window for cost and health")),
    steps=(
        Step("Fleet", gather_fleet, show_fleet, needs=("src",), inputs=("nodes", "pods")),
        _answer_step("resource_management", "Resource management: model answer and follow-ups"),
        Step("Inference", gather_inference, show_inference, needs=("pods",)),
        _answer_step("inference_deployment", "Inference deployment: model answer and follow-ups"),
        Step("Cost", gather_cost, show_cost, needs=("src",), inputs=("DCGM_FI_PROF_GR_ENGINE_ACTIVE",)),
        _answer_step("monitoring_cost", "Monitoring and cost: model answer and follow-ups"),
        Step("Incidents on the demo fleet", gather_incidents, show_incidents, needs=("src",)),
        Step("XID 48 vs 79", gather_xids, show_xids),
        _answer_step("incident_experience", "Incident experience: model answer and follow-ups"),
        next_step(
            "fleet_overview",
            "xid_ecc_triage",
            "gpu_utilization_report",
            "vllm_deploy",
            "mig_sizing",
            lead="Runbooks to open next: ",
            sep=" · ",
        ),
    ),
)
