"""One node's history on one time axis: its events by lane, the incidents among them, and how much of the window
had data (``gpulib/data/reliability/history_lanes.csv`` names each signal's lane and incident class).

An *incident* is a hardware-class event of one GPU (an XID whose immediate action in NVIDIA's catalog is not
IGNORE, RESTART_APP or CHECK_UVM: its class comes from that action, :func:`gpulib.xid.incident_class`; an
uncorrectable ECC error; a row-remap failure) or a node condition in its bad state; events of one GPU closer than
``incident_merge`` (``reliability_settings.csv``) are one incident (XID 48 then 64 a minute later is one fault),
hardware and non-hardware events apart. Each event carries the one severity every runbook gives its GPU state
(:func:`gpulib.xid.state_severity`; an incident: its worst event's). Exporter gaps (``no_data`` rows) are time
without data: they are taken out of every exposure, so a gap never reads as a quiet spell.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

from gpulib.core.knowledge import load_table, settings
from gpulib.core.timeutil import parse_window
from gpulib.xid import incident_class, soft_classes, state_severity


@lru_cache(maxsize=1)
def lanes() -> pd.DataFrame:
    """signal -> lane, order, incident class, whether the verdict needs it (``history_lanes.csv``)."""
    t = load_table("history_lanes").fillna("")
    return t.set_index("signal")


def xid_class(code) -> str:
    """The incident class of an XID from NVIDIA's immediate action for it (:func:`gpulib.xid.incident_class`)."""
    return incident_class(code)


def _severity(signal: str, code, sop_key: str) -> str:
    """The severity of the GPU state an event leaves (:func:`gpulib.xid.state_severity`), "" for other signals."""
    if signal == "xid":
        try:
            return state_severity(xid=int(str(code).strip())).value
        except ValueError:
            return ""
    return state_severity(rule=sop_key).value if sop_key else ""


def classify(events: pd.DataFrame) -> pd.DataFrame:
    """The events with ``lane``, ``incident_class`` (XIDs: from NVIDIA's immediate action; others: the lanes table)
    and ``state_severity``."""
    ev = events.copy()
    lt = lanes()
    ev["lane"] = ev["signal"].map(lt["lane"]).fillna("other")
    ev["lane_order"] = ev["signal"].map(lt["order"]).fillna(99).astype(int)
    ev["incident_class"] = ev["signal"].map(lt["incident_class"]).fillna("")
    xid = ev["signal"] == "xid"
    ev.loc[xid, "incident_class"] = [xid_class(c) for c in ev.loc[xid, "code"]]
    keys = ev["signal"].map(lt["sop_key"]).fillna("")
    ev["state_severity"] = [_severity(sg, c, k) for sg, c, k in zip(ev["signal"], ev["code"], keys)]
    return ev


def incidents(events: pd.DataFrame, classes: set[str]) -> pd.DataFrame:
    """One row per incident of the given classes: events of one (node, GPU) within ``incident_merge`` merged, the
    first event's time and the list of what happened (``what``)."""
    merge = pd.Timedelta(parse_window(settings("reliability_settings").text("incident_merge")))
    ev = events[events["incident_class"].isin(classes)].sort_values("time")
    rows = []
    ev = ev.assign(_hard=~ev["incident_class"].isin(soft_classes() | {""}))
    if "state_severity" not in ev.columns:
        ev["state_severity"] = ""
    rank = {"critical": 0, "warning": 1, "info": 2, "ok": 3, "": 4}
    cols = ["time", "signal", "code", "detail", "state_severity", "incident_class"]
    # the columns as plain lists, grouped by (node, GPU, hard) in order of first appearance as groupby(sort=False)
    # does (keys with a missing value left out, as groupby does): DataFrame.iterrows builds a Series per row and a
    # group per (node, GPU) costs a frame each (8,000 groups at 8,192 GPUs: 20 s)
    data = list(zip(*(ev[c].tolist() for c in cols)))
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(ev["node"].tolist(), ev["gpu"].tolist(), ev["_hard"].tolist())):
        if not any(pd.isna(k) for k in key):
            groups.setdefault(key, []).append(i)
    for (node, gpu, _hard), idx in groups.items():
        cur = None
        for t, signal, code, detail, severity, cls in (data[i] for i in idx):
            label = (
                f"XID {code}"
                if signal == "xid"
                else f"{code} {detail}".strip()
                if signal == "condition"
                else signal.replace("_", " ")
            )
            if cur is not None and t - cur["last"] <= merge:
                cur["last"] = t
                if rank.get(severity, 4) < rank.get(cur["severity"], 4):
                    cur["severity"] = severity
                if label not in cur["what"]:
                    cur["what"].append(label)
                continue
            cur = {
                "node": node,
                "gpu": gpu,
                "time": t,
                "last": t,
                "what": [label],
                "incident_class": cls,
                "severity": severity,
            }
            rows.append(cur)
    out = pd.DataFrame(rows, columns=["node", "gpu", "time", "last", "what", "incident_class", "severity"])
    return out.sort_values("time", kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class Coverage:
    """How much of [start, end] the node's exporter sent data for, and the gaps."""

    start: pd.Timestamp
    end: pd.Timestamp
    gaps: list[tuple[pd.Timestamp, pd.Timestamp]]

    def no_data(self, a: pd.Timestamp, b: pd.Timestamp) -> pd.Timedelta:
        """Time of [a, b] inside a gap."""
        total = pd.Timedelta(0)
        for g0, g1 in self.gaps:
            lo, hi = max(a, g0), min(b, g1)
            if hi > lo:
                total += hi - lo
        return total

    def observed(self, a: pd.Timestamp, b: pd.Timestamp) -> pd.Timedelta:
        """Time of [a, b] with data."""
        return (b - a) - self.no_data(a, b) if b > a else pd.Timedelta(0)

    @property
    def share(self) -> float:
        span = self.end - self.start
        return self.observed(self.start, self.end) / span if span > pd.Timedelta(0) else 0.0


def coverage(events: pd.DataFrame, node: str, start: pd.Timestamp, end: pd.Timestamp) -> Coverage:
    """The node's exporter gaps (``no_data`` rows, an open one ending at ``end``) clipped to [start, end]."""
    g = events[(events["signal"] == "no_data") & (events["node"] == node)]
    gaps = []
    for _, r in g.iterrows():
        a, b = max(r["time"], start), min(r["end"] if pd.notna(r["end"]) else end, end)
        if b > a:
            gaps.append((a, b))
    merged: list[tuple[pd.Timestamp, pd.Timestamp]] = []
    for a, b in sorted(gaps):  # overlapping gaps (two sources saying the same) count once
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return Coverage(start, end, merged)


def node_timeline(events: pd.DataFrame, node: str, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """The node's events overlapping [start, end], classified, by lane then time (what the timeline chart draws)."""
    ev = classify(events[events["node"] == node])
    last = ev["end"].where(ev["end"].notna(), ev["time"])
    ev = ev[(last >= start) & (ev["time"] <= end)]
    return ev.sort_values(["lane_order", "time"], kind="stable").reset_index(drop=True)


def signal_table(read: dict[str, str], missing: dict[str, str], seen: set[str]) -> pd.DataFrame:
    """One row per signal of the lanes table: where the source read it, or why not, and whether it had events."""
    rows = []
    for sig, r in lanes().iterrows():
        state = "read" if sig in read else "missing" if sig in missing else "not provided by this source"
        rows.append(
            {
                "signal": sig,
                "lane": r["lane"],
                "state": state,
                "read from": read.get(sig, missing.get(sig, "")),
                "events in window": "yes" if sig in seen else "none" if sig in read else "no data",
            }
        )
    return pd.DataFrame(rows)
