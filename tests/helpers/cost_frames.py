"""Builders for small hand-made schema frames used by the cost tests (expected values worked out by hand)."""

from __future__ import annotations

import pandas as pd

from gpulib.core.schema import NODE_COLUMNS, POD_COLUMNS, SERIES_COLUMNS

T0 = pd.Timestamp("2026-01-05T00:00:00Z")
H100 = "NVIDIA H100 80GB HBM3"


def series(
    node: str,
    gpu: str,
    values: list[float],
    *,
    pod: str = "",
    ns: str = "",
    model: str = H100,
    profile: str = "",
    gi: str = "",
    step: str = "1h",
    start: pd.Timestamp = T0,
) -> pd.DataFrame:
    ts = [start + i * pd.Timedelta(step) for i in range(len(values))]
    return pd.DataFrame(
        {
            "timestamp": ts,
            "node": node,
            "gpu": gpu,
            "uuid": f"GPU-{node}-{gpu}",
            "pci_bus_id": "",
            "model": model,
            "pod": pod,
            "namespace": ns,
            "container": "main" if pod else "",
            "gpu_i_profile": profile,
            "gpu_i_id": gi,
            "value": values,
        }
    )[SERIES_COLUMNS]


def node(
    name: str,
    *,
    product: str = "NVIDIA-H100-80GB-HBM3",
    gpus: int = 1,
    mem_mib: int = 81920,
    spot: bool = False,
    replicas: int = 1,
    sharing: str = "none",
    mig_allocatable: dict | None = None,
) -> dict:
    row = dict(
        node=name,
        gpu_product=product,
        gpu_count=gpus,
        gpu_memory_mib=mem_mib,
        gpu_capacity=gpus,
        gpu_allocatable=gpus * replicas if not mig_allocatable else 0,
        mig_capacity=mig_allocatable or {},
        mig_allocatable=mig_allocatable or {},
        mig_strategy="mixed" if mig_allocatable else "none",
        mig_config="",
        mig_config_state="",
        gpu_replicas=replicas,
        sharing_strategy=sharing,
        taints=[],
        schedulable=True,
        ready=True,
        spot=spot,
        instance_type="",
        kernel="",
        os_image="",
        labels={},
    )
    return {c: row[c] for c in NODE_COLUMNS}


def pod(
    ns: str,
    name: str,
    node_name: str,
    *,
    kind: str = "Deployment",
    workload: str | None = None,
    req: float | None = 1,
    lim: float | None = 1,
    phase: str = "Running",
    mig_req: dict | None = None,
    mig_lim: dict | None = None,
) -> dict:
    row = dict(
        namespace=ns,
        pod=name,
        node=node_name,
        phase=phase,
        gpu_request=req,
        gpu_limit=lim,
        mig_requests=mig_req or {},
        mig_limits=mig_lim or {},
        owner_kind=kind,
        owner_name=workload or name,
        workload=workload or name,
        start_time=T0,
        tolerations=[],
        node_selector={},
        labels={},
        containers=[],
    )
    return {c: row[c] for c in POD_COLUMNS}


def frames(nodes: list[dict], pods: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.DataFrame(nodes, columns=NODE_COLUMNS), pd.DataFrame(pods, columns=POD_COLUMNS)
