"""XID/ECC domain: NVIDIA's XID catalog, kernel-log parsing, triage rules and findings, alert rules, and the
xid_ecc_triage steps and views."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "APP_BUCKETS": "triage",
    "BUCKET_PRIORITY": "triage",
    "CATEGORIES": "catalog",
    "DBE_VOL": "triage",
    "DEBUG_IMAGE": "steps",
    "DRAIN_BUCKETS": "triage",
    "EVENT_COLUMNS": "kernel_log",
    "GENERATED_HEADER": "alerts",
    "GPU_TEMP": "triage",
    "MEANING_COLUMNS": "view",
    "POD_IMPACT_COLUMNS": "sops",
    "REMAP_FAILURE": "triage",
    "REMAP_PENDING": "triage",
    "RETIRED_PENDING": "triage",
    "SBE_VOL": "triage",
    "SERIES_FIELDS": "steps",
    "SUMMARY_STATS": "steps",
    "SYMPATHETIC_BUCKETS": "triage",
    "TriageInputs": "steps",
    "UNC_REMAP": "triage",
    "XID_COUNT": "triage",
    "XID_GAUGE": "triage",
    "XidRecord": "catalog",
    "alert_rules": "alerts",
    "alert_rules_yaml": "alerts",
    "rules_document": "alerts",
    "alert_routes": "alerts",
    "alert_specs": "alerts",
    "alert_generated_files": "alerts",
    "prometheus_rule": "alerts",
    "annotate": "catalog",
    "collect": "steps",
    "collect_command": "steps",
    "counter_increase": "triage",
    "critical_xids": "alerts",
    "diag_findings": "diag",
    "for_gpu": "steps",
    "gpu_map": "steps",
    "impact": "steps",
    "iter_kernel_log": "kernel_log",
    "kernel_log_command": "steps",
    "lookup": "catalog",
    "incident_class": "catalog",
    "hardware_classes": "catalog",
    "soft_classes": "catalog",
    "meaning_table": "view",
    "memory_chart": "view",
    "memory_summary": "view",
    "node_gpu_ids": "triage",
    "parse_kernel_log": "kernel_log",
    "kernel_log_history": "kernel_log",
    "parse_line": "kernel_log",
    "pod_impact": "sops",
    "recovery_actions": "catalog",
    "remediation_plan": "steps",
    "smi_query_commands": "steps",
    "sop": "sops",
    "state_severity": "triage",
    "takes_gpu_out": "steps",
    "diag_test_class": "diag",
    "thermal_chart": "view",
    "timeline_chart": "view",
    "triage_node": "findings",
    "validate": "steps",
    "write_alert_rules": "alerts",
    "xid_events_from_gauge": "triage",
    "xid_timeline": "steps",
    "xid_catalog": "catalog",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
