"""What a mig_sizing run sizes and what runs there now: the nodes (``node``, or every node with a MIG-capable GPU),
the GPU model planned for, the planner's inventory of those GPUs, and the MIG layout each GPU runs today (from
dcgm-exporter's ``GPU_I_PROFILE`` labels, else the node's ``nvidia.com/mig-*`` resources).

Layout frames share :data:`LAYOUT_COLUMNS`: one row per box of the slot diagram (a MIG instance, or a whole GPU),
drawn by :mod:`gpulib.mig.view`.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pandas as pd

from gpulib.core.errors import InvalidParameter, UnknownGPUModel, UnknownNode
from gpulib.mig.catalog import is_mig_capable, resolve_gpu_model, slot_geometry
from gpulib.mig.geometry import place

__all__ = ["LAYOUT_COLUMNS", "select_nodes", "target_model", "inventory_for", "current_layout", "current_gpus_for"]

LAYOUT_COLUMNS = [
    "node",
    "gpu",
    "row",
    "model",
    "profile",
    "start",
    "size",
    "slots",
    "memory_gib",
    "workload",
    "need_gib",
    "headroom_gib",
    "where",
]


def _blank(s) -> bool:
    return s is None or (isinstance(s, float) and math.isnan(s)) or str(s) in ("", "nan", "<NA>", "None")


# --------------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------------
def select_nodes(nodes: pd.DataFrame, node: str = "", gpu_model: str = "") -> pd.DataFrame:
    """Rows of ``nodes`` (NODE_COLUMNS) to size: ``node``, or ('' ) every node with a MIG-capable GPU
    (of ``gpu_model`` when given)."""
    if node:
        sel = nodes[nodes["node"] == node]
        if sel.empty:
            raise UnknownNode(
                f"node={node!r} is not a GPU node of this source; known: {', '.join(sorted(nodes['node']))}"
            )
        return sel
    sel = nodes[[_mig_capable_product(p) for p in nodes["gpu_product"]]]
    if gpu_model:
        want = resolve_gpu_model(gpu_model)
        sel = sel[[resolve_gpu_model(str(p)) == want for p in sel["gpu_product"]]]
    return sel


def inventory_for(nodes: pd.DataFrame, model: str, replicas: int) -> tuple[dict[str, int], dict[str, list[str]], int]:
    """Planner inventory for ``model``: the selected nodes' GPUs when they are that model (at least ``replicas``
    GPUs, so nothing is left unplaced for lack of hardware), with their node names and GPUs per node."""
    same = nodes[[_mig_capable_product(p) and resolve_gpu_model(str(p)) == model for p in nodes["gpu_product"]]]
    have = int(pd.to_numeric(same["gpu_count"], errors="coerce").fillna(0).sum())
    per_node = int(pd.to_numeric(same["gpu_count"], errors="coerce").fillna(0).max()) if not same.empty else 0
    return {model: max(have, int(replicas), 1)}, {model: list(same["node"])}, per_node or 8


def _mig_capable_product(product) -> bool:
    try:
        return is_mig_capable(str(product))
    except InvalidParameter:
        return False


def target_model(gpu_model: str, nodes: pd.DataFrame) -> str:
    """Catalog GPU model to plan for: ``gpu_model`` when given, else the (single) model of ``nodes``.
    Raises :class:`gpulib.mig.catalog.UnknownGPUModel` for an unknown or non-MIG model."""
    if gpu_model:
        model = resolve_gpu_model(gpu_model)
    else:
        models = sorted({resolve_gpu_model(str(p)) for p in nodes["gpu_product"] if not _blank(p)})
        if len(models) != 1:
            raise InvalidParameter(
                f"gpu_model is empty and the selected nodes have {len(models)} GPU models "
                f"({', '.join(models) or 'none'}); set gpu_model or node"
            )
        model = models[0]
    if not is_mig_capable(model):
        raise UnknownGPUModel(
            f"GPU model {model} does not support MIG",
            hint="size it with time-slicing or MPS instead: gpulib.mig.sharing.recommend",
        )
    return model


# --------------------------------------------------------------------------------------------------
# current layout
# --------------------------------------------------------------------------------------------------
def _node_layout_from_resources(row: pd.Series) -> dict[str, int]:
    """Per-GPU layout implied by a node's ``nvidia.com/mig-*`` capacity (assumes every GPU is alike)."""
    cap = row.get("mig_capacity") if isinstance(row.get("mig_capacity"), dict) else {}
    n = int(row.get("gpu_count") or 0) or 1
    lay = {}
    for res, count in cap.items():
        prof = str(res).split("nvidia.com/mig-")[-1]
        prof = prof[:-3] + "+me" if prof.endswith(".me") else prof
        if int(count or 0) > 0:
            lay[prof] = max(1, int(count) // n)
    return lay


def current_layout(nodes: pd.DataFrame, fb: pd.DataFrame | None) -> pd.DataFrame:
    """Instances on each GPU of ``nodes`` now (LAYOUT_COLUMNS).

    MIG instances come from the DCGM series' ``GPU_I_PROFILE`` labels (``fb``: a FB_USED SUMMARY frame, max),
    falling back to the node's ``nvidia.com/mig-*`` resources; a GPU without MIG is one whole-GPU box. DCGM does
    not report start slots, so instances are drawn on a valid placement (the real one: ``nvidia-smi mig -lgi``).
    """
    fb = (
        fb
        if fb is not None
        else pd.DataFrame(columns=["node", "gpu", "gpu_i_profile", "gpu_i_id", "pod", "namespace", "value"])
    )
    rows = []
    for _, nrow in nodes.iterrows():
        name = str(nrow["node"])
        try:
            model = resolve_gpu_model(str(nrow["gpu_product"]))
        except InvalidParameter:
            model = str(nrow["gpu_product"])
        capable = _mig_capable_product(model)
        slots = slot_geometry(model)[0] if capable else 8
        whole_gib = float(nrow.get("gpu_memory_mib") or 0) / 1024
        on = fb[fb["node"] == name]
        by_label = _node_layout_from_resources(nrow) if capable else {}
        for g in range(int(nrow.get("gpu_count") or 0)):
            here = on[on["gpu"].astype(str) == str(g)]
            inst = here.loc[~here["gpu_i_profile"].map(_blank).astype(bool)].sort_values(
                "gpu_i_id", key=lambda s: pd.to_numeric(s, errors="coerce")
            )
            row_id = f"{name}/{g}"
            if capable and (not inst.empty or by_label):
                wanted = (
                    list(inst["gpu_i_profile"])
                    if not inst.empty
                    else [p for p, c in by_label.items() for _ in range(c)]
                )
                p = place(model, wanted)
                if not p.fits:
                    raise InvalidParameter(
                        f"{row_id}: reported MIG instances {wanted} do not fit a {model}: {p.reason}"
                    )
                users = defaultdict(list)
                for r in inst.itertuples():
                    users[r.gpu_i_profile].append((r.pod, r.namespace, float(r.value) / 1024))
                for i in p.instances:
                    pod, ns, used = users[i.profile].pop(0) if users[i.profile] else ("", "", float("nan"))
                    rows.append(
                        _row(
                            name,
                            g,
                            row_id,
                            model,
                            i.profile,
                            i.start,
                            i.size,
                            slots,
                            i.memory_gib,
                            _who(ns, pod),
                            float("nan"),
                            float("nan"),
                            "DCGM GPU_I_PROFILE" if not inst.empty else "node nvidia.com/mig-* resources",
                            used=used,
                        )
                    )
            else:
                pod = here.loc[~here["pod"].map(_blank).astype(bool)]
                who = _who(pod["namespace"].iloc[0], pod["pod"].iloc[0]) if not pod.empty else ""
                used = float(here["value"].max()) / 1024 if not here.empty else float("nan")
                rows.append(
                    _row(
                        name,
                        g,
                        row_id,
                        model,
                        "whole GPU",
                        0,
                        slots,
                        slots,
                        whole_gib,
                        who,
                        float("nan"),
                        float("nan"),
                        "whole GPU (MIG off)",
                        used=used,
                    )
                )
    df = pd.DataFrame(rows, columns=LAYOUT_COLUMNS + ["used_gib"])
    return df


def _who(ns, pod) -> str:
    return "" if _blank(pod) else (f"{ns}/{pod}" if not _blank(ns) else str(pod))


def _row(node, gpu, row, model, profile, start, size, slots, mem, workload, need, headroom, where, used=float("nan")):
    return {
        "node": node,
        "gpu": str(gpu),
        "row": row,
        "model": model,
        "profile": profile,
        "start": int(start),
        "size": int(size),
        "slots": int(slots),
        "memory_gib": float(mem),
        "workload": workload,
        "need_gib": need,
        "headroom_gib": headroom,
        "where": where,
        "used_gib": used,
    }


def current_gpus_for(current: pd.DataFrame, workloads: list[str]) -> int:
    """Distinct GPUs of the current layout that hold any of ``workloads``."""
    held = current[current["workload"].isin(set(workloads))]
    return int(held["row"].nunique())
