"""Multi-node NVLink (GB200/GB300 NVL72) fabric membership and health of one GPU, as a verdict.

Inputs, each optional:

* the ``Fabric`` block of ``nvidia-smi -q`` (:func:`fabric_columns`, called by :func:`gpulib.nvidia.smi.parse_query`):
  ``State``, ``Status``, ``CliqueId``, ``ClusterUUID`` and ``Health`` (``Summary`` and its parts ``Bandwidth``,
  ``Route Recovery in progress``, ``Route Unhealthy``, ``Access Timeout Recovery``, ``Incorrect Configuration``...);
* DCGM's fabric fields 170-175 (:func:`from_dcgm`; NVIDIA/DCGM: dcgmlib/dcgm_fields.h
  @72fa3feaa67d716a75323a8f47c34ff3ee73f824), the health mask decoded with NVML's shifts and widths
  (``gpulib/data/nvidia/fabric_health_parts.csv``);
* the node's GPU Feature Discovery label ``nvidia.com/gpu.clique`` = ``<ClusterUUID>.<CliqueId>``
  (NVIDIA/k8s-dra-driver-gpu: docs/install.md @22407113785e78c7763b4637689a201eb39c6199).

:func:`verdict` gives one of ``joined``, ``degraded``, ``not_joined``, ``unhealthy``, ``not_applicable`` (no NVLink
domain: an HGX board prints N/A everywhere) or ``unknown`` (no reading), each with its severity, SOP and source
from ``gpulib/data/nvidia/fabric_verdicts.csv``. State alone never makes a fault: N/A or Not Supported is
``not_applicable``; only a failed join or an unhealthy/degraded health reading is a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

import pandas as pd

from gpulib.core.findings import Finding
from gpulib.core.knowledge import load_table

#: values nvidia-smi and NVML print for "no reading" (compared lower-case, brackets stripped)
_ABSENT = {"", "n/a", "not supported", "unknown", "nan", "none-reading"}
_ZERO_UUID = re.compile(r"^[0-]+$")
_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_CLIQUE_LABEL = re.compile(rf"^(?P<uuid>{_UUID})\.(?P<id>\d{{1,10}})$")

#: dcgmFabricManagerStatus_t (NVIDIA/DCGM: dcgmlib/dcgm_structs.h @72fa3feaa67d716a75323a8f47c34ff3ee73f824)
FM_STATUS = {
    0: "Not Supported",
    1: "Not Started",
    2: "In Progress",
    3: "Success",
    4: "Failure",
    5: "Unrecognized",
    6: "NVML Too Old",
}
#: NVML_GPU_FABRIC_HEALTH_SUMMARY_* = DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY (dcgm_fields.h, same commit)
HEALTH_SUMMARY = {0: "Not Supported", 1: "Healthy", 2: "Unhealthy", 3: "Limited Capacity"}

#: the columns :func:`fabric_columns` gives a GPU's row (gpulib.nvidia.smi.QUERY_COLUMNS lists them from here)
FABRIC_COLUMNS = (
    "fabric_state",
    "fabric_status",
    "fabric_clique_id",
    "fabric_cluster_uuid",
    "fabric_health_summary",
    "fabric_health",
    "fabric_reported",
)
_FABRIC_KEYS = frozenset(FABRIC_COLUMNS)
VERDICTS = ("joined", "degraded", "not_joined", "unhealthy", "not_applicable", "unknown")


@lru_cache(maxsize=1)
def _verdict_table() -> pd.DataFrame:
    return load_table("nvidia/fabric_verdicts").set_index("verdict")


@lru_cache(maxsize=1)
def _parts_table() -> pd.DataFrame:
    t = load_table("nvidia/fabric_health_parts")
    # the CSV reader reads the cell "None" (Incorrect Configuration's healthy value) as missing
    t["healthy_values"] = t["healthy_values"].fillna("None")
    return t


def verdict_row(name: str) -> dict[str, str]:
    """The ``fabric_verdicts.csv`` row of verdict ``name`` (severity, meaning, sop, escalation, source)."""
    r = _verdict_table().loc[name]
    return {k: ("" if pd.isna(v) else str(v)) for k, v in r.items()}


def _present(v: Any) -> bool:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return False
    return str(v).strip().strip("[]").lower() not in _ABSENT


def _text(v: Any) -> str | None:
    return str(v).strip() if _present(v) else None


def fabric_columns(d: Mapping[str, str]) -> dict[str, Any]:
    """The fabric columns of one GPU from the flattened ``nvidia-smi -q`` tree (``"Fabric/State"`` ...).

    ``fabric_health`` maps each printed health part (``Bandwidth``, ``Route Unhealthy``...) to its text; parts
    printed N/A or Not Supported are left out, and ``Incorrect Configuration : None`` (= correct) is kept as "None".
    """
    parts = {}
    for k, v in d.items():
        if k.startswith("Fabric/Health/") and k != "Fabric/Health/Summary":
            val = str(v).strip()
            if val.lower() == "none" or _present(val):
                parts[k.rsplit("/", 1)[1]] = val
    return {
        "fabric_state": _text(d.get("Fabric/State")),
        "fabric_status": _text(d.get("Fabric/Status")),
        "fabric_clique_id": _text(d.get("Fabric/CliqueId")),
        "fabric_cluster_uuid": _text(d.get("Fabric/ClusterUUID")),
        "fabric_health_summary": _text(d.get("Fabric/Health/Summary")),
        "fabric_health": parts or None,
        "fabric_reported": any(k.startswith("Fabric/") for k in d),
    }


def decode_health_mask(mask: Any) -> dict[str, str]:
    """DCGM_FI_DEV_FABRIC_HEALTH_MASK as ``{part: text}`` like nvidia-smi prints it; NOT_SUPPORTED parts left out."""
    try:
        m = int(mask)
    except (TypeError, ValueError):
        return {}
    out = {}
    for r in _parts_table().itertuples():
        code = (m >> int(r.shift)) & int(r.width)
        names = dict(p.split("=", 1) for p in str(r.code_values).split(";"))
        if code and str(code) in names:
            out[r.part] = names[str(code)]
    return out


def from_dcgm(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Fabric columns from the DCGM fields of one GPU (``DCGM_FI_DEV_FABRIC_*`` names as keys; absent = no reading)."""

    def num(name: str) -> int | None:
        v = fields.get(name)
        try:
            return None if v is None or pd.isna(v) else int(v)
        except (TypeError, ValueError):
            return None

    summary, fm = num("DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"), num("DCGM_FI_DEV_FABRIC_MANAGER_STATUS")
    state = status = None
    if fm is not None:
        # DcgmFMStatus folds NVML's state and status into one value
        state = {0: "Not Supported", 1: "Not Started", 2: "In Progress"}.get(fm, "Completed")
        status = {3: "Success", 4: "Failure"}.get(fm) if state == "Completed" else None
    elif summary in (1, 2, 3):
        state = "Completed"
    elif summary == 0:
        state = "Not Supported"
    clique = num("DCGM_FI_DEV_FABRIC_CLIQUE_ID")
    return {
        "fabric_state": state,
        "fabric_status": status,
        "fabric_clique_id": None if clique is None else str(clique),
        "fabric_cluster_uuid": _text(fields.get("DCGM_FI_DEV_FABRIC_CLUSTER_UUID")),
        "fabric_health_summary": HEALTH_SUMMARY.get(summary) if summary is not None else None,
        "fabric_health": decode_health_mask(fields.get("DCGM_FI_DEV_FABRIC_HEALTH_MASK")) or None,
        "fabric_reported": any(k.startswith("DCGM_FI_DEV_FABRIC_") and fields.get(k) is not None for k in fields),
    }


def clique_label(cluster_uuid: str, clique_id: Any) -> str:
    """The GFD label value ``nvidia.com/gpu.clique`` of a GPU that joined ``cluster_uuid`` / ``clique_id``."""
    return f"{cluster_uuid}.{clique_id}"


def parse_clique_label(value: Any) -> tuple[str, str] | None:
    """``(ClusterUUID, CliqueId)`` of a ``nvidia.com/gpu.clique`` label value; None when absent or malformed."""
    m = _CLIQUE_LABEL.match(str(value or "").strip())
    return (m.group("uuid").lower(), m.group("id")) if m else None


@dataclass
class FabricVerdict:
    verdict: str
    severity: str
    reasons: list[str] = field(default_factory=list)
    sop: str = ""
    escalation: str = ""
    source: str = ""
    clique: str = ""  # "<ClusterUUID>.<CliqueId>" where the GPU joined one


def _parts_effect(parts: Mapping[str, str]) -> tuple[list[str], list[str]]:
    bad_unhealthy, bad_degraded = [], []
    table = {r.part: r for r in _parts_table().itertuples()}
    for part, value in parts.items():
        r = table.get(part)
        if r is None or not _present(value) and str(value).lower() != "none":
            continue
        if str(value).strip().lower() == str(r.healthy_values).lower():
            continue
        (bad_unhealthy if r.effect == "unhealthy" else bad_degraded).append(f"{part} {value}")
    return bad_unhealthy, bad_degraded


def _get(row: Any, key: str) -> Any:
    try:
        v = row.get(key) if hasattr(row, "get") else None
    except (KeyError, TypeError):
        return None
    return v


@lru_cache(maxsize=1)
def _mnnvl_patterns() -> tuple[str, ...]:
    return tuple(str(p).lower() for p in load_table("nvidia/mnnvl_products")["product_pattern"])


def expects_domain(product: Any, clique_label: str | None = None) -> bool:
    """Whether the GPU should be a member of a multi-node NVLink domain: a GB200/GB300 product
    (``gpulib/data/nvidia/mnnvl_products.csv``) or a node that carries a ``nvidia.com/gpu.clique`` label."""
    p = str(product or "").lower()
    return bool(clique_label) or any(pat in p for pat in _mnnvl_patterns())


def verdict(row: Any, clique_label: str | None = None, expect_domain: bool | None = None) -> FabricVerdict:
    """The fabric verdict of one GPU from its fabric columns (a ``parse_query`` row, :func:`from_dcgm`, or a dict).

    ``clique_label`` is the node's ``nvidia.com/gpu.clique`` label, compared with the GPU's own clique.
    ``expect_domain`` (default: :func:`expects_domain` of the row's ``name`` and the label) says whether
    CliqueId 0 / an all-zero ClusterUUID is a failed join: an HGX H200 with NVSwitch prints State Completed,
    Status Success, CliqueId 0 and a zero ClusterUUID (gpulib/data/captures/2xh200_580.159.04_smi_q.txt), which
    is no member of a multi-node domain and no fault; on GB200 the same reading is a failed join.
    """
    if expect_domain is None:
        expect_domain = expects_domain(_get(row, "name"), clique_label)
    state, status = _text(_get(row, "fabric_state")), _text(_get(row, "fabric_status"))
    clique, uuid = _text(_get(row, "fabric_clique_id")), _text(_get(row, "fabric_cluster_uuid"))
    summary = _text(_get(row, "fabric_health_summary"))
    parts = _get(row, "fabric_health")
    parts = dict(parts) if isinstance(parts, Mapping) else {}
    reasons: list[str] = []

    def done(name: str) -> FabricVerdict:
        r = verdict_row(name)
        joined = f"{uuid}.{clique}" if uuid and clique and name not in ("not_joined", "not_applicable") else ""
        return FabricVerdict(name, r["severity"], reasons, r["sop"], r["escalation"], r["source"], joined)

    reported = _get(row, "fabric_reported")
    if state is None and summary is None and not parts:
        if (reported is not None and bool(reported)) or (
            reported is None and "fabric_state" in _keys(row) and not _keys(row) - _FABRIC_KEYS
        ):
            reasons.append("every Fabric field N/A or Not Supported")
            return done("not_applicable")
        reasons.append("no fabric reading")
        return done("unknown")
    if state is not None and state.lower() == "not supported":
        reasons.append("fabric State Not Supported")
        return done("not_applicable")
    if state is not None and state.lower() in ("not started", "in progress"):
        reasons.append(f"fabric State {state}")
        r = verdict_row("not_joined")
        return FabricVerdict("not_joined", "warning", reasons, r["sop"], r["escalation"], r["source"])
    failed = []
    if state is not None and state.lower() == "completed" and status is not None and status.lower() != "success":
        failed.append(f"Status {status}")
    no_domain = []
    if clique == "0":
        no_domain.append("CliqueId 0")
    if uuid is not None and _ZERO_UUID.match(uuid):
        no_domain.append("ClusterUUID all zeros")
    if no_domain and not failed and not expect_domain and summary is None and not parts:
        reasons.extend(no_domain + ["no multi-node NVLink domain expected for this GPU"])
        return done("not_applicable")
    failed.extend(no_domain)
    if failed:
        reasons.extend(failed)
        return done("not_joined")
    bad_u, bad_d = _parts_effect(parts)
    if summary is not None and summary.lower() == "unhealthy":
        reasons.append("Health Summary Unhealthy")
    reasons.extend(bad_u)
    if reasons:
        return done("unhealthy")
    if summary is not None and summary.lower() == "limited capacity":
        reasons.append("Health Summary Limited Capacity")
    reasons.extend(bad_d)
    label = parse_clique_label(clique_label) if clique_label else None
    if label and uuid and clique and label != (uuid.lower(), clique):
        reasons.append(f"node label nvidia.com/gpu.clique={clique_label} but the GPU reports {uuid}.{clique}")
    if reasons:
        return done("degraded")
    if summary is None or summary.lower() != "healthy":
        reasons.append("joined; fabric health not reported by this driver")
    else:
        reasons.append("joined, Health Summary Healthy")
    return done("joined")


def _keys(row: Any) -> set[str]:
    try:
        return set(row.keys())
    except AttributeError:
        return set()


def gpu_findings(
    smi: pd.DataFrame | None, node: str, gpu: str | None = None, clique_label: str | None = None
) -> list[Finding]:
    """Findings for the GPUs of one node's ``nvidia-smi -q`` frame whose fabric verdict is unhealthy, not joined or
    degraded (only ``gpu`` when given); a joined, not-applicable or unread fabric gives none."""
    out = []
    if smi is None or not len(smi):
        return out
    for pos, r in enumerate(smi.to_dict("records")):
        idx = r.get("index")
        g = str(int(idx)) if idx is not None and idx == idx else str(pos)
        if gpu is not None and g != str(gpu):
            continue
        v = verdict(r, clique_label=clique_label)
        if v.verdict not in ("unhealthy", "not_joined", "degraded"):
            continue
        row = verdict_row(v.verdict)
        out.append(
            Finding(
                v.severity,
                f"NVLink fabric {v.verdict.replace('_', ' ')} on {node} GPU {g}: {'; '.join(v.reasons)}",
                summary=row["meaning"],
                sop_step=v.sop,
                escalation=v.escalation,
                evidence=[
                    f"nvidia-smi -q Fabric: State {r.get('fabric_state')}, Status {r.get('fabric_status')}, "
                    f"CliqueId {r.get('fabric_clique_id')}, ClusterUUID {r.get('fabric_cluster_uuid')}, "
                    f"Health Summary {r.get('fabric_health_summary')}",
                    f"source: {v.source}",
                ],
                category="nvlink_domain",
                node=node,
                gpu=g,
                data={"verdict": v.verdict, "clique": v.clique},
            )
        )
    return out
