"""Onboarding and interview-prep lessons computed from the same data files and analyses as the runbooks."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "FINDINGS_ENV": "session",
    "GIB": "lessons",
    "SelfCheck": "lessons",
    "alert_catalog": "lessons",
    "alerts_file_status": "lessons",
    "at_or_above": "frames",
    "best_row": "frames",
    "blind_alerts": "frames",
    "connect": "lessons",
    "cost_checklist": "lessons",
    "cost_report": "lessons",
    "data_table": "lessons",
    "dcgm_fields_frame": "lessons",
    "deployments": "frames",
    "gpus_with_sbe": "frames",
    "hpa_manifest": "lessons",
    "lesson_text": "lessons",
    "load_times": "lessons",
    "md_table": "lessons",
    "mig_capable_models": "frames",
    "mig_fit_count": "lessons",
    "mig_node_count": "frames",
    "mig_nodes": "frames",
    "model_size": "frames",
    "model_sizes": "lessons",
    "money": "lessons",
    "optional_module": "lessons",
    "overcommitted_nodes": "frames",
    "pod_resources_outcome": "lessons",
    "pytorchjob_worker_spec": "lessons",
    "pytorchjob_yaml": "lessons",
    "question": "lessons",
    "runbook_ref": "lessons",
    "show_md": "lessons",
    "smi_section": "lessons",
    "storage_tiers": "lessons",
    "thresholds_frame": "lessons",
    "tier_row": "frames",
    "whole_gpus": "frames",
    "workload_pods": "frames",
    "xid_sop": "lessons",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
