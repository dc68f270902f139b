"""SOP rows and the commands printed from them: ``gpulib/data/xid/xid_sop.csv`` rows filled with the node, the GPU
and the pods on it (who was hit, from DCGM's pod labels or the pod list, with their owners).

Every value that lands in a printed command is shell-quoted (:func:`gpulib.core.validate.shell_quote`). Pods of a
Deployment/StatefulSet are stopped by scaling the owner (a deleted pod is re-created at once by its controller and
can take the GPU again: https://kubernetes.io/docs/concepts/workloads/controllers/deployment/), other pods deleted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from gpulib.core.knowledge import load_table
from gpulib.core.nodecmd import expand
from gpulib.core.validate import command, shell_quote
from gpulib.kube.device_health import device_health_frame, not_healthy


@lru_cache(maxsize=1)
def _sop_table() -> dict[str, dict[str, Any]]:
    t = load_table("xid_sop")
    return {r["key"]: r for r in t.to_dict("records")}


def sop(key: str) -> dict[str, Any]:
    """The SOP row (verdict, severity, sop_step, commands list, escalation) for a bucket or memory rule."""
    row = dict(_sop_table().get(key) or _sop_table()["CONTACT_SUPPORT"])
    cmds = [c.strip() for c in str(row["commands"]).split(";;") if c.strip()]
    if key != "GPU_RESET_STEPS" and "{reset_gpu}" in cmds:  # the shared reset procedure, expanded in place
        i = cmds.index("{reset_gpu}")
        cmds[i : i + 1] = sop("GPU_RESET_STEPS")["commands"]
    row["commands"] = cmds
    return row


def _col(df: pd.DataFrame, name: str) -> list[Any]:
    """``df[name]`` as a list with NaN as None (None throughout when the column is absent)."""
    if name not in df.columns:
        return [None] * len(df)
    return [None if pd.isna(v) else v for v in df[name].tolist()]


@dataclass
class PodIndex:
    """What :func:`pod_impact` reads, built once per node (:func:`pod_index`) rather than once per GPU: the distinct
    pod-labelled DCGM rows of the node (``namespace``, ``pod``, ``gpu``, ``uuid``, in first-seen order), each pod's
    owner and the pods each owner runs on all nodes."""

    labelled: list[dict[str, str]]
    owners: dict[tuple[str, str], tuple[str, str]]
    owner_pods: dict[tuple[str, str, str], int]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT or v is pd.NA


def _labelled_rows(df: pd.DataFrame, node: str, cols: list[str]) -> list[dict[str, Any]]:
    """The distinct ``cols`` of ``node``'s rows that name a pod, first occurrence kept and missing values equal (as
    ``drop_duplicates`` has it), found in plain Python: a SERIES frame repeats its labels once per sample."""
    seen: dict[tuple, tuple] = {}
    rows = dict.fromkeys(zip(df["node"].tolist(), df["pod"].tolist(), *(df[c].tolist() for c in cols)))
    for node_v, pod_v, *vals in rows:
        if node_v != node or _missing(pod_v) or str(pod_v) == "":
            continue
        seen.setdefault(tuple(None if _missing(v) else v for v in vals), tuple(vals))
    return [dict(zip(cols, vals)) for vals in seen.values()]


def pod_index(node: str, pods: pd.DataFrame | None, dcgm: dict[str, pd.DataFrame] | None) -> PodIndex:
    labelled: list[dict[str, str]] = []
    for df in (dcgm or {}).values():
        if df is None or len(df) == 0 or "pod" not in df.columns:
            continue
        cols = [c for c in ("namespace", "pod", "gpu", "uuid") if c in df.columns]
        for r in _labelled_rows(df, node, cols):
            labelled.append(
                {
                    "namespace": str(r["namespace"]),
                    "pod": str(r["pod"]),
                    "gpu": str(r["gpu"]),
                    "uuid": r.get("uuid"),
                }
            )
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    counts: dict[tuple[str, str, str], int] = {}
    if pods is not None and len(pods):
        cols = [_col(pods, c) for c in ("namespace", "pod", "owner_kind", "owner_name")]
        for ns, pod, kind, name in zip(*cols):
            owners[(str(ns), str(pod))] = (kind or "", name or "")
            k = (str(ns), str(kind or ""), str(name or ""))
            counts[k] = counts.get(k, 0) + 1
    return PodIndex(labelled, owners, counts)


POD_IMPACT_COLUMNS = [
    "namespace",
    "pod",
    "owner_kind",
    "owner_name",
    "gpu",
    "matched_by",
    "owner_pods",
    # what kubelet says of the pod's device (KEP-4680 allocatedResourcesStatus, gpulib.kube.device_health): "" when
    # it says nothing, else "<health>" and its message
    "device_health",
]


def _dra_holders(node: str, gpu: str | None, uuid: str | None, pods: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Pods whose ResourceClaim holds the GPU (``dra_devices`` of :func:`gpulib.kube.dra.attach_pods`), matched by
    UUID (a MIG device by its parent's), or every DRA-holding pod of the node when no GPU is asked for."""
    if pods is None or not len(pods) or "dra_devices" not in pods:
        return []
    out = []
    for r in pods[pods["node"] == node].to_dict("records"):
        for d in r.get("dra_devices") or []:
            hit = gpu is None or (uuid and uuid in (d["uuid"], d["parent_uuid"])) or (d["gpu"] and d["gpu"] == gpu)
            if hit:
                out.append({**r, "gpu": "" if gpu is None else str(gpu), "claim": d["claim"], "device": d["device"]})
                break
    return out


def _device_health_note(pods: pd.DataFrame | None, node: str, gpu: str | None, uuid: str | None) -> dict:
    """(namespace, pod) -> "<health>: <message>" for the pods kubelet reports a not-Healthy device of on this GPU."""
    if pods is None or not len(pods) or "device_health" not in pods:
        return {}
    bad = not_healthy(device_health_frame(pods[pods["node"] == node]), node)
    out: dict[tuple[str, str], str] = {}
    for r in bad.to_dict("records"):
        if gpu is not None and not ((uuid and r["uuid"] == uuid) or (r["gpu"] and r["gpu"] == str(gpu))):
            continue
        note = r["health"] + (f": {r['message']}" if r["message"] else "") + f" (kubelet, {r['resource']})"
        out.setdefault((r["namespace"], r["pod"]), note)
    return out


def pod_impact(
    node: str,
    gpu: str | None = None,
    *,
    pods: pd.DataFrame | None = None,
    dcgm: dict[str, pd.DataFrame] | None = None,
    uuid: str | None = None,
    index: PodIndex | None = None,
) -> pd.DataFrame:
    """Pods that were on the affected GPU: first by DCGM's pod/namespace labels on that GPU (exact),
    then every GPU pod of the node from the cluster's pod list (when the GPU is not known exactly).
    ``index``: :func:`pod_index` of the same node, pods and frames, when the caller asks for several GPUs."""
    index = index or pod_index(node, pods, dcgm)
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for r in index.labelled:
        if gpu is not None and not (r["gpu"] == str(gpu) or (uuid and r["uuid"] == uuid)):
            continue
        key = (r["namespace"], r["pod"])
        if key not in seen:
            seen.add(key)
            kind, name = index.owners.get(key, ("", ""))
            rows.append(
                {
                    "namespace": key[0],
                    "pod": key[1],
                    "owner_kind": kind,
                    "owner_name": name,
                    "gpu": r["gpu"],
                    "matched_by": "DCGM pod label on the GPU",
                }
            )
    for r in _dra_holders(node, gpu, uuid, pods) if not rows else []:
        rows.append(
            {
                "namespace": r["namespace"],
                "pod": r["pod"],
                "owner_kind": r.get("owner_kind") or "",
                "owner_name": r.get("owner_name") or "",
                "gpu": r["gpu"],
                "matched_by": f"DRA ResourceClaim {r['namespace']}/{r['claim']} (device {r['device']})",
            }
        )
    if pods is not None and len(pods) and not rows:
        sel = pods[pods["node"] == node]
        gpu_req = pd.to_numeric(sel.get("gpu_request", pd.Series(0, index=sel.index)), errors="coerce").fillna(0)
        mig = sel.get("mig_requests", pd.Series([{}] * len(sel), index=sel.index)).map(
            lambda d: bool(d) if isinstance(d, dict) else False
        )
        active = sel.get("phase", pd.Series("Running", index=sel.index)).isin(["Running", "Pending"])
        for r in sel[((gpu_req > 0) | mig) & active].to_dict("records"):
            rows.append(
                {
                    "namespace": r["namespace"],
                    "pod": r["pod"],
                    "owner_kind": r.get("owner_kind") or "",
                    "owner_name": r.get("owner_name") or "",
                    "gpu": "",
                    "matched_by": "GPU pod on the node (pod list; GPU not pinned)",
                }
            )
    counts = index.owner_pods
    health = _device_health_note(pods, node, gpu, uuid)
    for r in rows:  # pods the owner runs now (all nodes): what scaling it back restores
        r["owner_pods"] = counts.get((r["namespace"], r["owner_kind"], r["owner_name"]), 1) if r["owner_name"] else 1
        r["device_health"] = health.get((r["namespace"], r["pod"]), "")
    return pd.DataFrame(rows, columns=POD_IMPACT_COLUMNS)


#: owner kinds whose pods come back when deleted: stop them by scaling the owner (kubectl resource name)
_SCALABLE = {"Deployment": "deployment", "StatefulSet": "statefulset", "ReplicaSet": "replicaset"}


def _workload_commands(key: str, impact: pd.DataFrame, node: str) -> list[str]:
    """``{stop_workload}`` / ``{resume_workload}`` / ``{restart_workload}`` for the pods on the GPU.

    A Deployment/StatefulSet pod that is deleted is re-created at once and can land on the same GPU again, so it
    is stopped by scaling its owner to 0 (and scaled back to the pods it runs now) and restarted with
    ``kubectl rollout restart``; pods of other owners (Jobs, training operators) or bare pods are deleted.
    """
    if not len(impact):
        return [command("kubectl", "get", "pods", "-A", "-o", "wide", f"--field-selector=spec.nodeName={node}")]
    out: list[str] = []
    for r in impact.head(5).to_dict("records"):
        ns, pod, kind, name = r["namespace"], r["pod"], r.get("owner_kind") or "", r.get("owner_name") or ""
        res = _SCALABLE.get(kind)
        if res and name:
            obj = f"{res}/{name}"
            if key == "stop_workload":
                out.append(
                    command("kubectl", "-n", ns, "scale", obj, "--replicas=0")
                    + (
                        f"   # {kind} {name} would re-create a deleted pod; it runs "
                        f"{int(r.get('owner_pods') or 1)} pod(s) now"
                    )
                )
            elif key == "resume_workload":
                out.append(command("kubectl", "-n", ns, "scale", obj, f"--replicas={int(r.get('owner_pods') or 1)}"))
            else:
                out.append(command("kubectl", "-n", ns, "rollout", "restart", obj))
        elif key != "resume_workload":
            note = (
                f"   # its {kind} {name} starts a new pod"
                if kind and name
                else "   # a bare pod: re-create it from its manifest"
            )
            out.append(command("kubectl", "-n", ns, "delete", "pod", pod) + note)
    return out


def fill_commands(cmds: list[str], node: str, gpu: str | None, impact: pd.DataFrame) -> list[str]:
    """Commands of an SOP row with the node, GPU and pods filled in; every value is shell-quoted
    (:func:`gpulib.core.validate.shell_quote`); :func:`sop` has already expanded ``{reset_gpu}``. A line that runs on
the node (``@node``/``@driver``) becomes its ``kubectl debug`` line (:func:`gpulib.core.nodecmd.expand`)."""
    out: list[str] = []
    g = shell_quote(gpu) if gpu not in (None, "") else "<gpu>"
    n = shell_quote(node)
    for c in cmds:
        key = c.strip().strip("{}")
        if c.strip() in ("{stop_workload}", "{resume_workload}", "{restart_workload}"):
            out += _workload_commands(key, impact, node)
        elif "{pod}" in c or "{namespace}" in c:
            if len(impact):
                for r in impact.head(5).to_dict("records"):
                    out.append(
                        c.format(node=n, gpu=g, namespace=shell_quote(r["namespace"]), pod=shell_quote(r["pod"]))
                    )
            else:
                out.append(
                    command("kubectl", "get", "pods", "-A", "-o", "wide", f"--field-selector=spec.nodeName={node}")
                )
        else:
            out.append(expand(c.format(node=n, gpu=g), node))
    return list(dict.fromkeys(out))


def impact_evidence(impact: pd.DataFrame) -> list[str]:
    if not len(impact):
        return ["no pod found on this GPU (pod list and DCGM pod labels checked)"]
    names = [
        f"{r['namespace']}/{r['pod']}"
        + (f" ({r['owner_kind']} {r['owner_name']})" if r["owner_kind"] else "")
        + (f" [device {r['device_health']}]" if r.get("device_health") else "")
        for r in impact.to_dict("records")
    ]
    return [f"pods hit ({impact['matched_by'].iloc[0]}): " + ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")]
