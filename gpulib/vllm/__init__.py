"""vLLM domain: the memory model, deployment plan, validated manifests and the live check from vllm: metrics."""
from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'DeploymentPlan': 'deploy',
    'DoesNotFit': 'deploy',
    'GIB': 'memory',
    'KV_DTYPES': 'deploy',
    'MemoryBudget': 'memory',
    'ModelSpec': 'memory',
    'TP_SIZES': 'memory',
    'UnknownModel': 'memory',
    'activation_gib': 'memory',
    'adapter_rules': 'deploy',
    'assess': 'deploy',
    'budget': 'memory',
    'choose_tp': 'memory',
    'dcgm_for_pods': 'deploy',
    'default_batch': 'memory',
    'device_memory_gib': 'memory',
    'dtype_bytes': 'memory',
    'get_model': 'memory',
    'gpu_memory_utilization_for': 'memory',
    'histogram_quantile': 'deploy',
    'kv_bytes_per_token': 'memory',
    'manifests': 'deploy',
    'max_fit': 'memory',
    'memory_chart': 'view',
    'memory_needed': 'memory',
    'models': 'memory',
    'overhead': 'memory',
    'plan': 'deploy',
    'setting': 'deploy',
    'serving_signals': 'serving',
    'SERVING_COLUMNS': 'serving',
    'OVERLOADED_VERDICTS': 'serving',
    'validate_manifests': 'deploy',
    'vllm_metrics': 'deploy',
    'waiting_chart': 'view',
    'waiting_requests': 'deploy',
    'weights_gib': 'memory',
    'workloads_from_models': 'mig_workloads',
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
