"""MIG planner workloads for catalog LLMs served by vLLM: the memory of each replica from the vLLM memory model
(:func:`gpulib.vllm.memory.memory_needed`), as :class:`gpulib.mig.plan.Workload` objects for
:func:`gpulib.mig.plan.plan_layout`. Here, not in ``gpulib.mig``, so the MIG domain does not import vLLM's
(vLLM's memory model reads the MIG catalog for the memory of a MIG instance)."""

from __future__ import annotations

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.mig import Workload
from gpulib.vllm.memory import get_model, memory_needed


def workloads_from_models(
    models: list[str] | str,
    *,
    max_model_len: int,
    concurrency: int,
    replicas: int = 1,
    dtype: str = "bfloat16",
    kv_cache_dtype: str = "auto",
) -> tuple[list[Workload], pd.DataFrame]:
    """Planner workloads for catalog LLMs served by vLLM (``"Qwen2.5-7B,Llama-3.1-8B"`` or a list): memory per
    replica from :func:`gpulib.vllm.memory.memory_needed` (weights + KV for ``concurrency`` requests of
    ``max_model_len`` tokens + activations + runtime). Returns the workloads and a table of the numbers."""
    names = [m.strip() for m in (models.split(",") if isinstance(models, str) else models) if str(m).strip()]
    if not names:
        raise InvalidParameter("models is empty: give catalog model names such as 'Qwen2.5-7B,Llama-3.1-8B'")
    if int(max_model_len) < 1 or int(concurrency) < 1 or int(replicas) < 1:
        raise InvalidParameter(
            f"max_model_len, concurrency and replicas must be >= 1 (got {max_model_len}, {concurrency}, {replicas})"
        )
    ws, rows = [], []
    for n in names:
        spec = get_model(n)
        need = memory_needed(
            spec,
            max_model_len=int(max_model_len),
            concurrency=int(concurrency),
            dtype=dtype,
            kv_cache_dtype=kv_cache_dtype,
        )
        ws.append(Workload(spec.name, need, replicas=int(replicas)))
        rows.append(
            {
                "model": spec.name,
                "params_b": spec.params_b,
                "dtype": dtype,
                "max_model_len": int(max_model_len),
                "concurrency": int(concurrency),
                "memory_gib": need,
                "replicas": int(replicas),
            }
        )
    return ws, pd.DataFrame(rows)
