"""Core: errors, findings, schema, time, knowledge tables and identifier normalisation. Imports nothing else of gpulib."""
from __future__ import annotations

from gpulib.core.errors import EmptyResult, GpulibError, InvalidParameter, InvalidQuery, InvalidWindow, KubeconfigMissing, KubernetesError, PrometheusError, PrometheusHTTPError, PrometheusTimeout, PrometheusUnreachable, SnapshotError, SourceError, UnknownGPU, UnknownNode, UnknownSetting  # noqa: F401
from gpulib.core.findings import FINDINGS_SCHEMA_VERSION, Finding, FindingList, Severity, load_findings, save_findings, sort_findings, top_finding, worst_severity  # noqa: F401
from gpulib.core.ids import normalise_pci_bus_id  # noqa: F401
from gpulib.core.knowledge import Settings, data_path, load_table, settings, threshold  # noqa: F401
from gpulib.core.money import money  # noqa: F401
from gpulib.core.rundir import new_run_dir  # noqa: F401
from gpulib.core.schema import NODE_COLUMNS, POD_COLUMNS, SERIES_COLUMNS, SUMMARY_COLUMNS, conform, empty  # noqa: F401
from gpulib.core.timeutil import format_duration, parse_window, to_utc, utcnow  # noqa: F401
from gpulib.core.validate import GpuRef, command, gpu_ref, label_name, namespace, node_name, object_name, one_of, promql_regex_literal, promql_string, shell_quote  # noqa: F401

__all__ = ['EmptyResult', 'FINDINGS_SCHEMA_VERSION', 'Finding', 'FindingList', 'GpuRef', 'GpulibError', 'InvalidParameter', 'InvalidQuery', 'InvalidWindow', 'KubeconfigMissing', 'KubernetesError', 'NODE_COLUMNS', 'POD_COLUMNS', 'PrometheusError', 'PrometheusHTTPError', 'PrometheusTimeout', 'PrometheusUnreachable', 'SERIES_COLUMNS', 'SUMMARY_COLUMNS', 'Settings', 'Severity', 'SnapshotError', 'SourceError', 'UnknownGPU', 'UnknownNode', 'UnknownSetting', 'command', 'conform', 'data_path', 'empty', 'format_duration', 'gpu_ref', 'label_name', 'load_findings', 'load_table', 'money', 'namespace', 'new_run_dir', 'node_name', 'normalise_pci_bus_id', 'object_name', 'one_of', 'parse_window', 'promql_regex_literal', 'promql_string', 'save_findings', 'settings', 'shell_quote', 'sort_findings', 'threshold', 'to_utc', 'top_finding', 'utcnow', 'worst_severity']
