"""NVIDIA's WORKFLOW_XID_13 as NVSentinel implements it: count the XID 13 occurrences of one GPU and read the GPC/TPC
each Xid line names, then pick the workflow's branch.

NVIDIA/NVSentinel: docs/configuration/health-events-analyzer.md @ 184a613a ("XID 31 and XID 13 Rules") and the rules
of NVIDIA/NVSentinel: distros/kubernetes/nvsentinel/charts/health-events-analyzer/values.yaml @ 09dfc8f9:

* XID 13 lines less than ``xid13_burst_window_s`` apart are one burst (one occurrence);
* only the last ``xid13_repeat_window_h`` hours count;
* one burst: ``solo`` (XIDErrorSoloNoBurst: no action on the GPU, check the process);
* the same GPC and TPC in two or more bursts: ``same_unit`` (RepeatedXID13OnSameGPCAndTPC: the DCGM EUD, then field
  diagnostics if it passes); checked first, as the branch that suspects the GPU;
* two or more different GPC/TPC combinations: ``different_units`` (RepeatedXID13OnDifferentGPCAndTPC: the application);
* repeated, but the lines name no GPC/TPC to compare: ``repeated_unknown_unit``.

No branch takes the GPU out of service because the lines came from different processes: a restarted job always has a
new pid, and NVIDIA's rule for different units says "check error PID to identify source of the problem" (the
``message`` of RepeatedXID13OnDifferentGPCAndTPC, values.yaml above), so the evidence names each pid the lines carry
(:func:`pid_evidence`).

The GPC/TPC/SM come from ``... on (GPC 1, TPC 3, SM 0): ...`` (NVSentinel's parser test, NVIDIA/NVSentinel:
health-monitors/syslog-health-monitor/pkg/xid/parser/csv_test.go @ 3e97fd00). Thresholds live in
``gpulib/data/xid/alert_settings.csv``; the SOP text of each branch in ``xid_sop.csv`` (``WORKFLOW_XID_13_<BRANCH>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from gpulib.core.knowledge import settings

_LOCATION = re.compile(r"\(GPC\s+(\d+),\s*TPC\s+(\d+),\s*SM\s+(\d+)\)")

#: branch -> SOP row key of xid_sop.csv
SOP_KEYS = {
    "solo": "WORKFLOW_XID_13_SOLO",
    "same_unit": "WORKFLOW_XID_13_SAME_UNIT",
    "different_units": "WORKFLOW_XID_13_DIFFERENT_UNITS",
    "repeated_unknown_unit": "WORKFLOW_XID_13_REPEATED_UNKNOWN_UNIT",
    "none": "WORKFLOW_XID_13",
}


def location(message: object) -> tuple[int, int, int] | None:
    """``(GPC, TPC, SM)`` named by an XID 13 message, or None."""
    m = _LOCATION.search(message) if isinstance(message, str) else None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


@dataclass
class Workflow:
    """The branch (``key``), its SOP row and what the events showed."""

    key: str
    bursts: int = 0
    units: dict[tuple[int, int], int] = field(default_factory=dict)  # (GPC, TPC) -> bursts naming it
    evidence: list[str] = field(default_factory=list)

    @property
    def sop_key(self) -> str:
        return SOP_KEYS[self.key]


def pid_evidence(code: int, ev: pd.DataFrame) -> list[str]:
    """One line naming the processes (pid and name) the Xid lines of ``code`` carry, first seen first; none
    without a pid."""
    if "pid" not in ev.columns:
        return []
    seen: dict[int, str] = {}
    for pid, name in zip(ev["pid"], ev["process"] if "process" in ev.columns else [None] * len(ev)):
        if pid is not None and not pd.isna(pid) and int(pid) not in seen:
            seen[int(pid)] = name if isinstance(name, str) and name else "?"
    if not seen:
        return []
    named = ", ".join(f"pid {p} ({n})" for p, n in seen.items())
    return [f"XID {code} came from {named}: check these processes (a restarted job has a new pid)"]


def _seconds(ev: pd.DataFrame) -> pd.Series | None:
    """Seconds on one clock: UTC timestamps where every event has one, else uptime seconds, else None."""
    if "timestamp" in ev.columns:
        ts = pd.to_datetime(ev["timestamp"], utc=True, errors="coerce")
        if ts.notna().all():
            return (ts - ts.min()).dt.total_seconds()
    if "uptime_s" in ev.columns:
        up = pd.to_numeric(ev["uptime_s"], errors="coerce")
        if up.notna().all():
            return up.astype(float)
    return None


def bursts(ev: pd.DataFrame, burst_s: float, window_s: float) -> tuple[list[int], list[int]]:
    """The rows of ``ev`` (positions) within ``window_s`` of the latest, oldest first, and the burst of each (0, 1,
    ...): a row more than ``burst_s`` after the one before starts a new burst. Without a clock on every row each
    row is its own burst, in log order. ``ev`` must have at least one row."""
    secs = _seconds(ev)
    if secs is None:
        order, t = list(range(len(ev))), [float(i) * (burst_s + 1) for i in range(len(ev))]
    else:
        order = sorted(range(len(ev)), key=lambda i: secs.iloc[i])
        t = [float(secs.iloc[i]) for i in order]
        keep = [k for k, x in enumerate(t) if t[-1] - x <= window_s]
        order, t = [order[k] for k in keep], [t[k] for k in keep]
    burst_of, b = [], 0
    for k, x in enumerate(t):
        if k and x - t[k - 1] > burst_s:
            b += 1
        burst_of.append(b)
    return order, burst_of


def workflow(events: pd.DataFrame | None) -> Workflow:
    """The WORKFLOW_XID_13 branch for one GPU's events (any codes; only XID 13 rows are read)."""
    if events is None or len(events) == 0 or "xid" not in events.columns:
        return Workflow("none")
    ev = events[pd.to_numeric(events["xid"], errors="coerce") == 13]
    if not len(ev):
        return Workflow("none")
    s = settings("alert_settings")
    burst_s, window_s = float(s["xid13_burst_window_s"]), float(s["xid13_repeat_window_h"]) * 3600.0
    need = int(s["xid13_repeat_min_bursts"])
    msgs = ev["message"].tolist() if "message" in ev.columns else [None] * len(ev)
    order, burst_of = bursts(ev, burst_s, window_s)
    n_bursts = burst_of[-1] + 1
    unit_bursts: dict[tuple[int, int], set[int]] = {}
    for k, i in enumerate(order):
        loc = location(msgs[i])
        if loc:
            unit_bursts.setdefault(loc[:2], set()).add(burst_of[k])
    units = {u: len(bs) for u, bs in unit_bursts.items()}
    named = (
        ", ".join(f"GPC {g}, TPC {p} in {n} burst{'s' if n != 1 else ''}" for (g, p), n in sorted(units.items()))
        or "no GPC/TPC in the Xid lines"
    )
    evidence = [
        f"XID 13: {len(order)} line(s) in {n_bursts} burst(s) (lines less than {burst_s:g} s apart are one burst) "
        f"in the last {window_s / 3600:g} h; {named}"
    ] + pid_evidence(13, ev)
    if n_bursts == 1:
        key = "solo"
    elif any(n >= need for n in units.values()):
        key = "same_unit"
    elif len(units) >= need:
        key = "different_units"
    else:
        key = "repeated_unknown_unit"
    return Workflow(key, n_bursts, units, evidence)
