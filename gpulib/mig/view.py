"""What the MIG sizing runbook shows: per-GPU instance frames (current and proposed), slot diagrams
(plotly shapes, memory slots x GPUs), memory headroom per instance, and GPUs/$ against whole-GPU placement.

The decisions live in :mod:`gpulib.mig.catalog` and :mod:`gpulib.mig.geometry` (profiles, placement),
:mod:`gpulib.mig.findings` (SOP) and :mod:`gpulib.mig.plan` (sizing, planner); this module only turns their results
into tables and figures.

Frames here share ``LAYOUT_COLUMNS``: one row per box on the diagram (a MIG instance, or a whole GPU).
"""
from __future__ import annotations

import html
import math
from collections import defaultdict

import pandas as pd

import gpulib.mig as mig
import gpulib.mig.catalog as mig_catalog
from gpulib.core.errors import InvalidParameter, UnknownNode
from gpulib.mig.plan import Plan

LAYOUT_COLUMNS = ["node", "gpu", "row", "model", "profile", "start", "size", "slots", "memory_gib", "workload",
                  "need_gib", "headroom_gib", "where"]

#: box colours: a used instance, an empty one, a whole GPU
_COLOURS = {"used": "#4c78a8", "idle": "#d8dde6", "whole": "#f58518", "whole_idle": "#f3d3b4"}


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
            raise UnknownNode(f"node={node!r} is not a GPU node of this source; known: {', '.join(sorted(nodes['node']))}")
        return sel
    sel = nodes[[_mig_capable_product(p) for p in nodes["gpu_product"]]]
    if gpu_model:
        want = mig.resolve_gpu_model(gpu_model)
        sel = sel[[mig.resolve_gpu_model(str(p)) == want for p in sel["gpu_product"]]]
    return sel


def inventory_for(nodes: pd.DataFrame, model: str, replicas: int) -> tuple[dict[str, int], dict[str, list[str]], int]:
    """Planner inventory for ``model``: the selected nodes' GPUs when they are that model (at least ``replicas``
    GPUs, so nothing is left unplaced for lack of hardware), with their node names and GPUs per node."""
    same = nodes[[_mig_capable_product(p) and mig.resolve_gpu_model(str(p)) == model for p in nodes["gpu_product"]]]
    have = int(pd.to_numeric(same["gpu_count"], errors="coerce").fillna(0).sum())
    per_node = int(pd.to_numeric(same["gpu_count"], errors="coerce").fillna(0).max()) if not same.empty else 0
    return {model: max(have, int(replicas), 1)}, {model: list(same["node"])}, per_node or 8


def _mig_capable_product(product) -> bool:
    try:
        return mig.is_mig_capable(str(product))
    except InvalidParameter:
        return False


def target_model(gpu_model: str, nodes: pd.DataFrame) -> str:
    """Catalog GPU model to plan for: ``gpu_model`` when given, else the (single) model of ``nodes``.
    Raises :class:`gpulib.mig.catalog.UnknownGPUModel` for an unknown or non-MIG model."""
    if gpu_model:
        model = mig.resolve_gpu_model(gpu_model)
    else:
        models = sorted({mig.resolve_gpu_model(str(p)) for p in nodes["gpu_product"] if not _blank(p)})
        if len(models) != 1:
            raise InvalidParameter(f"gpu_model is empty and the selected nodes have {len(models)} GPU models "
                                   f"({', '.join(models) or 'none'}); set gpu_model or node")
        model = models[0]
    if not mig.is_mig_capable(model):
        raise mig.UnknownGPUModel(f"GPU model {model} does not support MIG",
                                  hint="size it with time-slicing or MPS instead: gpulib.mig.sharing.recommend")
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
    fb = fb if fb is not None else pd.DataFrame(columns=["node", "gpu", "gpu_i_profile", "gpu_i_id", "pod", "namespace", "value"])
    rows = []
    for _, nrow in nodes.iterrows():
        name = str(nrow["node"])
        try:
            model = mig.resolve_gpu_model(str(nrow["gpu_product"]))
        except InvalidParameter:
            model = str(nrow["gpu_product"])
        capable = _mig_capable_product(model)
        slots = mig_catalog.slot_geometry(model)[0] if capable else 8
        whole_gib = float(nrow.get("gpu_memory_mib") or 0) / 1024
        on = fb[fb["node"] == name]
        by_label = _node_layout_from_resources(nrow) if capable else {}
        for g in range(int(nrow.get("gpu_count") or 0)):
            here = on[on["gpu"].astype(str) == str(g)]
            inst = here.loc[~here["gpu_i_profile"].map(_blank).astype(bool)].sort_values("gpu_i_id", key=lambda s: pd.to_numeric(s, errors="coerce"))
            row_id = f"{name}/{g}"
            if capable and (not inst.empty or by_label):
                wanted = list(inst["gpu_i_profile"]) if not inst.empty else [p for p, c in by_label.items() for _ in range(c)]
                p = mig.place(model, wanted)
                if not p.fits:
                    raise InvalidParameter(f"{row_id}: reported MIG instances {wanted} do not fit a {model}: {p.reason}")
                users = defaultdict(list)
                for r in inst.itertuples():
                    users[r.gpu_i_profile].append((r.pod, r.namespace, float(r.value) / 1024))
                for i in p.instances:
                    pod, ns, used = users[i.profile].pop(0) if users[i.profile] else ("", "", float("nan"))
                    rows.append(_row(name, g, row_id, model, i.profile, i.start, i.size, slots, i.memory_gib,
                                     _who(ns, pod), float("nan"), float("nan"),
                                     "DCGM GPU_I_PROFILE" if not inst.empty else "node nvidia.com/mig-* resources",
                                     used=used))
            else:
                pod = here.loc[~here["pod"].map(_blank).astype(bool)]
                who = _who(pod["namespace"].iloc[0], pod["pod"].iloc[0]) if not pod.empty else ""
                used = float(here["value"].max()) / 1024 if not here.empty else float("nan")
                rows.append(_row(name, g, row_id, model, "whole GPU", 0, slots, slots, whole_gib, who,
                                 float("nan"), float("nan"), "whole GPU (MIG off)", used=used))
    df = pd.DataFrame(rows, columns=LAYOUT_COLUMNS + ["used_gib"])
    return df


def _who(ns, pod) -> str:
    return "" if _blank(pod) else (f"{ns}/{pod}" if not _blank(ns) else str(pod))


def _row(node, gpu, row, model, profile, start, size, slots, mem, workload, need, headroom, where, used=float("nan")):
    return {"node": node, "gpu": str(gpu), "row": row, "model": model, "profile": profile, "start": int(start),
            "size": int(size), "slots": int(slots), "memory_gib": float(mem), "workload": workload,
            "need_gib": need, "headroom_gib": headroom, "where": where, "used_gib": used}


# --------------------------------------------------------------------------------------------------
# proposed layout
# --------------------------------------------------------------------------------------------------
def proposed_layout(plan: Plan, needs: dict[str, float] | None = None) -> pd.DataFrame:
    """The plan's instances (LAYOUT_COLUMNS) with memory headroom per instance (profile memory - need);
    whole-GPU workloads are appended as full-width boxes."""
    needs = needs or {}
    rows = []
    for g in plan.gpus:
        slots = mig_catalog.slot_geometry(g.model)[0]
        for i in g.instances:
            mem = mig.get_profile(g.model, i["profile"]).memory_gib
            need = float(needs.get(i["workload"], float("nan")))
            rows.append(_row(g.node, g.index, f"{g.node}/{g.index}", g.model, i["profile"], i["start"], i["size"], slots,
                             mem, i["workload"], need, mem - need, "plan"))
    for w in plan.whole_gpus:
        need = float(needs.get(w["workload"], float("nan")))
        for k in range(int(w["gpus"])):
            rows.append(_row("whole GPUs", k, f"whole/{w['workload']}#{k}", "", "whole GPU", 0, 8, 8, float("nan"),
                             w["workload"], need, float("nan"), "plan (whole GPU)"))
    return pd.DataFrame(rows, columns=LAYOUT_COLUMNS)


def headroom_table(layout: pd.DataFrame) -> pd.DataFrame:
    """Used instances of a proposed layout with need, instance memory and headroom (GiB and % of the instance)."""
    t = layout[layout["workload"] != ""][["row", "profile", "workload", "need_gib", "memory_gib", "headroom_gib"]].copy()
    t["headroom_pct"] = (t["headroom_gib"] / t["memory_gib"] * 100).round(1)
    for c in ("need_gib", "memory_gib", "headroom_gib"):
        t[c] = t[c].round(2)
    return t.rename(columns={"row": "gpu"}).reset_index(drop=True)


# --------------------------------------------------------------------------------------------------
# savings
# --------------------------------------------------------------------------------------------------
def gpu_price(gpu_model: str, pricing: str = "on_demand") -> float:
    """$/GPU-hour of a MIG catalog model from :func:`gpulib.cost.analysis.price_table` (NaN when not priced)."""
    from gpulib.cost import canonical_model, price_table

    key = canonical_model(gpu_model) or gpu_model
    table = price_table()
    return float(table.loc[key, pricing]) if key in table.index else float("nan")


def savings(plan: Plan, gpu_model: str, current_gpus: int | None = None) -> pd.DataFrame:
    """GPUs and on-demand $ per hour / month for: whole-GPU placement (one GPU per replica), the current state
    (GPUs holding the sized workloads now, when known) and the proposed MIG plan."""
    from gpulib.cost import cost_policy

    price = gpu_price(gpu_model)
    month = cost_policy("hours_per_month")
    rows = [("whole GPU per replica", plan.baseline_gpus)]
    if current_gpus is not None:
        rows.append(("current", int(current_gpus)))
    rows.append(("proposed MIG plan", plan.gpus_used))
    df = pd.DataFrame(rows, columns=["placement", "gpus"])
    df["usd_per_hour"] = df["gpus"] * price
    df["usd_per_month"] = df["usd_per_hour"] * month
    df["gpus_saved_vs_whole"] = plan.baseline_gpus - df["gpus"]
    df["usd_saved_per_month_vs_whole"] = df["gpus_saved_vs_whole"] * price * month
    df.attrs["price_per_gpu_hour"] = price
    return df


def current_gpus_for(current: pd.DataFrame, workloads: list[str]) -> int:
    """Distinct GPUs of the current layout that hold any of ``workloads``."""
    held = current[current["workload"].isin(set(workloads))]
    return int(held["row"].nunique())


def pod_requests_table(plan: Plan) -> pd.DataFrame:
    """One row per workload: its ``resources.limits`` under the mixed and the single strategy."""
    mixed, single = plan.pod_requests("mixed"), plan.pod_requests("single")
    rows = []
    for w in mixed:
        s = single.get(w, {})
        rows.append({"workload": w, "mixed": _limits(mixed[w]),
                     "single": s.get("error") or _limits(s)})
    return pd.DataFrame(rows, columns=["workload", "mixed", "single"])


def _limits(res: dict) -> str:
    lim = res.get("limits", {}) if isinstance(res, dict) else {}
    return ", ".join(f"{k}: {v}" for k, v in lim.items())


# --------------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------------
def slot_diagram(layout: pd.DataFrame, title: str):
    """Slot diagram: one row per GPU, x = memory slots, a box per instance labelled with profile and workload.

    Filled boxes hold a workload, pale ones are empty instances; orange boxes are whole GPUs (MIG off).
    """
    import plotly.graph_objects as go

    fig = go.Figure()
    rows = list(dict.fromkeys(layout["row"]))
    ypos = {r: len(rows) - 1 - k for k, r in enumerate(rows)}
    xs, ys, hover = [], [], []
    max_slots = int(layout["slots"].max()) if not layout.empty else 8
    for r in layout.itertuples():
        whole = r.profile == "whole GPU"
        kind = ("whole" if whole else "used") if r.workload else ("whole_idle" if whole else "idle")
        y = ypos[r.row]
        x0, x1 = r.start, r.start + r.size
        fig.add_shape(type="rect", x0=x0 + 0.04, x1=x1 - 0.04, y0=y - 0.4, y1=y + 0.4,
                      line={"color": "#333", "width": 1}, fillcolor=_COLOURS[kind], layer="above")
        short = r.workload.split("/")[-1] if r.workload else "(empty)"
        if len(short) > 4 * r.size + 6:
            short = short[: 4 * r.size + 4] + "…"
        fig.add_annotation(x=(x0 + x1) / 2, y=y, text=f"<b>{html.escape(r.profile)}</b><br>{html.escape(short)}",
                           showarrow=False, font={"size": 10, "color": "white" if kind in ("used", "whole") else "#222"})
        xs.append((x0 + x1) / 2), ys.append(y)
        extra = ""
        used = getattr(r, "used_gib", float("nan"))
        if not _blank(used):
            extra += f"<br>FB_USED max {used:.1f} GiB"
        if not _blank(r.need_gib):
            extra += f"<br>need {r.need_gib:.1f} GiB, headroom {r.headroom_gib:.1f} GiB"
        mem = "" if _blank(r.memory_gib) else f" ({r.memory_gib:g} GiB)"
        hover.append(f"{html.escape(r.row)} · {html.escape(r.profile)}{mem}<br>slots {x0}–{x1 - 1}"
                     f"<br>{html.escape(r.workload or 'empty')}{extra}<br><i>{html.escape(r.where)}</i>")
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", marker={"opacity": 0, "size": 20}, hovertext=hover,
                             hoverinfo="text", showlegend=False))
    fig.update_layout(title=title, height=120 + 46 * max(len(rows), 1), margin={"l": 150, "r": 20, "t": 60, "b": 50},
                      plot_bgcolor="white")
    fig.update_xaxes(title="memory slot (1/8 of GPU memory; 1/4 on A30)", range=[0, max_slots], dtick=1,
                     showgrid=True, gridcolor="#eee", zeroline=False)
    fig.update_yaxes(title="GPU (node/index)", tickvals=list(ypos.values()), ticktext=list(ypos.keys()),
                     range=[-0.6, len(rows) - 0.4], zeroline=False)
    return fig


def savings_chart(sv: pd.DataFrame):
    """Bar chart of GPUs per placement, $/month in the hover."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=sv["placement"], y=sv["gpus"], text=sv["gpus"], textposition="auto",
                           hovertext=[f"${v:,.0f}/month" if not _blank(v) else "no price" for v in sv["usd_per_month"]],
                           marker_color=["#999", "#f58518", "#4c78a8"][-len(sv):] if len(sv) <= 3 else None))
    price = sv.attrs.get("price_per_gpu_hour", float("nan"))
    sub = f" (on-demand ${price:.2f}/GPU-hour)" if not _blank(price) else " (no price for this GPU in the price table)"
    fig.update_layout(title="GPUs needed for the sized workloads" + sub, height=360)
    fig.update_xaxes(title="placement")
    fig.update_yaxes(title="GPUs (count)")
    return fig
