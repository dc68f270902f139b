"""The demo's NVLink domains: a GB200 NVL72 rack and a GB300 rack beside the demo fleet
(``gpulib/data/demo/demo_gb200_rack.yaml``), as the Kubernetes objects and ``nvidia-smi -q`` texts a real cluster
gives, and the verdict gpulib reaches on them.

The ``nvidia-smi -q`` Fabric block is written in the layout of the real captures of ``gpulib/data/captures``
(``h200_580.159.04_smi_q.txt``); node conditions in the message form of the NVSentinel reports the scenario cites.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pandas as pd
import yaml

from gpulib.core.findings import Finding
from gpulib.core.knowledge import data_path
from gpulib.core.timeutil import parse_window
from gpulib.fleet.cliques import CLIQUE_LABEL, clique_findings, clique_units, fabric_verdicts
from gpulib.kube import agents
from gpulib.kube.frames import nodes_frame
from gpulib.nvidia.smi import parse_query

_KV = "{:<51}: {}"


@lru_cache(maxsize=1)
def scenario() -> dict:
    return yaml.safe_load(data_path("demo/demo_gb200_rack.yaml").read_text())


def _at(spec: str, end: pd.Timestamp) -> str:
    s = str(spec).strip()
    delta = parse_window(s.lstrip("+-"), name="scenario time")
    t = end - delta if s.startswith("-") else end + delta
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def nodes_json(end: Any) -> dict:
    """``kubectl get nodes -o json`` of the scenario's nodes (GFD clique label, Ready and the agents' conditions)."""
    end = pd.Timestamp(end).tz_convert("UTC") if pd.Timestamp(end).tzinfo else pd.Timestamp(end, tz="UTC")
    sc = scenario()
    items = []
    for n in sc["nodes"]:
        labels = {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.count": str(n["gpus"]),
            "nvidia.com/gpu.product": n["product"].replace(" ", "-"),
        }
        if n.get("clique"):
            labels[CLIQUE_LABEL] = sc["cliques"][n["clique"]]
        conds = [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "lastTransitionTime": _at(n["ready_since"], end),
            }
        ]
        for c in n.get("conditions") or []:
            conds.append(
                {
                    "type": c["type"],
                    "status": c["status"],
                    "reason": f"{c['type']}IsNotHealthy",
                    "message": c["message"],
                    "lastTransitionTime": _at(c["at"], end),
                }
            )
        cap = {"nvidia.com/gpu": str(n["gpus"])}
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": n["name"], "labels": labels},
                "status": {"capacity": cap, "allocatable": dict(cap), "conditions": conds},
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


def compute_domains_json() -> dict:
    """``kubectl get computedomains.resource.nvidia.com -A -o json`` of the scenario."""
    return {"apiVersion": "v1", "kind": "List", "items": list(scenario().get("compute_domains") or [])}


def smi_query(node: str) -> str | None:
    """``nvidia-smi -q`` (header and each GPU's Fabric block) of a scenario node; None for a node not in it."""
    sc = scenario()
    spec = next((n for n in sc["nodes"] if n["name"] == node), None)
    if spec is None:
        return None
    uuid, clique = ("", "")
    if spec.get("clique"):
        uuid, clique = sc["cliques"][spec["clique"]].rsplit(".", 1)
    bad = spec.get("fabric") or {}
    out = ["==============NVSMI LOG==============", "", _KV.format("Attached GPUs", spec["gpus"])]
    for i in range(int(spec["gpus"])):
        out += [f"GPU 00000008:{i + 1:02X}:00.0", "    " + _KV.format("Product Name", spec["product"])]
        out.append("    Fabric")
        if clique:
            summary = bad.get("health_summary", "Healthy") if bad.get("gpu") == i else "Healthy"
            rows = [("State", "Completed"), ("Status", "Success"), ("CliqueId", clique), ("ClusterUUID", uuid)]
            health = [
                ("Summary", summary),
                ("Bandwidth", bad.get("bandwidth", "Full") if bad.get("gpu") == i else "Full"),
                ("Route Recovery in progress", "False"),
                ("Route Unhealthy", "False"),
                ("Access Timeout Recovery", "False"),
                ("Incorrect Configuration", "None"),
            ]
        else:  # an HGX board: what the real 2x H200 capture prints
            rows = [
                ("State", "Completed"),
                ("Status", "Success"),
                ("CliqueId", "0"),
                ("ClusterUUID", "00000000-0000-0000-0000-000000000000"),
            ]
            health = [
                (k, "N/A")
                for k in (
                    "Summary",
                    "Bandwidth",
                    "Route Recovery in progress",
                    "Route Unhealthy",
                    "Access Timeout Recovery",
                    "Incorrect Configuration",
                )
            ]
        out += ["        " + "{:<47}: {}".format(k, v) for k, v in rows]
        out.append("        Health")
        out += ["            " + "{:<43}: {}".format(k, v) for k, v in health]
    return "\n".join(out) + "\n"


def findings(end: Any) -> list[Finding]:
    """What gpulib concludes on the scenario: one finding per NVLink domain that is not wholly healthy, and the
    agents' conditions (their false positives held as 'not a fault')."""
    nodes = nodes_json(end)
    frame = nodes_frame(nodes)
    smi = {n: parse_query(t) for n in frame["node"] if (t := smi_query(n))}
    fab = fabric_verdicts(smi, frame)
    rows = agents.agent_conditions(nodes, compute_domains=compute_domains_json(), now=end)
    return clique_findings(clique_units(frame, fab), fab) + agents.agent_findings(rows)


def fabric_frame(end: Any) -> pd.DataFrame:
    """The per-GPU fabric verdicts of the scenario (:func:`gpulib.fleet.cliques.fabric_verdicts`)."""
    frame = nodes_frame(nodes_json(end))
    return fabric_verdicts({n: parse_query(t) for n in frame["node"] if (t := smi_query(n))}, frame)
