"""NVIDIA node tools: NVML (pynvml), nvidia-smi (``-q``, table, ``dmon``) and ``dcgmi diag`` parsers. Importable with
numpy, pandas and nvidia-ml-py only."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "DIAG_COLUMNS": "dcgmi",
    "DMON_COLUMNS": "dmon",
    "Device": "nvml",
    "MIB": "nvml",
    "NA_TOKENS": "smi",
    "NVML": "nvml",
    "NVMLUnavailable": "nvml",
    "NvLinkState": "nvml",
    "PROBE_COLUMNS": "nvml",
    "QUERY_COLUMNS": "smi",
    "SmiTable": "smi",
    "TABLE_GPU_COLUMNS": "smi",
    "TABLE_PROCESS_COLUMNS": "smi",
    "Topology": "topology",
    "clock_event_table": "smi",
    "decode_clock_events": "smi",
    "gpu_id_map": "gpu_ids",
    "main": "nvml",
    "dmon_series": "dmon",
    "diag_summary": "dcgmi",
    "parse_dcgmi_diag": "dcgmi",
    "parse_dmon": "dmon",
    "parse_nvlink_status": "nvlink",
    "links_down": "nvlink",
    "parse_query": "smi",
    "parse_table": "smi",
    "parse_topology": "topology",
    "probe": "nvml",
    "probe_json": "nvml",
    "with_nvml_thresholds": "smi",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
