"""vLLM domain: the memory model, deployment sizing, validated manifests, the live check from vllm: metrics, their
findings, views and the vllm_deploy steps."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "DeploymentPlan": "sizing",
    "DoesNotFit": "sizing",
    "GIB": "memory",
    "KV_DTYPES": "sizing",
    "MemoryBudget": "memory",
    "ModelSpec": "memory",
    "TP_SIZES": "memory",
    "UnknownModel": "memory",
    "activation_gib": "memory",
    "adapter_rules": "manifest",
    "assess": "findings",
    "budget": "memory",
    "budget_findings": "findings",
    "choose_tp": "memory",
    "dcgm_for_pods": "live",
    "default_batch": "memory",
    "device_memory_gib": "memory",
    "dtype_bytes": "memory",
    "get_model": "memory",
    "gpu_memory_utilization_for": "memory",
    "histogram_quantile": "live",
    "kv_bytes_per_token": "memory",
    "manifests": "manifest",
    "max_fit": "memory",
    "memory_chart": "view",
    "memory_needed": "memory",
    "models": "memory",
    "overhead": "memory",
    "plan": "sizing",
    "setting": "sizing",
    "serving_signals": "serving",
    "SERVING_COLUMNS": "serving",
    "OVERLOADED_VERDICTS": "serving",
    "validate_manifests": "manifest",
    "vllm_metrics": "live",
    "waiting_chart": "view",
    "waiting_requests": "live",
    "weights_gib": "memory",
    "workloads_from_models": "mig_workloads",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
