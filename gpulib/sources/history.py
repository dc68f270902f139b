"""A node history as every backend returns it (:meth:`gpulib.sources.base.Source.node_history`): the events,
where each signal was read and which could not be, clipped to the asked window."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pandas as pd

from gpulib.core.schema import HISTORY_COLUMNS, conform


@dataclass(frozen=True)
class NodeHistory:
    """What happened to the nodes over a window (:meth:`Source.node_history`).

    ``events``: the rows (``gpulib.core.schema.HISTORY_COLUMNS``); ``read``: signal -> where it was read (a
    series, a file, the audit log); ``missing``: signal -> why it could not be read (a series this Prometheus
    does not have, a file the snapshot lacks). A signal in ``missing`` has no rows: no row is not zero events."""

    events: pd.DataFrame
    read: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    start: pd.Timestamp | None = None
    end: pd.Timestamp | None = None


def clip(hist: NodeHistory, end: pd.Timestamp, window: timedelta, node: str | None) -> NodeHistory:
    """The events of ``node`` (every node: None) overlapping [end - window, end], in time order."""
    start = end - pd.Timedelta(window)
    ev = conform(hist.events, HISTORY_COLUMNS)
    for col in ("time", "end"):
        ev[col] = pd.to_datetime(ev[col], utc=True)
    last = ev["end"].where(ev["end"].notna(), ev["time"])
    keep = (last >= start) & (ev["time"] <= end)
    if node is not None:
        keep &= ev["node"] == node
    ev = ev[keep].sort_values("time", kind="stable").reset_index(drop=True)
    return NodeHistory(ev, dict(hist.read), dict(hist.missing), start, end)
