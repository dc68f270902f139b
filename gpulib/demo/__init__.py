"""The demo fleet: the simulator and every demo-only artefact (node files, NCCL history, operator objects, vLLM series)."""
from __future__ import annotations

import importlib

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'DAY': 'scenario',
    'DEMO_NCCL_TESTS': 'artifacts',
    'DEMO_NVLINK_STATUS': 'artifacts',
    'DEMO_NCCL_SCENARIO': 'nccl_history',
    'DEMO_TOPOLOGY': 'artifacts',
    'DemoSource': 'source',
    'Device': 'scenario',
    'EXPORTER_JOB': 'metrics',
    'EXPORTER_PORT': 'metrics',
    'FleetMetrics': 'metrics',
    'FleetObjects': 'cluster_objects',
    'FleetSimulator': 'simulator',
    'METRICS': 'metrics',
    'MIG_SLICES': 'scenario',
    'OFF_BY_DEFAULT': 'metrics',
    'SCENARIOS': 'operator_objects',
    'TARGET_POINTS': 'source',
    'demo_file': 'artifacts',
    'demo_nccl_history': 'nccl_history',
    'demo_objects': 'operator_objects',
    'render_smi_query': 'artifacts',
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
