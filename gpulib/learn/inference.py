"""Lesson ``learn_inference``: vLLM's memory arithmetic (:mod:`gpulib.vllm.memory`), choosing a tensor-parallel size,
the vLLM and TGI flags, and autoscaling on latency; defined once in :data:`RUNBOOK`, rendered by
``runbooks/learn/learn_inference.ipynb``.

The "what ifs" a newcomer tries first are answered as part of the lesson: a model that does not fit one device
(Llama-3-70B on one H100) gets the GPUs and the quantisation that would fit (:func:`fit_options`), and a
``max_model_len`` beyond the model's context gets the catalogue models that take it and the budget at the model's
own context.
"""

from __future__ import annotations

from typing import Any

import gpulib.vllm.memory as vllm
from gpulib.core.knowledge import load_table
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.lessons import hpa_manifest, md_table, question, show_md, vllm_serve_command
from gpulib.learn.session import next_step, source_params

__all__ = ["FIT_DTYPES", "fit_options", "RUNBOOK"]

#: weight dtypes a "does not fit" answer tries, in the order a team reaches for them (bytes per parameter from
#: gpulib/data/vllm/model_dtypes.csv: BF16 2, FP8 1, INT4 0.5)
FIT_DTYPES = ("bfloat16", "fp8", "int4")
#: the model the tensor-parallel section sizes (a 70B model needs more than one 80 GB GPU in BF16)
BIG = "Llama-3-70B"


def fit_options(model: str, device: str, max_model_len: int) -> list[dict[str, Any]]:
    """For each weight dtype of :data:`FIT_DTYPES`: the smallest tensor-parallel size of ``device`` GPUs on which
    vLLM's budget (:func:`gpulib.vllm.memory.budget`) holds at least one ``max_model_len`` request, with the KV
    tokens and the concurrency it gives; ``tp`` None when no size up to 8 does (a MIG instance takes no TP)."""
    m = vllm.get_model(model)
    rows = []
    for dt in FIT_DTYPES:
        row: dict[str, Any] = {"weights": dt, "weights_gib": vllm.weights_gib(m, dt), "tp": None, "kv_tokens": 0}
        row["concurrency"] = 0.0
        for tp in vllm.TP_SIZES:
            if m.attn_heads % tp or ("/" in str(device) and tp > 1):
                continue
            b = vllm.budget(m, device, tp=tp, max_model_len=max_model_len, dtype=dt)
            if b.fits:
                row.update(tp=tp, kv_tokens=b.kv_tokens, concurrency=round(b.max_concurrency, 2))
                break
        rows.append(row)
    return rows


def _longer(max_model_len: int) -> list[str]:
    """Catalogue models whose context holds ``max_model_len`` tokens (models.csv max_context)."""
    m = load_table("models")
    return [str(r.model) for r in m.itertuples() if int(r.max_context) >= int(max_model_len)]


# ------------------------------------------------------------------------------------------------ the steps
def gather_budget(c) -> None:
    m = vllm.get_model(c.model)
    c.context_len = min(int(c.max_model_len), m.max_context)
    c.longer_models = _longer(c.max_model_len) if int(c.max_model_len) > m.max_context else []
    c.b = vllm.budget(m, c.device, max_model_len=c.context_len)
    c.fp8 = vllm.budget(m, c.device, max_model_len=c.context_len, kv_cache_dtype="fp8")
    c.options = fit_options(m.name, c.device, c.context_len)
    c.figures["fits"] = c.b.fits
    c.figures["max_concurrency"] = round(c.b.max_concurrency, 2)
    c.figures.update({f"fit_tp_{r['weights']}": r["tp"] for r in c.options})


def show_budget(c, ui) -> None:
    b, fp8 = c.b, c.fp8
    if c.longer_models:
        show_md(
            f"**max_model_len {int(c.max_model_len):,} is longer than {b.model}'s context ({c.context_len:,} tokens, "
            "`max_context` in models.csv)**: vLLM refuses to start with it. Catalogue models that take "
            f"{int(c.max_model_len):,} tokens: {', '.join(c.longer_models) or 'none'}. The budget below is at "
            f"{c.context_len:,} tokens."
        )
    rows = [
        ("total GPU memory", b.total_gib),
        ("requested (utilisation x total)", b.requested_gib),
        ("weights", b.weights_gib),
        ("activations (estimate)", b.activation_gib),
        ("non-torch (estimate)", b.non_torch_gib),
        ("KV cache", b.kv_gib),
    ]
    show_md(md_table([{"term": t, "GiB": v} for t, v in rows], floatfmt=",.2f"))
    if not b.fits:
        _show_does_not_fit(c)
        return
    show_md(f"KV per token: **{b.kv_bytes_per_token / 1024:,.0f} KiB** · KV tokens: **{b.kv_tokens:,}** · {b.reason}")
    question(
        f"vLLM starts {b.model} on one {b.device} and prints its maximum concurrency for {c.context_len:,}-token "
        "requests (above). At peak, twice that many full-length requests arrive at once. What happens to the extra "
        "ones, and what do you change first?",
        "They wait in vLLM's queue (vllm:num_requests_waiting) and their time to first token grows; none fails. "
        f"First try --kv-cache-dtype fp8 ({fp8.kv_tokens / b.kv_tokens:.2f}x the KV tokens on the same GPU), then add "
        "a replica, scaled on the queue. Raising --max-num-seqs does not help: KV memory is the limit.",
        "Concurrency is KV tokens / max_model_len: the scheduler admits a request only while KV blocks are free and "
        "queues the rest, so more sequences need more KV memory (a smaller KV dtype, more GPUs or more replicas), "
        "not a higher limit.",
    )
    question(
        "Would you switch on --kv-cache-dtype fp8 for this deployment, and what do you give up?",
        f"Yes when the queue is the problem: {fp8.kv_tokens:,} KV tokens instead of {b.kv_tokens:,} on the same GPU; "
        "you give up some precision of the attention cache, so compare answers on your own prompts first.",
        "FP8 stores 1 byte per KV value instead of 2 (model_dtypes.csv). The weights stay as they are, so it never "
        "makes a model fit whose weights do not fit.",
    )


def _show_does_not_fit(c) -> None:
    b = c.b
    show_md(f"**{b.model} (BF16) does not fit on one {b.device}**: {b.reason}. What would fit, by vLLM's budget:")
    show_md(
        md_table(
            [
                {
                    "weights": r["weights"],
                    "weights GiB (all)": r["weights_gib"],
                    "GPUs per replica": r["tp"] or "none up to 8",
                    "concurrency": r["concurrency"],
                }
                for r in c.options
            ],
            floatfmt=",.1f",
        )
    )
    fits = [r for r in c.options if r["tp"]]
    answer = (
        " or ".join(f"{r['weights']} weights on {r['tp']} GPU(s) ({r['concurrency']:.1f}x)" for r in fits)
        if fits
        else f"nothing up to 8 x {b.device}: pick a larger GPU or a smaller model"
    )
    question(
        f"Your team asks to run {b.model} on one {b.device}. What do you propose, and what does each choice cost?",
        answer + ". More GPUs per replica cost money (and an all-reduce per layer); quantised weights cost some "
        "accuracy, which you measure on your own prompts before production.",
        f"The weights alone are parameters x bytes per parameter ({b.weights_gib:.1f} GiB in BF16) against "
        f"gpu_memory_utilization x memory ({b.requested_gib:.1f} GiB): nothing is left for the KV cache and vLLM "
        "refuses to start. Splitting the weights over GPUs (tensor parallel) or storing fewer bytes per parameter "
        "(FP8, INT4) are the two levers.",
    )


def gather_tp(c) -> None:
    c.big_len = min(int(c.max_model_len), vllm.get_model(BIG).max_context)
    c.tp_finding = vllm.choose_tp(BIG, "H100-80GB", max_model_len=c.big_len, concurrency=8)[0]


def show_tp(c, ui) -> None:
    f = c.tp_finding
    show_md(f"**{f.title}**\n\n" + "\n".join(f"- {e}" for e in f.evidence))
    question(
        f"Why not give every {BIG} replica all 8 GPUs of a node (TP=8), to be safe?",
        f"{f.title}: the smallest size that holds 8 concurrent {c.big_len:,}-token requests. TP=8 holds more but "
        "costs more GPUs per replica, and every layer all-reduces across all of them; when you need more "
        "throughput, add replicas of the smallest size that fits.",
        "gpulib.vllm.memory.choose_tp tries 1, 2, 4, 8 and stops at the first whose KV cache holds the load: above "
        "that size the extra GPUs buy KV room nobody uses.",
    )


def gather_demo(c) -> None:
    pods = c.src.pods()
    v = frames.workload_pods(pods, contains="llama70b")
    c.demo_dep = None
    if len(v):
        nodes = c.src.nodes().set_index("node")
        gpus = int(v.iloc[0]["gpu_request"])
        prod = nodes.loc[v.iloc[0]["node"], "gpu_product"]
        dep = vllm.budget(BIG, prod, tp=gpus, max_model_len=c.big_len)
        c.figures["demo_llama70b_kv_tokens"] = dep.kv_tokens
        c.demo_dep = {"workload": v.iloc[0]["workload"], "replicas": len(v), "gpus": gpus, "prod": prod, "b": dep}


def show_demo(c, ui) -> None:
    d = c.demo_dep
    if d is None:
        show_md("No Llama-3-70B deployment (a workload named `*llama70b*`) on this fleet.")
        return
    show_md(
        f"`{d['workload']}`: {d['replicas']} replicas x {d['gpus']} GPUs on {d['prod']}: **{d['b'].kv_tokens:,}** KV "
        f"tokens per replica, **{d['b'].max_concurrency:.1f}x** at {c.big_len:,} tokens."
    )


def show_flags(c, ui) -> None:
    flags = load_table("learn/serving_flags")
    show_md(md_table(flags, {"setting": "setting", "vllm_flag": "vLLM", "tgi_flag": "TGI", "meaning": "meaning"}))
    if c.b.fits:
        show_md(
            "The budget above as the vLLM command `vllm_deploy` generates (`--max-num-seqs` = full-length requests "
            "the KV cache holds, not vLLM's default):\n```\n"
            + vllm_serve_command(c.b.model, c.device, c.context_len)
            + "\n```"
        )
    else:
        show_md(
            f"No command for one {c.device}: the model does not fit (above). `gpuops run vllm_deploy -p model "
            f"{c.b.model} -p device {c.device} -p gpus 8` sizes it over several GPUs."
        )


def show_hpa(c, ui) -> None:
    target_waiting = 5  # queued requests per replica before scaling out (your SLO decides)
    show_md(
        "```yaml\n"
        + hpa_manifest("vllm-llama70b", "vllm_num_requests_waiting", target_waiting, min_replicas=2, max_replicas=4)
        + "```"
    )


RUNBOOK = Runbook(
    name="learn_inference",
    domain="learn",
    kind=LESSON,
    start=lambda c: {"b": None},
    params=(
        *source_params(),
        Param("model", "Llama-3-8B", "a model from gpulib/data/vllm/models.csv"),
        Param("device", "H100-80GB", "a GPU model or MIG profile like A100-40GB/3g.20gb"),
        Param("max_model_len", 8192, "tokens per request (prompt + output)"),
    ),
    steps=(
        Step("Memory budget", gather_budget, show_budget, inputs=("model catalog",)),
        Step("Tensor parallel", gather_tp, show_tp),
        Step("Demo deployment", gather_demo, show_demo, needs=("src",), inputs=("pods", "nodes")),
        Step("Flags", show=show_flags, needs=("b",)),
        Step("HPA", show=show_hpa),
        next_step("vllm_deploy"),
    ),
)
