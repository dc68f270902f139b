"""Lesson ``learn_sharing``: whole GPU, MIG, time-slicing and MPS compared, the project's decision tree
(:func:`gpulib.mig.sharing.recommend`) on scenarios, MIG geometry and the time-slicing config; defined once in
:data:`RUNBOOK`, rendered by ``runbooks/learn/learn_sharing.ipynb``."""

from __future__ import annotations

import gpulib.mig as mig
import gpulib.mig.sharing as sharing
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.lessons import md_table, mig_fit_count, question, show_md
from gpulib.learn.session import next_step, source_params

__all__ = ["SCENARIOS", "RUNBOOK"]

#: the decision tree's inputs for the situations a newcomer meets first (keywords of gpulib.mig.sharing.recommend)
SCENARIOS = [
    dict(name="pre-training job", gpu_model="H100-80GB", workload="training"),
    dict(
        name="two tenants' small models in production",
        gpu_model="A100-40GB",
        workload="inference",
        isolation="hard",
        memory_gib=8,
    ),
    dict(name="notebooks for data scientists", gpu_model="L4", workload="dev", replicas=4),
    dict(name="small production model on a GPU without MIG", gpu_model="L4", workload="inference", memory_gib=6),
    dict(name="7B model, 20 GiB, production", gpu_model="H100-80GB", workload="inference", memory_gib=20, load=0.3),
    dict(name="70B model needing 130 GiB", gpu_model="H200", workload="inference", memory_gib=130),
]


def gather_supported(c) -> None:
    c.figures["mig_capable_models"] = frames.mig_capable_models(mig.gpu_models())


def show_supported(c, ui) -> None:
    show_md("**MIG-capable models in the catalog:** " + ", ".join(c.figures["mig_capable_models"]))
    show_md("\n".join(f"- **{k}**: " + "; ".join(v) for k, v in sharing.CAVEATS.items()))


def gather_tree(c) -> None:
    c.tree = []
    for s in SCENARIOS:
        kw = {k: v for k, v in s.items() if k != "name"}
        f = sharing.recommend(**kw)
        c.tree.append({"scenario": s["name"], "gpu": kw["gpu_model"], "strategy": f.data["strategy"], "why": f.summary})
    c.two_teams = sharing.recommend("A100-80GB", workload="inference", isolation="hard", memory_gib=15)


def show_tree(c, ui) -> None:
    show_md(md_table(c.tree))
    q = c.two_teams
    question(
        "Two teams each serve a 15 GiB model on one A100-80GB and must not affect each other. Which strategy, and "
        "why not time-slicing?",
        f"{q.title} ({q.data['strategy']}): one instance per team, each with its own memory.",
        q.summary + " Time-slicing shares memory and faults: one team's out-of-memory can take down the other's pod.",
    )


def gather_fit(c) -> None:
    n = c.figures["h100_1g10_beside_3g40"] = mig_fit_count("H100-80GB", "1g.10gb", ["3g.40gb"])
    c.placed = mig.place("H100-80GB", ["3g.40gb"] + ["1g.10gb"] * n)
    c.one_more = mig.place("H100-80GB", ["3g.40gb"] + ["1g.10gb"] * (n + 1))


def show_fit(c, ui) -> None:
    show_md(
        md_table(
            mig.profiles("H100-80GB"),
            {
                "profile": "H100-80GB profile",
                "memory_gib": "memory GiB",
                "compute_slices": "compute slices",
                "max_count": "max per GPU",
            },
            floatfmt="g",
        )
    )
    show_md(f"One more does not fit: *{c.one_more.reason}*.")
    question(
        "A team holds a 3g.40gb on an H100-80GB and asks for one more 1g.10gb than fit beside it. What do you offer, "
        "and what would re-partitioning this GPU cost?",
        "An instance on another GPU. Re-partitioning this one means destroying and recreating its instances, which "
        "stops every workload on the GPU, the 3g.40gb's included.",
        "Placement found by gpulib.mig.geometry.place: "
        + ", ".join(f"{i.profile}@{i.start}" for i in c.placed.instances)
        + f"; one more: {c.one_more.reason}. MIG geometry changes only with the GPU's instances torn down.",
    )


def show_time_slicing(c, ui) -> None:
    show_md("```yaml\n" + sharing.time_slicing_config(c.replicas) + "```")
    show_md("Apply it with:\n```\n" + "\n".join(sharing.sharing_commands("time-slicing-config", "any")) + "\n```")


RUNBOOK = Runbook(
    name="learn_sharing",
    domain="learn",
    kind=LESSON,
    params=(*source_params(), Param("replicas", 4, "pods per GPU in the time-slicing config")),
    steps=(
        Step("Supported GPUs and caveats", gather_supported, show_supported, inputs=("mig_gpu_models.csv",)),
        Step("Decision tree", gather_tree, show_tree),
        Step("MIG fit", gather_fit, show_fit, inputs=("mig_profiles.csv",)),
        Step("Time-slicing config", show=show_time_slicing),
        next_step("mig_sizing"),
    ),
)
