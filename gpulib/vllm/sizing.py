"""vLLM deployment sizing (runbook ``vllm_deploy``), on top of :mod:`gpulib.vllm.memory`'s memory model: choose
tensor-parallel size, ``--gpu-memory-utilization``, ``--max-model-len``, ``--max-num-seqs`` and KV-cache dtype for a
model on a GPU model or MIG profile (:func:`plan`), with the memory arithmetic (:meth:`DeploymentPlan.arithmetic`)
and the fits / does-not-fit verdict as findings (:func:`gpulib.vllm.findings.deployment_findings`; CRITICAL, or
:class:`DoesNotFit` with ``strict=True``, when nothing fits). The manifests for a plan are
:mod:`gpulib.vllm.manifest`, the live check of a running deployment :mod:`gpulib.vllm.live`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

import gpulib.vllm.memory as vllm
from gpulib.core.errors import DoesNotFit, InvalidParameter
from gpulib.core.findings import Finding
from gpulib.core.knowledge import settings
from gpulib.vllm.findings import deployment_findings

__all__ = ["KV_DTYPES", "DeploymentPlan", "plan", "setting"]

KV_DTYPES = ("auto", "fp8")


def setting(key: str) -> str:
    """A value of ``gpulib/data/vllm/vllm_deploy.csv`` as written there (:func:`gpulib.core.knowledge.settings`)."""
    return settings("vllm_deploy").text(key)


# --------------------------------------------------------------------------------------------
# sizing
# --------------------------------------------------------------------------------------------
@dataclass
class DeploymentPlan:
    """A sized vLLM deployment: the flags, the memory budget behind them, and the verdict."""

    model: vllm.ModelSpec
    device: str
    gpus: int
    tp: int
    gpu_memory_utilization: float
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_dtype: str
    dtype: str
    concurrency: int
    latency_p99_s: float | None
    budget: vllm.MemoryBudget
    fits: bool
    tried: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def mig_resource(self) -> str | None:
        return f"nvidia.com/mig-{self.device.split('/', 1)[1]}" if "/" in self.device else None

    def vllm_args(self) -> list[str]:
        """``vllm serve`` arguments (also the container args of the Deployment)."""
        args = [
            "--model",
            self.model.hf_id or self.model.name,
            "--tensor-parallel-size",
            str(self.tp),
            "--gpu-memory-utilization",
            f"{self.gpu_memory_utilization:g}",
            "--max-model-len",
            str(self.max_model_len),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--max-num-batched-tokens",
            str(self.max_num_batched_tokens),
            "--dtype",
            self.dtype,
        ]
        if self.kv_cache_dtype != "auto":
            args += ["--kv-cache-dtype", self.kv_cache_dtype]
        return args

    def tgi_args(self, *, max_output_tokens: int | None = None) -> list[str]:
        """Equivalent text-generation-launcher flags (``tgi_flags.csv``): same GPUs, context and memory share."""
        out_budget = max_output_tokens if max_output_tokens is not None else max(1, self.max_model_len // 4)
        if not 0 < out_budget < self.max_model_len:
            raise InvalidParameter(f"max_output_tokens {out_budget} must be within 1..{self.max_model_len - 1}")
        args = [
            "--model-id",
            self.model.hf_id or self.model.name,
            "--num-shard",
            str(self.tp),
            "--max-total-tokens",
            str(self.max_model_len),
            "--max-input-tokens",
            str(self.max_model_len - out_budget),
            "--max-batch-prefill-tokens",
            str(max(self.max_num_batched_tokens, self.max_model_len - out_budget)),
            "--max-concurrent-requests",
            str(self.max_num_seqs),
            "--cuda-memory-fraction",
            f"{self.gpu_memory_utilization:g}",
        ]
        if self.kv_cache_dtype.startswith("fp8"):
            args += ["--kv-cache-dtype", "fp8_e4m3fn"]
        return args

    def arithmetic(self) -> pd.DataFrame:
        """The memory arithmetic, per GPU, the way vLLM accounts it (vllm-project/vllm: vllm/v1/worker/gpu_worker.py determine_available_memory @ 002f10e0)."""
        b = self.budget
        m = self.model
        rows = [
            ("GPU memory", b.total_gib, "GiB", f"{self.device}"),
            (
                "requested by vLLM",
                b.requested_gib,
                "GiB",
                f"gpu_memory_utilization {b.gpu_memory_utilization:g} x total",
            ),
            (
                "weights",
                b.weights_gib,
                "GiB",
                f"{m.params_b:g} B params x {vllm.dtype_bytes(self.dtype):g} B / TP {b.tp}",
            ),
            (
                "activations (profiled peak, estimate)",
                b.activation_gib,
                "GiB",
                f"{b.max_num_batched_tokens} batched tokens, {b.max_num_seqs} seqs",
            ),
            ("non-torch (CUDA ctx, NCCL; estimate)", b.non_torch_gib, "GiB", "model_memory_overheads.csv"),
            ("KV cache", b.kv_gib, "GiB", "requested - weights - activations - non-torch"),
            (
                "KV bytes per token per GPU",
                b.kv_bytes_per_token,
                "B",
                f"2 x {m.layers} layers x {max(1, m.kv_heads // b.tp)} KV heads x {m.head_dim} x "
                f"{vllm.dtype_bytes(self.kv_cache_dtype):g} B",
            ),
            (
                "tokens that fit",
                b.kv_tokens,
                "tokens",
                f"KV cache / bytes per token, in blocks of {int(vllm.overhead('block_size'))}",
            ),
            (
                f"concurrency at {b.max_model_len} tokens",
                b.max_concurrency,
                "requests",
                "tokens that fit / max_model_len",
            ),
        ]
        df = pd.DataFrame(rows, columns=["quantity", "value", "unit", "how"])
        df["value"] = [round(float(v), 3) for v in df["value"]]
        return df


def _check_device(device: str) -> tuple[str, bool]:
    d = str(device).strip()
    try:
        vllm.device_memory_gib(d)
    except Exception as exc:
        raise InvalidParameter(
            f"device={device!r}: {exc}",
            hint="a GPU model (H100-80GB, A100-40GB, H200) or GPU/MIG profile (A100-40GB/3g.20gb)",
        ) from exc
    return d, "/" in d


def plan(
    model: str | vllm.ModelSpec,
    device: str,
    *,
    gpus: int = 1,
    context_len: int | None = None,
    concurrency: int = 8,
    latency_p99_s: float | None = None,
    tp: int | None = None,
    kv_cache_dtype: str = "auto",
    dtype: str = "bfloat16",
    gpu_memory_utilization: float | None = None,
    strict: bool = False,
) -> DeploymentPlan:
    """Size a vLLM deployment of ``model`` on up to ``gpus`` x ``device`` for ``concurrency`` requests at
    ``context_len`` tokens (default: the model's context).

    Tries tensor-parallel sizes 1, 2, 4, 8 (dividing the attention heads, <= ``gpus``) or the given ``tp``; with
    ``kv_cache_dtype="auto"`` it falls back to an FP8 KV cache before giving up. ``max_num_seqs`` is set to the
    full-length requests the KV cache holds (capped at vLLM's default), so no request is preempted at full
    context. The plan's ``findings`` say fits / does not fit with the arithmetic as evidence.
    """
    m = vllm.get_model(model)
    device, is_mig = _check_device(device)
    gpus = int(gpus)
    if gpus < 1:
        raise InvalidParameter(f"gpus={gpus}: need at least one GPU")
    if is_mig and gpus != 1:
        raise InvalidParameter(
            f"gpus={gpus} with MIG profile {device}: MIG instances have no NCCL/P2P between "
            "them, so vLLM runs on one instance (gpus=1)"
        )
    ctx = m.max_context if context_len is None else int(context_len)
    if ctx > m.max_context:
        raise InvalidParameter(
            f"context_len {ctx:,} is longer than {m.name} supports ({m.max_context:,} tokens, max_position_embeddings)",
            hint="lower context_len or pick a long-context variant (e.g. Llama-3.1 has 131,072)",
        )
    if ctx < 1 or int(concurrency) < 1:
        raise InvalidParameter(f"context_len ({ctx}) and concurrency ({concurrency}) must be >= 1")
    if kv_cache_dtype not in KV_DTYPES:
        raise InvalidParameter(f"kv_cache_dtype={kv_cache_dtype!r}; use one of {', '.join(KV_DTYPES)}")
    if tp is not None:
        if int(tp) > gpus:
            raise InvalidParameter(
                f"tensor_parallel_size {tp} is larger than the {gpus} GPU(s) available",
                hint="raise gpus (GPUs per node) or lower tp",
            )
        candidates = [int(tp)]
    else:
        candidates = [t for t in vllm.TP_SIZES if t <= gpus and m.attn_heads % t == 0]
    kv_options = [kv_cache_dtype] if kv_cache_dtype != "auto" else ["auto", "fp8"]
    tried: list[str] = []
    best = None
    for kv in kv_options:
        for t in candidates:
            b = vllm.budget(
                m,
                device,
                tp=t,
                max_model_len=ctx,
                kv_cache_dtype=kv,
                dtype=dtype,
                gpu_memory_utilization=gpu_memory_utilization,
            )
            tried.append(f"TP={t}, KV {kv}: {b.kv_tokens:,} KV tokens = {b.max_concurrency:.2f}x at {ctx:,} tokens")
            best = (t, kv, b)
            if b.fits and b.max_concurrency >= concurrency:
                return _finish(m, device, gpus, t, kv, dtype, ctx, int(concurrency), latency_p99_s, b, tried, True)
    t, kv, b = best
    p = _finish(m, device, gpus, t, kv, dtype, ctx, int(concurrency), latency_p99_s, b, tried, False)
    if strict:
        raise DoesNotFit(p.findings[0].title + ": " + p.findings[0].summary)
    return p


def _finish(m, device, gpus, tp, kv, dtype, ctx, concurrency, latency, b, tried, fits) -> DeploymentPlan:
    default_seqs, tokens = vllm.default_batch(device, b.total_gib)
    seqs = max(1, min(default_seqs, b.kv_tokens // ctx)) if fits else b.max_num_seqs
    if fits and seqs != b.max_num_seqs:  # the profiled activations depend on max_num_seqs: recompute
        b = vllm.budget(
            m,
            device,
            tp=tp,
            max_model_len=ctx,
            kv_cache_dtype=kv,
            dtype=dtype,
            gpu_memory_utilization=b.gpu_memory_utilization,
            max_num_seqs=seqs,
        )
    p = DeploymentPlan(
        m,
        device,
        gpus,
        tp,
        b.gpu_memory_utilization,
        ctx,
        seqs,
        b.max_num_batched_tokens,
        kv,
        dtype,
        concurrency,
        latency,
        b,
        fits,
        tried,
    )
    p.findings = deployment_findings(p)
    return p
