"""The demo fleet: the simulator and every demo-only artefact (node files, NCCL history, operator objects, vLLM
series)."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "DAY": "scenario",
    "DEMO_NCCL_TESTS": "captures",
    "DEMO_NVLINK_STATUS": "captures",
    "DEMO_NCCL_SCENARIO": "nccl_history",
    "DEMO_TOPOLOGY": "captures",
    "DemoSource": "source",
    "E2E_BUCKETS": "vllm_series",
    "Device": "scenario",
    "EXPORTER_JOB": "metrics",
    "EXPORTER_PORT": "metrics",
    "FleetMetrics": "metrics",
    "FleetObjects": "cluster_objects",
    "FleetSimulator": "simulator",
    "METRICS": "metrics",
    "MIG_SLICES": "scenario",
    "OFF_BY_DEFAULT": "metrics",
    "SCENARIOS": "operator_objects",
    "TARGET_POINTS": "source",
    "TTFT_BUCKETS": "vllm_series",
    "demo_file": "captures",
    "demo_nccl_history": "nccl_history",
    "demo_objects": "operator_objects",
    "demo_vllm_frame": "vllm_series",
    "demo_vllm_series": "vllm_series",
    "render_smi_query": "artifacts",
    "runbook_default_history": "nccl_history",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
