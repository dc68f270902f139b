"""Other agents' GPU verdicts on a node: their node conditions and Events, read from the Kubernetes objects.

NVSentinel, the EKS node monitoring agent, AKS Node Problem Detector, Meta GCM and Crusoe AutoClusters publish
GPU verdicts as node conditions (and non-fatal ones as Events). ``gpulib/data/kube/agent_conditions.csv`` says,
per agent and condition type, which status means bad, what it means, the agent's recommended action and the
source. :func:`agent_conditions` reads ``kubectl get nodes -o json`` (and optionally ``kubectl get events -o json``)
into one row per GPU-related condition or Event; a GPU-looking condition that is not in the table
(``agent_settings.csv`` ``gpu_condition_pattern``) is kept with ``known=False``, never dropped.

Known false positives (``agent_false_positives.csv``: IMEX "unhealthy" with no ComputeDomain on the node or on a
single-node NVSwitch system, DCGM_FR_NVLINK_DOWN while the links train after a boot) are marked with their reason
and source; :func:`agent_findings` turns them into OK "not a fault" findings that carry no drain, reset or RMA
step. :func:`fold_agent_findings` folds an agent's XID finding into this project's finding of the same XID on the
same node, so one fault is one finding citing both.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable, Mapping

import pandas as pd

from gpulib.core.findings import Finding
from gpulib.core.knowledge import load_table, settings

AGENT_COLUMNS = [
    "node",
    "agent",
    "kind",
    "type",
    "status",
    "bad",
    "known",
    "reason",
    "message",
    "time",
    "gpu",
    "error_code",
    "xid",
    "action",
    "action_class",
    "meaning",
    "source",
    "false_positive",
    "fp_reason",
    "fp_source",
    "fp_check",
    "fp_id",
]

#: Kubernetes' own node conditions (kubelet), never an agent's GPU verdict
_KUBELET = {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}
_ACTION = re.compile(r"Recommended Action\s*=\s*([A-Z_]+)")
_ERROR_CODE = re.compile(r"\b(DCGM_FR_[A-Z0-9_]+)\b")
_GPU = re.compile(r"\bGPU[:\s]+(\d{1,3})\b")
_XID = re.compile(r"\bXID[:\s]*(\d{1,3})\b", re.IGNORECASE)
#: agent actions that drain, reset, reboot or replace a node or GPU (NVSentinel recommended actions,
#: NVIDIA/NVSentinel: docs/configuration/gpu-health-monitor.md @07f8501e790593d62712cb47956490074843bfa6)
DISRUPTIVE = {"RESTART_VM", "RESTART_BM", "REPLACE_VM", "COMPONENT_RESET", "reboot", "replace"}


@lru_cache(maxsize=1)
def condition_table() -> pd.DataFrame:
    t = load_table("kube/agent_conditions").fillna("")
    t["bad_status"] = t["bad_status"].map(str)  # the CSV reader reads True/False as booleans
    return t


@lru_cache(maxsize=1)
def false_positive_table() -> pd.DataFrame:
    return load_table("kube/agent_false_positives").fillna("")


def _conditions_of(node: Mapping[str, Any]) -> list[dict]:
    return [c for c in ((node.get("status") or {}).get("conditions") or []) if isinstance(c, dict)]


def _ready_since(node: Mapping[str, Any]) -> pd.Timestamp | None:
    for c in _conditions_of(node):
        if c.get("type") == "Ready" and c.get("status") == "True":
            return _ts(c.get("lastTransitionTime"))
    return None


def _ts(v: Any) -> pd.Timestamp | None:
    try:
        t = pd.Timestamp(v)
    except (TypeError, ValueError):
        return None
    if pd.isna(t):
        return None
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def _compute_domain_nodes(compute_domains: Any) -> set[str] | None:
    """Node names listed in any ComputeDomain's ``status.nodes`` (NVIDIA/k8s-dra-driver-gpu:
    api/nvidia.com/resource/v1beta1/computedomain.go @22407113785e78c7763b4637689a201eb39c6199); None when unread."""
    if compute_domains is None:
        return None
    items = compute_domains.get("items", []) if isinstance(compute_domains, Mapping) else list(compute_domains)
    out = set()
    for cd in items:
        for n in ((cd or {}).get("status") or {}).get("nodes") or []:
            if isinstance(n, Mapping) and n.get("name"):
                out.add(str(n["name"]))
    return out


def _false_positive(row: dict, node: Mapping[str, Any], cd_nodes: set[str] | None, now: pd.Timestamp | None):
    """The matching ``agent_false_positives.csv`` row and whether its context holds: (fp row or None, holds)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for fp in false_positive_table().itertuples():
        if fp.type != row["type"] or fp.error_code != row["error_code"]:
            continue
        if not re.search(fp.message_pattern, row["message"] or ""):
            continue
        if fp.holds_when == "no_compute_domain":
            holds = None if cd_nodes is None else row["node"] not in cd_nodes
        elif fp.holds_when == "no_nvlink_domain":
            holds = not labels.get("nvidia.com/gpu.clique")
        elif fp.holds_when == "links_training_after_boot":
            ready, since = _ready_since(node), row["time"]
            settle = pd.Timedelta(minutes=float(settings("agent_settings")["link_training_settle_min"]))
            holds = None if ready is None or since is None else since - ready <= settle
        else:
            holds = None
        if holds is None or holds:
            return fp, holds
    return None, False


def agent_conditions(
    nodes_json: Mapping[str, Any] | None,
    events_json: Mapping[str, Any] | None = None,
    compute_domains: Any = None,
    now: Any = None,
) -> pd.DataFrame:
    """One row per GPU-related agent condition (known or GPU-looking) and agent Event, columns ``AGENT_COLUMNS``.

    ``compute_domains`` is ``kubectl get computedomains.resource.nvidia.com -A -o json`` when read: it decides the
    IMEX-with-no-ComputeDomain false positive (unread: the row is marked ``false_positive="possible"``).
    """
    table = condition_table()
    known = {(r.type): r for r in table.itertuples() if r.kind == "condition"}
    events = [r for r in table.itertuples() if r.kind == "event"]
    pattern = re.compile(str(settings("agent_settings")["gpu_condition_pattern"]))
    cd_nodes = _compute_domain_nodes(compute_domains)
    rows: list[dict] = []
    by_name: dict[str, Mapping] = {}
    for node in _items(nodes_json):
        name = str((node.get("metadata") or {}).get("name") or "")
        by_name[name] = node
        for c in _conditions_of(node):
            ctype = str(c.get("type") or "")
            if ctype in _KUBELET:
                continue
            spec = known.get(ctype)
            if spec is None and not pattern.search(ctype):
                continue
            rows.append(_row(name, "condition", c, spec, node, cd_nodes, now))
    for ev in _items(events_json):
        reason = str(ev.get("reason") or "")
        spec = next((r for r in events if reason.startswith(r.type)), None)
        if spec is None:
            continue
        obj = ev.get("involvedObject") if isinstance(ev.get("involvedObject"), Mapping) else {}
        name = str(obj.get("name") or "")
        c = {
            "type": reason,
            "status": "",
            "reason": reason,
            "message": ev.get("message") or "",
            "lastTransitionTime": ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp"),
        }
        rows.append(_row(name, "event", c, spec, by_name.get(name, {}), cd_nodes, now))
    return pd.DataFrame(rows, columns=AGENT_COLUMNS)


def _items(doc: Any) -> list[dict]:
    """The dict items of a kubectl List (anything else in it, or a malformed document, is skipped)."""
    items = doc.get("items") if isinstance(doc, Mapping) else None
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []


def _row(node: str, kind: str, c: Mapping, spec: Any, node_obj: Mapping, cd_nodes, now) -> dict:
    message = str(c.get("message") or "")
    status = str(c.get("status") or "")
    m_action, m_code = _ACTION.search(message), _ERROR_CODE.search(message)
    m_gpu, m_xid = _GPU.search(message), _XID.search(message)
    row = {
        "node": node,
        "agent": spec.agent if spec is not None else "unknown",
        "kind": kind,
        "type": str(c.get("type") or ""),
        "status": status,
        "bad": (status == spec.bad_status) if spec is not None and kind == "condition" else kind == "event",
        "known": spec is not None,
        "reason": str(c.get("reason") or ""),
        "message": message,
        "time": _ts(c.get("lastTransitionTime")),
        "gpu": m_gpu.group(1) if m_gpu else None,
        "error_code": m_code.group(1) if m_code else "",
        "xid": int(m_xid.group(1)) if m_xid else None,
        "action": (m_action.group(1) if m_action else "") or (spec.action if spec is not None else ""),
        "action_class": (spec.action_class if spec is not None else "unknown"),
        "meaning": spec.meaning if spec is not None else "not in gpulib/data/kube/agent_conditions.csv",
        "source": spec.source if spec is not None else "",
        "false_positive": "",
        "fp_reason": "",
        "fp_source": "",
        "fp_check": "",
        "fp_id": "",
    }
    if row["bad"] and spec is not None:
        fp, holds = _false_positive(row, node_obj, cd_nodes, now)
        if fp is not None:
            row.update(
                false_positive="yes" if holds else "possible",
                fp_reason=fp.reason,
                fp_source=fp.source,
                fp_check=str(fp.check).replace("{node}", node),
                fp_id=fp.id,
            )
    return row


def _utc(t: Any) -> str:
    return t.strftime("%H:%M UTC") if isinstance(t, pd.Timestamp) else "an unknown time"


def describe(r: Mapping[str, Any]) -> str:
    """``flagged by NVSentinel at 10:42 UTC, GpuNvlinkWatch, RESTART_VM`` for one agent row."""
    parts = [f"flagged by {r['agent']} at {_utc(r['time'])}", str(r["type"])]
    if r.get("action"):
        parts.append(str(r["action"]))
    return ", ".join(parts)


def agent_findings(rows: pd.DataFrame) -> list[Finding]:
    """Findings from :func:`agent_conditions` rows that are bad (known) or unknown.

    A false positive that holds is an OK finding "not a fault" with its reason and source; one whose context could
    not be read (``possible``) is a warning that asks for the check. Neither carries a drain, reset or RMA step:
    only the read-only check of the false-positive table."""
    out: list[Finding] = []
    for r in rows.to_dict("records"):
        if not r["known"]:
            out.append(
                Finding(
                    "info",
                    f"Unknown GPU condition {r['type']}={r['status']} on {r['node']}",
                    summary="A GPU-looking node condition that gpulib/data/kube/agent_conditions.csv does not "
                    "describe: which status means bad is unknown, so it is shown, not graded.",
                    evidence=[f"{r['type']}={r['status']} reason={r['reason']} message={r['message'][:200]}"],
                    category="agent",
                    node=r["node"],
                    confidence=0.5,
                    data={"agent": "unknown", "condition": r["type"], "status": r["status"]},
                )
            )
            continue
        if not r["bad"]:
            continue
        title = f"{describe(r)} on {r['node']}" + (f" GPU {r['gpu']}" if r["gpu"] else "")
        data = {k: r[k] for k in ("agent", "type", "status", "error_code", "action", "action_class", "xid")}
        data["time"] = r["time"].isoformat() if isinstance(r["time"], pd.Timestamp) else None
        evidence = [
            f"{r['type']}={r['status']} since {_utc(r['time'])}: {r['message'][:300]}",
            f"source: {r['source']}",
        ]
        if r["false_positive"]:
            holds = r["false_positive"] == "yes"
            out.append(
                Finding(
                    "ok" if holds else "warning",
                    ("Not a fault: " if holds else "Possible false positive: ") + title,
                    summary=r["fp_reason"],
                    evidence=evidence + [f"known false positive: {r['fp_source']}"],
                    commands=[r["fp_check"]] if r["fp_check"] else [],
                    category="agent",
                    node=r["node"],
                    gpu=r["gpu"],
                    confidence=0.8 if holds else 0.5,
                    data={
                        **data,
                        "false_positive": r["false_positive"],
                        "fp_id": r["fp_id"],
                        "fp_source": r["fp_source"],
                    },
                )
            )
            continue
        severe = r["action"] in DISRUPTIVE or r["action_class"] in ("replace", "reboot")
        out.append(
            Finding(
                "critical" if severe else "warning",
                title,
                summary=r["meaning"],
                evidence=evidence,
                escalation=f"the agent's recommended action: {r['action']}" if r["action"] else "",
                category="agent",
                node=r["node"],
                gpu=r["gpu"],
                confidence=0.8,
                data=data,
                runbook="xid_ecc_triage" if r["xid"] is not None else None,
            )
        )
    return out


def fold_agent_findings(ours: Iterable[Finding], agents: Iterable[Finding]) -> list[Finding]:
    """``ours`` plus the agent findings, an agent's XID finding folded into ours of the same XID on the same node
    (one fault, one finding citing both: ``data["also_flagged_by"]`` and an evidence line)."""
    ours, rest = list(ours), []
    for a in agents:
        xid = a.data.get("xid")
        twin = None
        if xid is not None:
            twin = next(
                (
                    f
                    for f in ours
                    if f.category != "agent"
                    and f.node == a.node
                    and (a.gpu is None or not f.gpu or str(f.gpu) == str(a.gpu) or not str(f.gpu).isdigit())
                    and (f.data.get("xid") == int(xid) or re.match(rf"XID {int(xid)}\b", f.title))
                ),
                None,
            )
        if twin is None:
            rest.append(a)
            continue
        twin.evidence.append(f"also {a.title}")
        twin.data.setdefault("also_flagged_by", []).append(
            {k: a.data.get(k) for k in ("agent", "type", "time", "action")}
        )
    return ours + rest


def timeline(rows: pd.DataFrame) -> pd.DataFrame:
    """node_health timeline rows (``time``, ``node``, ``gpu``, ``signal``, ``detail``) of the bad or unknown rows."""
    keep = rows[rows["bad"] | ~rows["known"]] if len(rows) else rows
    return pd.DataFrame(
        {
            "time": keep["time"],
            "node": keep["node"],
            "gpu": keep["gpu"],
            "signal": "agent_" + keep["kind"].astype(str),
            "detail": [
                describe(r) + (" (not a fault)" if r["false_positive"] == "yes" else "")
                for r in keep.to_dict("records")
            ],
        }
    )


def history(
    nodes_json: Mapping[str, Any] | None, events_json: Mapping[str, Any] | None = None, compute_domains: Any = None
) -> pd.DataFrame:
    """Node-history rows (``gpulib.core.schema.HISTORY_COLUMNS``, signal ``agent_condition``) of the agents'
    bad and unknown conditions and their Events, for node_health's timeline; a false positive says so in ``detail``."""
    rows = agent_conditions(nodes_json, events_json, compute_domains)
    keep = rows[rows["bad"] | ~rows["known"]] if len(rows) else rows
    out = []
    for r in keep.to_dict("records"):
        detail = describe(r)
        if r["false_positive"]:
            detail += (
                f" ({'not a fault' if r['false_positive'] == 'yes' else 'possible false positive'}: {r['fp_source']})"
            )
        elif not r["known"]:
            detail += " (unknown GPU condition)"
        out.append(
            {
                "time": r["time"],
                "end": pd.NaT,
                "node": r["node"],
                "gpu": r["gpu"] or "",
                "signal": "agent_condition",
                "code": f"{r['agent']}/{r['type']}",
                "value": 1.0,
                "detail": detail,
                "origin": "events.json" if r["kind"] == "event" else "nodes.json",
            }
        )
    cols = ["time", "end", "node", "gpu", "signal", "code", "value", "detail", "origin"]
    return pd.DataFrame(out, columns=cols)
