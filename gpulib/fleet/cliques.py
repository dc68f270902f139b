"""The NVLink domain (GB200/GB300 NVL72 rack, one fabric clique) as a unit of the fleet overview.

GPU Feature Discovery labels every node of a multi-node NVLink domain with ``nvidia.com/gpu.clique`` =
``<ClusterUUID>.<CliqueId>`` (NVIDIA/k8s-dra-driver-gpu: docs/install.md @22407113785e78c7763b4637689a201eb39c6199).
:func:`clique_units` groups the nodes by that label and, where per-GPU fabric verdicts were read
(:func:`fabric_verdicts`, from each node's ``nvidia-smi -q``), counts the GPUs per verdict and keeps the worst;
:func:`clique_findings` makes one finding per domain that is not wholly joined and healthy, so a rack with one
unhealthy GPU reads as a degraded domain, not as 1 of N unrelated GPUs.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from gpulib.core.findings import Finding
from gpulib.nvidia import fabric

CLIQUE_LABEL = "nvidia.com/gpu.clique"
UNIT_COLUMNS = [
    "clique",
    "cluster_uuid",
    "clique_id",
    "nodes",
    "node_count",
    "gpus",
    "joined",
    "degraded",
    "not_joined",
    "unhealthy",
    "unread",
    "verdict",
    "severity",
]
#: worst first; a clique takes the worst verdict of its GPUs
_ORDER = ("unhealthy", "not_joined", "degraded", "unknown", "joined", "not_applicable")
_SEVERITY = {"unhealthy": "critical", "not_joined": "critical", "degraded": "warning", "unknown": "info"}


def fabric_verdicts(smi_by_node: Mapping[str, pd.DataFrame], nodes: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per GPU (``node``, ``gpu``, ``uuid``, ``verdict``, ``severity``, ``reasons``, ``sop``, ``source``,
    ``clique``) from each node's :func:`gpulib.nvidia.smi.parse_query` frame; the node's clique label, when
    ``nodes`` (a :func:`gpulib.kube.frames.nodes_frame`) has it, is compared with each GPU's own clique."""
    labels = {}
    if nodes is not None and len(nodes):
        labels = {r.node: (r.labels or {}).get(CLIQUE_LABEL, "") for r in nodes.itertuples()}
    rows = []
    for node, df in smi_by_node.items():
        for pos, r in enumerate(df.to_dict("records")):
            v = fabric.verdict(r, clique_label=labels.get(node) or None)
            gpu = r.get("index")
            rows.append(
                {
                    "node": node,
                    "gpu": str(int(gpu)) if gpu is not None and gpu == gpu else str(pos),
                    "uuid": r.get("uuid"),
                    "verdict": v.verdict,
                    "severity": v.severity,
                    "reasons": "; ".join(v.reasons),
                    "sop": v.sop,
                    "source": v.source,
                    "clique": v.clique,
                }
            )
    return pd.DataFrame(
        rows, columns=["node", "gpu", "uuid", "verdict", "severity", "reasons", "sop", "source", "clique"]
    )


def clique_units(nodes: pd.DataFrame, fabric_rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per ``nvidia.com/gpu.clique`` value (columns ``UNIT_COLUMNS``); nodes without the label are no
    member of a multi-node NVLink domain and are left out. ``unread`` counts GPUs with no fabric verdict."""
    rows = []
    if nodes is None or not len(nodes):
        return pd.DataFrame(rows, columns=UNIT_COLUMNS)
    by_clique: dict[str, list] = {}
    for r in nodes.itertuples():
        label = (r.labels or {}).get(CLIQUE_LABEL, "")
        if label:
            by_clique.setdefault(label, []).append(r)
    for label, members in sorted(by_clique.items()):
        names = sorted(m.node for m in members)
        gpus = int(sum(int(m.gpu_count) if pd.notna(m.gpu_count) else int(m.gpu_capacity) for m in members))
        counts = dict.fromkeys(("joined", "degraded", "not_joined", "unhealthy", "unknown", "not_applicable"), 0)
        if fabric_rows is not None and len(fabric_rows):
            for v in fabric_rows[fabric_rows["node"].isin(names)]["verdict"]:
                counts[v] = counts.get(v, 0) + 1
        read = sum(counts.values()) - counts["unknown"]
        unread = max(gpus - read, 0)
        worst = next((v for v in _ORDER if counts.get(v)), "unknown")
        if unread and worst in ("joined", "not_applicable"):
            worst = "unknown"
        parsed = fabric.parse_clique_label(label)
        rows.append(
            {
                "clique": label,
                "cluster_uuid": parsed[0] if parsed else "",
                "clique_id": parsed[1] if parsed else "",
                "nodes": names,
                "node_count": len(names),
                "gpus": gpus,
                "joined": counts["joined"],
                "degraded": counts["degraded"],
                "not_joined": counts["not_joined"],
                "unhealthy": counts["unhealthy"],
                "unread": unread,
                "verdict": worst,
                "severity": _SEVERITY.get(worst, "ok"),
            }
        )
    return pd.DataFrame(rows, columns=UNIT_COLUMNS)


def clique_findings(units: pd.DataFrame, fabric_rows: pd.DataFrame | None = None) -> list[Finding]:
    """One finding per NVLink domain whose worst GPU is unhealthy, not joined or degraded, naming the GPUs;
    a domain with unread GPUs and nothing worse is an info finding (data missing, never OK)."""
    out = []
    for u in units.to_dict("records"):
        if u["severity"] == "ok":
            continue
        bad, gpus = [], []
        if fabric_rows is not None and len(fabric_rows):
            sel = fabric_rows[fabric_rows["node"].isin(u["nodes"]) & fabric_rows["verdict"].isin(_SEVERITY)]
            bad = [f"{r.node} GPU {r.gpu}: {r.verdict} ({r.reasons})" for r in sel.itertuples()]
            gpus = [(r.node, r.gpu) for r in sel.itertuples()]
        # one bad GPU: the finding is about it (node and GPU); several: about the domain
        node, gpu = gpus[0] if len(gpus) == 1 else (u["nodes"][0] if u["node_count"] == 1 else None, None)
        row = fabric.verdict_row(u["verdict"])
        counts = ", ".join(f"{u[k]} {k.replace('_', ' ')}" for k in ("unhealthy", "not_joined", "degraded") if u[k])
        what = counts or f"{u['unread']} GPUs unread"
        title = f"NVLink domain {u['clique']}: {what} of {u['gpus']} GPUs on {u['node_count']} nodes"
        out.append(
            Finding(
                u["severity"],
                title,
                summary=row["meaning"],
                sop_step=row["sop"],
                escalation=row["escalation"],
                evidence=bad + [f"nodes: {', '.join(u['nodes'])}", f"source: {row['source']}"],
                category="nvlink_domain",
                node=node,
                gpu=gpu,
                data={"clique": u["clique"], "verdict": u["verdict"], "nodes": u["nodes"], "gpus": gpus},
            )
        )
    return out
