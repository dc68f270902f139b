"""XID/ECC domain: NVIDIA's XID catalog, kernel-log parsing, triage, alert rules and the xid_ecc_triage steps."""
from __future__ import annotations

import importlib

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'APP_BUCKETS': 'triage',
    'BUCKET_PRIORITY': 'triage',
    'CATEGORIES': 'catalog',
    'DBE_VOL': 'triage',
    'DEBUG_IMAGE': 'runbook',
    'DRAIN_BUCKETS': 'triage',
    'EVENT_COLUMNS': 'kernel_log',
    'GENERATED_HEADER': 'alerts',
    'GPU_TEMP': 'triage',
    'MEANING_COLUMNS': 'runbook',
    'POD_IMPACT_COLUMNS': 'sops',
    'REMAP_FAILURE': 'triage',
    'REMAP_PENDING': 'triage',
    'RETIRED_PENDING': 'triage',
    'SBE_VOL': 'triage',
    'SERIES_FIELDS': 'runbook',
    'SUMMARY_STATS': 'runbook',
    'SYMPATHETIC_BUCKETS': 'triage',
    'TriageInputs': 'runbook',
    'UNC_REMAP': 'triage',
    'XID_COUNT': 'triage',
    'XID_GAUGE': 'triage',
    'XidRecord': 'catalog',
    'alert_rules': 'alerts',
    'alert_rules_yaml': 'alerts',
    'alert_routes': 'alerts',
    'alert_specs': 'alerts',
    'alert_generated_files': 'alerts',
    'prometheus_rule': 'alerts',
    'annotate': 'catalog',
    'collect': 'runbook',
    'collect_command': 'runbook',
    'counter_increase': 'triage',
    'critical_xids': 'alerts',
    'diag_findings': 'diag',
    'findings': 'runbook',
    'for_gpu': 'runbook',
    'gpu_map': 'runbook',
    'impact': 'runbook',
    'iter_kernel_log': 'kernel_log',
    'kernel_log_command': 'runbook',
    'lookup': 'catalog',
    'meaning_table': 'runbook',
    'memory_chart': 'runbook',
    'memory_summary': 'runbook',
    'node_gpu_ids': 'triage',
    'parse_kernel_log': 'kernel_log',
    'parse_line': 'kernel_log',
    'pod_impact': 'sops',
    'recovery_actions': 'catalog',
    'remediation_plan': 'runbook',
    'smi_query_commands': 'runbook',
    'sop': 'sops',
    'takes_gpu_out': 'runbook',
    'diag_test_class': 'diag',
    'thermal_chart': 'runbook',
    'timeline_chart': 'runbook',
    'triage_node': 'triage',
    'validate': 'runbook',
    'write_alert_rules': 'alerts',
    'xid_events_from_gauge': 'triage',
    'xid_timeline': 'runbook',
    'xid_catalog': 'catalog',
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
