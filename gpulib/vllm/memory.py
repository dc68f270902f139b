"""vLLM GPU-memory model (``vllm-project/vllm: vllm/config/cache.py`` @ 002f10e0, ``vllm/v1/worker/gpu_worker.py``)
and the model catalog.

vLLM's accounting (V1): it claims ``gpu_memory_utilization x total`` of the device, loads the weights,
profiles one forward pass of ``max_num_batched_tokens`` tokens over ``min(tokens, max_num_seqs)`` dummy
requests, and gives whatever is left to the KV cache:

    kv = util x total - weights - peak activations - non-torch memory (- CUDA graphs, when estimated)
    kv_tokens = kv / (2 x layers x kv_heads/TP x head_dim x kv_dtype_bytes), in blocks of 16 tokens
    max concurrency at max_model_len = kv_tokens / max_model_len

Weights and KV bytes are exact from the model shape; activation and non-torch terms are estimates read
from ``model_memory_overheads.csv`` (flagged inferred there). ``device`` is a GPU model
(``"H100-80GB"``, a product label) or a MIG profile (``"A100-40GB/3g.20gb"``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from gpulib.core.errors import InvalidParameter, UnknownModel
from gpulib.core.findings import Finding
from gpulib.core.knowledge import load_table, overhead, settings  # noqa: F401
from gpulib.mig import device_memory_gib  # memory of a whole GPU or a MIG instance (the MIG catalog)
from gpulib.vllm.findings import budget_findings, no_tp_fits

GIB = 1024**3
TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class ModelSpec:
    """The shape numbers that decide memory (from the model's config.json)."""

    name: str
    params_b: float
    layers: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int
    attn_heads: int
    max_context: int
    experts: int = 1
    hf_id: str = ""


def models():
    """The model catalog (``models.csv``) as a DataFrame."""
    return load_table("models")


def get_model(name: str | ModelSpec) -> ModelSpec:
    """A catalog model by name (case-insensitive, or its Hugging Face id), or ``name`` itself if a ModelSpec."""
    if isinstance(name, ModelSpec):
        return name
    df = models()
    key = str(name).strip().lower()
    hit = df[(df["model"].str.lower() == key) | (df["hf_id"].str.lower() == key)]
    if hit.empty:
        raise UnknownModel(f"model {name!r} is not in the catalog; known: {', '.join(df['model'])}")
    r = hit.iloc[0]
    return ModelSpec(
        name=r["model"],
        params_b=float(r["params_b"]),
        layers=int(r["layers"]),
        kv_heads=int(r["kv_heads"]),
        head_dim=int(r["head_dim"]),
        hidden=int(r["hidden"]),
        intermediate=int(r["intermediate"]),
        vocab=int(r["vocab"]),
        attn_heads=int(r["attn_heads"]),
        max_context=int(r["max_context"]),
        experts=int(r["experts"]),
        hf_id=str(r["hf_id"]),
    )


def dtype_bytes(dtype: str) -> float:
    t = load_table("model_dtypes")
    d = dict(zip(t["dtype"].str.lower(), t["bytes"]))
    key = str(dtype).lower()
    if key not in d:
        raise InvalidParameter(f"dtype {dtype!r} unknown; use one of {', '.join(d)}")
    return float(d[key])


def default_batch(device: str, total_gib: float | None = None) -> tuple[int, int]:
    """vLLM OpenAI-server defaults (max_num_seqs, max_num_batched_tokens), ``vllm-project/vllm:
    vllm/engine/arg_utils.py``
    get_batch_defaults: GPUs with >= 70 GiB
    that are not A100 get 1024 / 8192, otherwise 256 / 2048."""
    total = total_gib if total_gib is not None else device_memory_gib(device)
    big = total >= 70 and "A100" not in str(device).upper()
    return (1024, 8192) if big else (256, 2048)


def _check_tp(model: ModelSpec, tp: int) -> None:
    if tp < 1 or model.attn_heads % tp:
        raise InvalidParameter(
            f"tensor_parallel_size {tp} must divide the {model.attn_heads} attention heads of {model.name}",
            hint=f"use one of {[t for t in TP_SIZES if model.attn_heads % t == 0]}",
        )


def weights_gib(model: str | ModelSpec, dtype: str = "bfloat16", tp: int = 1) -> float:
    """Weight memory per GPU: parameters x bytes / TP (+ group-scale overhead for 4-bit)."""
    m = get_model(model)
    b = dtype_bytes(dtype)
    extra = 1 + (overhead("quant_scale_overhead") if b < 1 else 0)
    return m.params_b * 1e9 * b * extra / tp / GIB


def kv_bytes_per_token(model: str | ModelSpec, kv_cache_dtype: str = "auto", tp: int = 1) -> float:
    """KV bytes per token per GPU = 2 x layers x kv_heads/TP x head_dim x bytes (heads replicated when TP > kv_heads)."""
    m = get_model(model)
    return 2 * m.layers * max(1, m.kv_heads // tp) * m.head_dim * dtype_bytes(kv_cache_dtype)


def activation_gib(
    model: str | ModelSpec, max_num_batched_tokens: int, max_num_seqs: int, tp: int = 1, act_dtype: str = "bfloat16"
) -> float:
    """Estimated profiled peak: batched tokens x (a*hidden + b*intermediate/TP) x bytes + FP32 logits of the
    dummy requests (coefficients in model_memory_overheads.csv, inferred)."""
    m = get_model(model)
    per_tok = (
        overhead("activation_hidden_factor") * m.hidden
        + overhead("activation_intermediate_factor") * m.intermediate / tp
    )
    logits = min(max_num_batched_tokens, max_num_seqs) * m.vocab * overhead("logits_bytes")
    return (max_num_batched_tokens * per_tok * dtype_bytes(act_dtype) + logits) / GIB


@dataclass
class MemoryBudget:
    """vLLM's memory arithmetic for one configuration (GiB per GPU); as a finding:
    :func:`gpulib.vllm.findings.budget_findings`."""

    model: str
    device: str
    tp: int
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    total_gib: float
    requested_gib: float
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    kv_gib: float
    kv_bytes_per_token: float
    kv_tokens: int
    max_concurrency: float
    fits: bool
    reason: str = ""
    hf_id: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def budget(
    model: str | ModelSpec,
    device: str,
    *,
    tp: int = 1,
    gpu_memory_utilization: float | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    dtype: str = "bfloat16",
    kv_cache_dtype: str = "auto",
    total_gib: float | None = None,
    estimate_cudagraphs: bool = False,
) -> MemoryBudget:
    """vLLM's memory budget of ``model`` on ``device`` (per GPU, with ``tp`` GPUs of that kind)."""
    m = get_model(model)
    _check_tp(m, tp)
    util = (
        overhead("gpu_memory_utilization_default") if gpu_memory_utilization is None else float(gpu_memory_utilization)
    )
    if not 0 < util <= 1:
        raise InvalidParameter(f"gpu_memory_utilization must be in (0, 1], got {util}")
    max_model_len = m.max_context if max_model_len is None else int(max_model_len)
    if not 0 < max_model_len <= m.max_context:
        raise InvalidParameter(f"max_model_len {max_model_len} is outside 1..{m.max_context} (the context of {m.name})")
    total = device_memory_gib(device) if total_gib is None else float(total_gib)
    d_seqs, d_tokens = default_batch(device, total)
    seqs = d_seqs if max_num_seqs is None else int(max_num_seqs)
    tokens = d_tokens if max_num_batched_tokens is None else int(max_num_batched_tokens)
    requested = util * total
    w = weights_gib(m, dtype, tp)
    act = activation_gib(m, tokens, seqs, tp)
    non_torch = overhead("non_torch_gib") + (overhead("nccl_gib") if tp > 1 else 0)
    graphs = overhead("cudagraph_gib") if estimate_cudagraphs else 0.0
    kv = requested - w - act - non_torch - graphs
    per_tok = kv_bytes_per_token(m, kv_cache_dtype, tp)
    block = int(overhead("block_size"))
    kv_tokens = max(0, int(kv * GIB // (per_tok * block)) * block)
    conc = kv_tokens / max_model_len
    if kv <= 0:
        fits, reason = (
            False,
            (
                f"no memory for the KV cache: weights {w:.1f} + activations/overhead "
                f"{act + non_torch + graphs:.1f} GiB exceed the {requested:.1f} GiB requested"
            ),
        )
    elif kv_tokens < max_model_len:
        fits, reason = (
            False,
            (
                f"KV cache holds {kv_tokens:,} tokens, fewer than max_model_len {max_model_len:,} "
                "(vLLM refuses to start)"
            ),
        )
    else:
        fits, reason = True, f"{kv_tokens:,} KV tokens = {conc:.1f} concurrent requests at {max_model_len:,} tokens"
    return MemoryBudget(
        m.name,
        str(device),
        tp,
        util,
        max_model_len,
        seqs,
        tokens,
        total,
        requested,
        w,
        act,
        non_torch + graphs,
        kv,
        per_tok,
        kv_tokens,
        conc,
        fits,
        reason,
        m.hf_id,
    )


def memory_needed(
    model: str | ModelSpec,
    *,
    max_model_len: int,
    concurrency: int,
    tp: int = 1,
    dtype: str = "bfloat16",
    kv_cache_dtype: str = "auto",
    max_num_batched_tokens: int = 2048,
) -> float:
    """GiB per GPU for weights + KV of ``concurrency`` full-length requests + activations + non-torch memory."""
    m = get_model(model)
    _check_tp(m, tp)
    kv = concurrency * max_model_len * kv_bytes_per_token(m, kv_cache_dtype, tp) / GIB
    non_torch = overhead("non_torch_gib") + (overhead("nccl_gib") if tp > 1 else 0)
    return weights_gib(m, dtype, tp) + kv + activation_gib(m, max_num_batched_tokens, concurrency, tp) + non_torch


def max_fit(model: str | ModelSpec, device: str, *, concurrency: int | None = None, **kw) -> dict:
    """Largest ``max_num_seqs`` at ``max_model_len`` and largest ``max_model_len`` at ``concurrency`` (default
    the max_num_seqs default) that fit ``device``: ``{"max_num_seqs": .., "max_model_len": .., "budget": ..}``."""
    b = budget(model, device, **kw)
    m = get_model(model)
    conc = concurrency or b.max_num_seqs
    return {
        "max_num_seqs": int(b.kv_tokens // b.max_model_len),
        "max_model_len": int(min(m.max_context, b.kv_tokens // conc)),
        "budget": b,
    }


def gpu_memory_utilization_for(
    model: str | ModelSpec, device: str, *, max_model_len: int, concurrency: int, tp: int = 1, **kw
) -> float:
    """Smallest ``gpu_memory_utilization`` (2 decimals) that holds ``concurrency`` requests at ``max_model_len``;
    useful when two vLLM instances share a GPU (the fraction counts the whole device)."""
    need = memory_needed(model, max_model_len=max_model_len, concurrency=concurrency, tp=tp, **kw)
    return math.ceil(need / device_memory_gib(device) * 100) / 100


def choose_tp(
    model: str | ModelSpec, device: str, *, gpus: int = 8, max_model_len: int | None = None, concurrency: int = 1, **kw
) -> list[Finding]:
    """Smallest tensor-parallel size (1, 2, 4, 8, <= ``gpus``) whose KV cache holds ``concurrency`` requests at
    ``max_model_len``; a CRITICAL Finding when none does."""
    m = get_model(model)
    tried = []
    for tp in TP_SIZES:
        if tp > gpus or m.attn_heads % tp:
            continue
        b = budget(m, device, tp=tp, max_model_len=max_model_len, **kw)
        tried.append(f"TP={tp}: {b.kv_tokens:,} KV tokens, {b.max_concurrency:.2f}x at {b.max_model_len}")
        if b.fits and b.max_concurrency >= concurrency:
            f = budget_findings(b)[0]
            f.title = f"{m.name}: tensor-parallel size {tp} on {device}"
            f.evidence = tried[:-1] + f.evidence
            return [f]
    return [no_tp_fits(m.name, device, gpus, concurrency, tried)]
