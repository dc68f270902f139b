"""NVIDIA's WORKFLOW_XID_31 (MMU fault) as NVSentinel implements it: count the XID 31 occurrences of one GPU.

NVIDIA/NVSentinel: docs/configuration/health-events-analyzer.md @184a613a ("XID 31 and XID 13 Rules") and the rules
of NVIDIA/NVSentinel: distros/kubernetes/nvsentinel/charts/health-events-analyzer/values.yaml @09dfc8f9:

* XID 31 lines less than ``xid31_burst_window_s`` (3 min) apart are one burst (one occurrence);
* only the last ``xid31_repeat_window_h`` hours count;
* ``xid31_repeat_min_bursts`` bursts or more on this GPU: ``same_gpu`` (RepeatedXID31OnSameGPU: RUN_DCGMEUD, "if
  DCGM EUD tests pass, run field diagnostics");
* else ``solo`` (XIDErrorSoloNoBurst, and RepeatedXID31OnDifferentGPU when other GPUs logged it too: NONE, "App passing
  bad data or using incorrect GPU methods; check error PID").

The pids do not count: a restarted job has a new pid. Thresholds live in ``gpulib/data/xid/alert_settings.csv``; the
SOP text of each branch in ``xid_sop.csv`` (``WORKFLOW_XID_31_<BRANCH>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from gpulib.core.knowledge import settings
from gpulib.xid.xid13 import bursts, pid_evidence

#: branch -> SOP row key of xid_sop.csv
SOP_KEYS = {"solo": "WORKFLOW_XID_31_SOLO", "same_gpu": "WORKFLOW_XID_31_SAME_GPU", "none": "WORKFLOW_XID_31"}


@dataclass
class Workflow31:
    """The branch (``key``), its SOP row and what the events showed."""

    key: str
    bursts: int = 0
    evidence: list[str] = field(default_factory=list)

    @property
    def sop_key(self) -> str:
        return SOP_KEYS[self.key]


def workflow(events: pd.DataFrame | None) -> Workflow31:
    """The WORKFLOW_XID_31 branch for one GPU's events (any codes; only XID 31 rows are read)."""
    if events is None or len(events) == 0 or "xid" not in events.columns:
        return Workflow31("none")
    ev = events[pd.to_numeric(events["xid"], errors="coerce") == 31]
    if not len(ev):
        return Workflow31("none")
    s = settings("alert_settings")
    burst_s, window_s = float(s["xid31_burst_window_s"]), float(s["xid31_repeat_window_h"]) * 3600.0
    order, burst_of = bursts(ev, burst_s, window_s)
    n = burst_of[-1] + 1
    evidence = [
        f"XID 31: {len(order)} line(s) in {n} burst(s) on this GPU (lines less than {burst_s:g} s apart are one "
        f"burst) in the last {window_s / 3600:g} h"
    ] + pid_evidence(31, ev.iloc[order])
    return Workflow31("same_gpu" if n >= int(s["xid31_repeat_min_bursts"]) else "solo", n, evidence)
