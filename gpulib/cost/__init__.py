"""Cost domain: usage frames, prices, idle/zombie costing, the savings plan, its findings and the utilization report
(steps, views)."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "ACTIONS": "model",
    "ACTIVITY_SCALE": "usage",
    "CostReport": "model",
    "DEVICE_KEYS": "usage",
    "FB_USED": "usage",
    "GPU_UTIL": "usage",
    "GR_ENGINE_ACTIVE": "usage",
    "IDLE_COLUMNS": "usage",
    "IDLE_STATES": "usage",
    "LEVELS": "usage",
    "PRICE_COLUMNS": "prices",
    "PRICINGS": "prices",
    "PriceFileError": "prices",
    "ReportData": "steps",
    "SERIES_KEYS": "usage",
    "Thresholds": "usage",
    "actions_html": "view",
    "analyze_cost": "analysis",
    "attach_workloads": "usage",
    "canonical_model": "prices",
    "canonical_models": "prices",
    "classify_idle": "usage",
    "cost_findings": "findings",
    "cost_policy": "prices",
    "cost_policy_list": "prices",
    "cost_report": "steps",
    "default_provider": "prices",
    "executive_summary": "analysis",
    "gpu_specs": "prices",
    "gpu_utilization": "analysis",
    "headline_html": "view",
    "heatmap_bucket": "steps",
    "heatmap_figure": "view",
    "idle_samples": "steps",
    "idle_table_html": "view",
    "idle_zombie_table": "analysis",
    "kpi_tiles_html": "view",
    "load_prices": "prices",
    "load_report_data": "steps",
    "method_html": "view",
    "method_section": "steps",
    "mig_compute_slices": "usage",
    "mig_share": "usage",
    "namespace_allocation": "analysis",
    "namespace_figure": "view",
    "node_inventory": "analysis",
    "node_time_matrix": "usage",
    "non_gpu_pods_on_gpu_nodes": "analysis",
    "normalise_activity": "usage",
    "parse_namespaces": "steps",
    "prepare_samples": "usage",
    "price_table": "prices",
    "report_policy": "prices",
    "rollup": "usage",
    "savings_actions": "analysis",
    "savings_waterfall": "analysis",
    "select_activity": "usage",
    "series_step": "steps",
    "series_usage": "usage",
    "serving_candidates": "steps",
    "top_actions_html": "view",
    "top_idle_workloads": "analysis",
    "verdict_sop": "action_findings",
    "waterfall_figure": "view",
    "window_hours": "usage",
    "workload_usage": "analysis",
    "zombie_runs": "usage",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
