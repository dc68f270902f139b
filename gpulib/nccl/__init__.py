"""NCCL domain: nccl-tests results, NCCL logs, expected bands, environment checks, the probe, its Job and history."""
from __future__ import annotations

import importlib

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'Band': 'bands',
    'COLLECTIVES': 'results',
    'DEFAULT_ROOT': 'history',
    'HISTORY_COLUMNS': 'history',
    'LogSummary': 'log',
    'NVLINK_FIELD': 'runbook',
    'NcclTestResult': 'results',
    'PROBE_VERSION': 'probe',
    'ProbeError': 'launcher',
    'SINGLE_RANK_NOTE': 'probe',
    'SUPPORTED': 'probe',
    'Shape': 'probe',
    'TABLE_COLUMNS': 'results',
    'Verdict': 'bands',
    'algbw_gbs': 'probe',
    'append': 'history',
    'apply_commands': 'job',
    'avg_busbw': 'probe',
    'build_parser': 'probe',
    'bus_factor': 'results',
    'busbw_chart': 'runbook',
    'busbw_from_algbw': 'results',
    'busbw_gbs': 'probe',
    'capture_hosts': 'runbook',
    'check_busbw': 'results',
    'check_environment': 'env',
    'check_pod_spec': 'env',
    'check_pytorchjob': 'job',
    'collect_environment': 'env',
    'default_path': 'history',
    'defaults': 'job',
    'diagnose_log': 'log',
    'environment_findings': 'runbook',
    'expected_busbw': 'bands',
    'force_nvls_off': 'probe',
    'format_header': 'probe',
    'format_result': 'probe',
    'format_row': 'probe',
    'format_time': 'probe',
    'gpu_family': 'bands',
    'group_label': 'history',
    'history_chart': 'history',
    'history_findings': 'history',
    'infer_nranks': 'results',
    'job_manifest': 'job',
    'load': 'history',
    'load_cluster': 'history',
    'main': 'probe',
    'model_kwargs': 'runbook',
    'nvlink_chart': 'runbook',
    'nvlink_findings': 'runbook',
    'nvlink_rates': 'runbook',
    'nvlink_series': 'runbook',
    'parse_args': 'probe',
    'parse_expected': 'runbook',
    'parse_nccl_tests': 'results',
    'parse_nccl_tests_all': 'results',
    'parse_size': 'probe',
    'pod_findings': 'job',
    'pod_templates': 'job',
    'probe_manifest': 'job',
    'pytorchjob_manifest': 'job',
    'read_input': 'runbook',
    'rows_from_run': 'history',
    'run_probe': 'launcher',
    'run_sweep': 'probe',
    'runbook_history': 'runbook',
    'runbook_probe_manifest': 'runbook',
    'shape_for': 'probe',
    'size_sweep': 'probe',
    'summarize_log': 'log',
    'to_yaml': 'job',
    'topology_chart': 'runbook',
    'validate': 'job',
    'verdict': 'bands',
    'verdict_table': 'runbook',
    'verdicts': 'runbook',
    'write_manifest': 'job',
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
