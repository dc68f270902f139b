"""Kubernetes events (``kubectl get events -A -o json``) -> node history rows (``gpulib.core.schema.HISTORY_COLUMNS``).

Events expire after an hour by default (kube-apiserver ``--event-ttl``,
https://kubernetes.io/docs/reference/command-line-tools-reference/kube-apiserver/), so a capture covers the recent past
only. Reasons read (kubelet and node lifecycle controller, https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/events/event.go
and the Node Problem Detector's ``OOMKilling``, https://github.com/kubernetes/node-problem-detector):
``NodeNotReady``/``NodeReady`` (a NotReady spell), ``NodeNotSchedulable``/``NodeSchedulable`` (a cordon),
``Rebooted``, ``OOMKilling``, ``Evicted``, ``BackOff`` (a container restarting). Malformed items are skipped.
"""

from __future__ import annotations

import pandas as pd

from gpulib.core.schema import HISTORY_COLUMNS

#: reason -> (signal, opens or closes an interval: "open" / "close" / "")
REASONS = {
    "NodeNotReady": ("condition", "open"),
    "NodeReady": ("condition", "close"),
    "NodeNotSchedulable": ("cordon", "open"),
    "NodeSchedulable": ("cordon", "close"),
    "Rebooted": ("reset", ""),
    "OOMKilling": ("oom_kill", ""),
    "Evicted": ("eviction", ""),
    "BackOff": ("pod_restart", ""),
}
ORIGIN = "events.json"


def _when(item: dict):
    meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
    for v in (
        item.get("eventTime"),
        item.get("lastTimestamp"),
        item.get("firstTimestamp"),
        meta.get("creationTimestamp"),
    ):
        t = pd.to_datetime(v, utc=True, errors="coerce") if isinstance(v, str) and v else None
        if t is not None and not pd.isna(t):
            return t
    return None


def events_history(doc: dict, pod_nodes: dict[str, str]) -> pd.DataFrame:
    """History rows of the events in ``doc``; a pod's node from ``pod_nodes`` (``namespace/name`` -> node) or the
    event's reporting host."""
    rows = []
    items = doc.get("items") if isinstance(doc, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("reason") not in REASONS:
            continue
        obj = item.get("involvedObject") or item.get("regarding") or {}
        if not isinstance(obj, dict):
            continue
        t = _when(item)
        if t is None:
            continue
        kind = obj.get("kind")
        if kind == "Node":
            node = str(obj.get("name", ""))
        else:
            key = f"{obj.get('namespace', '')}/{obj.get('name', '')}"
            node = pod_nodes.get(key) or str(
                (item.get("source") or {}).get("host") or item.get("reportingInstance") or ""
            )
        if not node:
            continue
        signal, edge = REASONS[item["reason"]]
        rows.append(
            {
                "time": t,
                "end": pd.NaT,
                "node": node,
                "gpu": "",
                "signal": signal,
                "code": "Ready" if signal == "condition" else "reboot" if signal == "reset" else "",
                "value": float(item.get("count") or 1),
                "detail": str(item.get("message", ""))[:200],
                "origin": ORIGIN,
                "edge": edge,
            }
        )
    df = pd.DataFrame(rows, columns=[*HISTORY_COLUMNS, "edge"])
    return _pair(df.sort_values("time", kind="stable")).reset_index(drop=True)


def _pair(df: pd.DataFrame) -> pd.DataFrame:
    """An opening event and the next closing one of the same node and signal become one row from time to end; a
    closing one without its opening is dropped (its start is older than the capture)."""
    out, open_rows = [], {}
    for _, r in df.iterrows():
        key = (r["node"], r["signal"])
        if r["edge"] == "open":
            open_rows.setdefault(key, r.to_dict())
        elif r["edge"] == "close":
            start = open_rows.pop(key, None)
            if start is not None:
                start["end"] = r["time"]
                out.append(start)
        else:
            out.append(r.to_dict())
    out += list(open_rows.values())  # still open at the capture: end NaT
    return pd.DataFrame(out, columns=[*HISTORY_COLUMNS, "edge"]).drop(columns="edge")
