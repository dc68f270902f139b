"""Fleet domain: per-GPU health, idle/zombie and scheduling checks, their findings, charts and the fleet_overview
steps."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "GPU_KEYS": "health",
    "HARD_EFFECTS": "scheduling",
    "HEALTH_FIELDS": "health",
    "HealthFrames": "health",
    "NVLINK_MB_PER_GB": "health",
    "PRODUCT_LABEL": "scheduling",
    "activity": "health",
    "allocation_chart": "view",
    "check_scheduling": "scheduling",
    "health_findings": "findings",
    "health_frames": "health",
    "heatmap": "view",
    "idle_findings": "findings",
    "inventory": "health",
    "merge_findings": "merge",
    "non_gpu_pods_on_gpu_nodes": "scheduling",
    "pod_specs_from": "scheduling",
    "request_limit_problems": "scheduling",
    "split_across_sockets": "scheduling",
    "stale_telemetry": "findings",
    "temp_power_chart": "view",
    "tolerates": "scheduling",
    "unknown_product_affinity": "scheduling",
    "unrequested_gpu_use": "findings",
    "untainted_gpu_nodes": "scheduling",
    "untolerated_gpu_pods": "scheduling",
    "utilisation_matrix": "health",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
