"""Tidy DataFrame schemas shared by every source backend (docs/architecture.md, "Sources").

Whatever the backend (demo, live Prometheus + Kubernetes, snapshot files), the analysis code
sees these columns and nothing else. Empty frames keep the columns, so analyses never KeyError.
"""

from __future__ import annotations

import pandas as pd

#: range series of one DCGM field: one row per (series, timestamp). ``gpu`` is the index as a
# : string ("0".."7"); ``pci_bus_id`` as dcgm-exporter writes it (joins kernel-log XIDs); MIG rows carry
# ``gpu_i_profile``/``gpu_i_id`` (else empty string).
SERIES_COLUMNS = [
    "timestamp",
    "node",
    "gpu",
    "uuid",
    "pci_bus_id",
    "model",
    "pod",
    "namespace",
    "container",
    "gpu_i_profile",
    "gpu_i_id",
    "value",
]

#: server-side summary per series over a window.
SUMMARY_COLUMNS = [
    "node",
    "gpu",
    "uuid",
    "pci_bus_id",
    "model",
    "pod",
    "namespace",
    "container",
    "gpu_i_profile",
    "gpu_i_id",
    "stat",
    "value",
]

#: a node's GPUs (:meth:`gpulib.sources.base.Source.gpus`): one row per physical GPU (``gpu_i_id`` empty) and one
#: per MIG instance (``gpu_i_id`` set, ``uuid`` = its parent GPU's UUID, ``mig_uuid`` the instance's own ``MIG-...``
#: UUID as ``nvidia-smi -L`` prints it, empty where the source cannot know it).
GPU_COLUMNS = ["node", "gpu", "uuid", "pci_bus_id", "model", "gpu_i_id", "gpu_i_profile", "mig_uuid"]

#: one row per Kubernetes node.
#: ``mig_capacity``/``mig_allocatable``: dict resource name (``nvidia.com/mig-1g.10gb``) -> int.
#: ``taints``: list of {"key","value","effect"}; ``labels``: dict.
NODE_COLUMNS = [
    "node",
    "gpu_product",
    "gpu_count",
    "gpu_memory_mib",
    "gpu_capacity",
    "gpu_allocatable",
    "mig_capacity",
    "mig_allocatable",
    "mig_strategy",
    "mig_config",
    "mig_config_state",
    "gpu_replicas",
    "sharing_strategy",
    "taints",
    "schedulable",
    "ready",
    "spot",
    "instance_type",
    "kernel",
    "os_image",
    "labels",
]

#: one row per pod. GPU/MIG figures are sums over the pod's containers (init containers excluded).
#: ``mig_requests``/``mig_limits``: dict resource -> int. ``owner_kind/owner_name``: top controller
#: (a ReplicaSet's Deployment is resolved from the name hash when possible), ``workload`` = owner_name or pod.
POD_COLUMNS = [
    "namespace",
    "pod",
    "node",
    "phase",
    "gpu_request",
    "gpu_limit",
    "mig_requests",
    "mig_limits",
    "owner_kind",
    "owner_name",
    "workload",
    "start_time",
    "tolerations",
    "node_selector",
    "labels",
    "containers",
]


def empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def conform(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Add missing columns (empty string / NaN) and order them; extra columns are kept at the end."""
    df = df.copy()
    for c in columns:
        if c not in df.columns:
            df[c] = "" if c not in ("value", "timestamp") else pd.NA
    rest = [c for c in df.columns if c not in columns]
    return df[columns + rest]


#: one row per event of a node's history (:meth:`gpulib.sources.base.Source.node_history`): ``time`` and, for what
#: lasts (a cordon, a NotReady spell, an exporter gap), ``end`` (NaT: still open at the window end), both UTC
#: ``Timestamp``; ``gpu`` the index as a string ("" for the node); ``signal`` one of :data:`HISTORY_SIGNALS`;
#: ``code`` what kind within the signal (the XID code, the condition type, the label name, the alert rule);
#: ``value`` a count or the new value; ``detail`` free text; ``origin`` where the source read it (the series or
#: file name), so the preflight and the evidence can say it.
HISTORY_COLUMNS = ["time", "end", "node", "gpu", "signal", "code", "value", "detail", "origin"]

#: the signals a node history carries, with what each row means
HISTORY_SIGNALS = {
    "xid": "an XID error (code = the XID)",
    "ecc_sbe": "correctable (single-bit) ECC errors, value = the increment",
    "ecc_dbe": "uncorrectable (double-bit) ECC errors, value = the increment",
    "remap_failure": "a row-remapping failure",
    "remapped_rows": "rows remapped, value = the increment",
    "thermal_violation": "time under thermal slowdown, value = seconds",
    "power_violation": "time under power capping, value = seconds",
    "clock_event": "a clock-event reason raised (code = the reason)",
    "nvlink_error": "NVLink CRC/replay/recovery errors, value = the increment",
    "pcie_replay": "PCIe replays, value = the increment",
    "condition": "a node condition in its bad state from time to end (code = the condition type)",
    "pod_device_health": "kubelet reports a pod's device Unhealthy/Unknown (code = the health; KEP-4680)",
    "cordon": "the node unschedulable from time to end",
    "taint": "a taint added (code = key:effect)",
    "pod_restart": "container restarts of a GPU pod, value = the increment",
    "oom_kill": "a container OOM-killed",
    "eviction": "a pod evicted",
    "remediation": "a gpuops remediation audit record (code = the action)",
    "serve_verdict": "a gpuops serve run for an alert (code = the alert rule, detail = the verdict's severity)",
    "nccl_probe": "an NCCL probe result (detail = pass/fail)",
    "diag": "a dcgmi diag result (detail = pass/fail)",
    "reset": "a GPU reset or node reboot (code = reset/reboot)",
    "gfd_label": "a GPU Feature Discovery label change (code = the label, detail = old -> new)",
    "driver_change": "the NVIDIA driver version changed (detail = old -> new)",
    "operator_change": "the GPU Operator version changed (detail = old -> new)",
    "no_data": "the node's exporter sent nothing from time to end: no data, not zero",
    "gpu_health": "DCGM health WARN/FAIL from time to end (code = the health watch, value = the result)",
    "fabric_health": "the GPU fabric unhealthy or at limited capacity from time to end (code = the state)",
    "agent_condition": "another agent's GPU condition in its bad state or its Event (code = agent/type, detail = "
    "'flagged by <agent> at <time>, <type>, <action>' and a known false positive's reason)",
}
