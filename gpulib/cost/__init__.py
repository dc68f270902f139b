"""Cost domain: usage frames, prices, idle/zombie costing, savings findings and the utilization report."""
from __future__ import annotations

import importlib

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'ACTIONS': 'findings',
    'ACTIVITY_SCALE': 'usage',
    'CostReport': 'analysis',
    'DEVICE_KEYS': 'usage',
    'FB_USED': 'usage',
    'GPU_UTIL': 'usage',
    'GR_ENGINE_ACTIVE': 'usage',
    'IDLE_COLUMNS': 'usage',
    'IDLE_STATES': 'usage',
    'LEVELS': 'usage',
    'PRICE_COLUMNS': 'prices',
    'PRICINGS': 'prices',
    'PriceFileError': 'prices',
    'ReportData': 'report',
    'SERIES_KEYS': 'usage',
    'Thresholds': 'usage',
    'analyze_cost': 'analysis',
    'attach_workloads': 'usage',
    'canonical_model': 'prices',
    'canonical_models': 'prices',
    'classify_idle': 'usage',
    'cost_findings': 'findings',
    'cost_policy': 'prices',
    'cost_policy_list': 'prices',
    'default_provider': 'prices',
    'executive_summary': 'analysis',
    'gpu_specs': 'prices',
    'gpu_utilization': 'analysis',
    'headline_html': 'report',
    'heatmap_bucket': 'report',
    'heatmap_figure': 'report',
    'idle_samples': 'report',
    'idle_table_html': 'report',
    'idle_zombie_table': 'report',
    'kpi_tiles_html': 'report',
    'load_prices': 'prices',
    'load_report_data': 'report',
    'method_html': 'report',
    'mig_compute_slices': 'usage',
    'mig_share': 'usage',
    'namespace_allocation': 'analysis',
    'namespace_figure': 'report',
    'node_inventory': 'analysis',
    'node_time_matrix': 'usage',
    'non_gpu_pods_on_gpu_nodes': 'analysis',
    'normalise_activity': 'usage',
    'parse_namespaces': 'report',
    'prepare_samples': 'usage',
    'price_table': 'prices',
    'report_policy': 'report',
    'rollup': 'usage',
    'savings_actions': 'analysis',
    'savings_waterfall': 'analysis',
    'select_activity': 'usage',
    'series_step': 'report',
    'series_usage': 'usage',
    'top_actions_html': 'report',
    'top_idle_workloads': 'analysis',
    'waterfall_figure': 'report',
    'window_hours': 'usage',
    'workload_usage': 'analysis',
    'zombie_runs': 'usage',
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
