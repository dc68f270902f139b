"""Lesson ``learn_storage``: a model's size on disk per dtype, the hot/warm/cold storage tiers and how long a
replica takes to load its weights from each; defined once in :data:`RUNBOOK`, rendered by
``runbooks/learn/learn_storage.ipynb``."""

from __future__ import annotations

import gpulib.vllm.memory as vllm
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.lessons import load_times, md_table, model_sizes, question, show_md, storage_tiers
from gpulib.learn.session import next_step, source_params

__all__ = ["RUNBOOK"]

#: the node the 405B question sizes against: 8 GPUs of this model at vLLM's default memory utilisation
NODE_GPU, NODE_GPUS = "H100-80GB", 8


def gather_sizes(c) -> None:
    c.sizes = model_sizes(("bfloat16", "fp8", "int4"))
    c.big = frames.model_size(c.sizes, "Llama-3.1-405B", "fp8")
    c.node_gib = vllm.budget("Llama-3.1-405B", NODE_GPU, tp=NODE_GPUS, dtype="fp8").requested_gib


def show_sizes(c, ui) -> None:
    wide = c.sizes.pivot(index="model", columns="dtype", values="size_gb").reset_index()
    show_md(
        md_table(wide, {"model": "model", "bfloat16": "BF16 GB", "fp8": "FP8 GB", "int4": "INT4 GB"}, floatfmt=",.1f")
    )
    big, per_gpu = c.big, c.big.size_gib / NODE_GPUS
    question(
        f"You must serve Llama-3.1-405B on one node of {NODE_GPUS}x {NODE_GPU}. Is FP8 enough, and what else must "
        "fit beside the weights?",
        f"The FP8 weights ({big.size_gb:,.1f} GB = {big.size_gib:,.1f} GiB) split over {NODE_GPUS} GPUs are "
        f"{per_gpu:,.1f} GiB each of the {c.node_gib:,.1f} GiB vLLM claims per GPU: "
        + (
            "they fit, and what is left must hold the KV cache and activations; size that with the inference lesson."
            if per_gpu < c.node_gib
            else "they do not fit; it needs a second node (pipeline parallel) or INT4 weights."
        ),
        f"{big.params_b} B parameters x {big.bytes_per_param:g} byte (models.csv x model_dtypes.csv); the disk size "
        "is only the first term of the memory budget.",
    )


def show_tiers(c, ui) -> None:
    show_md(
        md_table(
            storage_tiers(),
            {
                "tier": "tier",
                "medium": "medium",
                "read_gb_s": "read GB/s",
                "basis": "basis",
                "inferred": "assumption",
                "note": "note",
            },
            floatfmt="g",
        )
    )


def gather_load(c) -> None:
    c.one = model_sizes((c.dtype,), (c.model,)).iloc[0]
    c.load = load_times(c.one.size_gb)
    cold = frames.tier_row(c.load, "cold")
    c.figures["cold_load_s"] = float(cold.seconds)


def show_load(c, ui) -> None:
    one, lt = c.one, c.load
    show_md(f"**{c.model} {c.dtype}: {one.size_gb:,.1f} GB**")
    show_md(
        md_table(
            lt, {"tier": "tier", "medium": "medium", "read_gb_s": "read GB/s", "basis": "basis", "seconds": "seconds"}
        )
    )
    fast = [r for r in lt.itertuples() if r.seconds <= c.scale_out_s]
    question(
        f"A new replica of {c.model} {c.dtype} must serve within {c.scale_out_s} s of a scale-out. From which tier "
        "do you load it, and what if none is fast enough?",
        (
            "From "
            + " or ".join(f"{r.tier}: {r.medium} ({r.seconds:,.0f} s)" for r in fast)
            + ": pre-pull the weights to that tier before traffic needs them."
            if fast
            else "No tier reads it in time: keep a warm replica (minReplicas above the steady load) and scale earlier."
        )
        + " vLLM needs more time after the read (loading to the GPU, CUDA graphs), so leave a margin.",
        f"{one.size_gb:,.1f} GB / each tier's read GB/s (storage_tiers.csv, assumptions flagged): the load time "
        "bounds how fast autoscaling can react.",
    )


def gather_demo(c) -> None:
    pods = c.src.pods()
    c.vllm_pods = int(pods["workload"].astype(str).str.startswith("vllm").sum())


def show_demo(c, ui) -> None:
    show_md(
        f"The demo fleet runs **{c.vllm_pods}** vLLM pods; each restart or scale-out pays the load time of its tier."
    )


RUNBOOK = Runbook(
    name="learn_storage",
    domain="learn",
    kind=LESSON,
    params=(
        *source_params(),
        Param("model", "Llama-3-70B", "a model from gpulib/data/vllm/models.csv"),
        Param("dtype", "bfloat16", "a dtype from gpulib/data/vllm/model_dtypes.csv"),
        Param("scale_out_s", 120, "seconds a new replica may take to serve after a scale-out (your SLO)"),
    ),
    steps=(
        Step("Model sizes", gather_sizes, show_sizes, inputs=("models.csv", "model_dtypes.csv")),
        Step("Tiers", show=show_tiers),
        Step("Load times", gather_load, show_load, inputs=("storage_tiers.csv",)),
        Step("Demo fleet", gather_demo, show_demo, needs=("src",), inputs=("pods",)),
        next_step("vllm_deploy"),
    ),
)
