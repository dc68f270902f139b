"""The cost domain's data model: the result of one cost analysis (:class:`CostReport`) and the savings actions it
can propose (:data:`ACTIONS`). It imports none of the modules that build or read it: the analysis
(:mod:`gpulib.cost.analysis`) fills it, and the savings plan, the findings and the report's views read it without
importing the analysis, so no import cycle runs through them. The same split as prometheus client_python's
``metrics_core`` (plain metric families that collectors fill and the exposition reads,
https://github.com/prometheus/client_python/blob/master/prometheus_client/metrics_core.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from gpulib.core.findings import Finding
from gpulib.cost.usage import Thresholds

__all__ = ["ACTIONS", "CostReport"]

#: action -> (label for charts, verb for the SOP step)
ACTIONS = {
    "reclaim": "Reclaim idle / zombie GPUs",
    "rightsize": "Right-size multi-GPU workloads",
    "spot": "Move batch work to spot (with checkpointing)",
    "consolidate": "Consolidate with MIG / time-slicing",
    "quantise": "Quantise inference models",
    "scale_down": "Remove never-allocated GPU nodes",
}


@dataclass
class CostReport:
    """Everything the report needs. Frames are tidy; money is in ``currency`` per window unless *monthly*."""

    window_hours: float
    activity_field: str
    currency: str
    provider: str
    month_factor: float
    thresholds: Thresholds
    prices: pd.DataFrame
    samples: pd.DataFrame
    usage: pd.DataFrame
    zombies: pd.DataFrame
    nodes: pd.DataFrame
    request_limit: pd.DataFrame
    non_gpu_pods: pd.DataFrame
    actions: pd.DataFrame
    findings: list[Finding] = field(default_factory=list)
    #: candidate actions left out of the plan, each with its reason (gpulib.cost.plan)
    skipped: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: per serving workload: the vLLM live-check verdict (gpulib.vllm.serving_signals), or None
    serving: pd.DataFrame | None = None
    #: the nodes / pods frames analysed (taints, requests: the hygiene findings read them)
    cluster_nodes: pd.DataFrame | None = None
    cluster_pods: pd.DataFrame | None = None
    #: the window's newest point and the series step (s) the totals were made at; None: read from ``samples``
    end: pd.Timestamp | None = None
    step_s: float | None = None

    def newest(self) -> pd.Timestamp:
        """The window's newest point (the end of the totals, else the newest sample, else now)."""
        if self.end is not None:
            return self.end
        return self.samples["timestamp"].max() if len(self.samples) else pd.Timestamp.now(tz="UTC")
