"""What the MIG sizing runbook shows: the proposed per-GPU instance frame, slot diagrams (plotly shapes, memory slots
x GPUs), memory headroom per instance, pod requests per strategy, and GPUs/$ against whole-GPU placement.

No decisions here: the nodes, the GPU model and today's layout are :mod:`gpulib.mig.inventory`, profiles and
placement :mod:`gpulib.mig.catalog` and :mod:`gpulib.mig.geometry`, sizing and planning :mod:`gpulib.mig.sizing` and
:mod:`gpulib.mig.plan`, the savings :mod:`gpulib.mig.plan_cost`, the SOP :mod:`gpulib.mig.findings`; this module
only turns their results into tables and figures.

Frames here share :data:`gpulib.mig.inventory.LAYOUT_COLUMNS`: one row per box on the diagram (a MIG instance, or a
whole GPU).
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from gpulib.core.money import money
from gpulib.mig.catalog import get_profile, slot_geometry
from gpulib.mig.inventory import LAYOUT_COLUMNS, _blank, _row
from gpulib.mig.plan import Plan

__all__ = [
    "proposed_layout",
    "headroom_table",
    "pod_requests_table",
    "slot_diagram",
    "savings_chart",
    "show_current",
    "show_usage",
    "show_proposed",
    "show_configs_in_use",
    "show_config",
    "show_change",
    "show_change_dry_run",
]

#: box colours: a used instance, an empty one, a whole GPU
_COLOURS = {"used": "#4c78a8", "idle": "#d8dde6", "whole": "#f58518", "whole_idle": "#f3d3b4"}


# --------------------------------------------------------------------------------------------------
# proposed layout
# --------------------------------------------------------------------------------------------------
def proposed_layout(plan: Plan, needs: dict[str, float] | None = None) -> pd.DataFrame:
    """The plan's instances (LAYOUT_COLUMNS) with memory headroom per instance (profile memory - need);
    whole-GPU workloads are appended as full-width boxes."""
    needs = needs or {}
    rows = []
    for g in plan.gpus:
        slots = slot_geometry(g.model)[0]
        for i in g.instances:
            mem = get_profile(g.model, i["profile"]).memory_gib
            need = float(needs.get(i["workload"], float("nan")))
            rows.append(
                _row(
                    g.node,
                    g.index,
                    f"{g.node}/{g.index}",
                    g.model,
                    i["profile"],
                    i["start"],
                    i["size"],
                    slots,
                    mem,
                    i["workload"],
                    need,
                    mem - need,
                    "plan",
                )
            )
    for w in plan.whole_gpus:
        need = float(needs.get(w["workload"], float("nan")))
        for k in range(int(w["gpus"])):
            rows.append(
                _row(
                    "whole GPUs",
                    k,
                    f"whole/{w['workload']}#{k}",
                    "",
                    "whole GPU",
                    0,
                    8,
                    8,
                    float("nan"),
                    w["workload"],
                    need,
                    float("nan"),
                    "plan (whole GPU)",
                )
            )
    return pd.DataFrame(rows, columns=LAYOUT_COLUMNS)


def headroom_table(layout: pd.DataFrame) -> pd.DataFrame:
    """Used instances of a proposed layout with need, instance memory and headroom (GiB and % of the instance)."""
    t = layout[layout["workload"] != ""][
        ["row", "profile", "workload", "need_gib", "memory_gib", "headroom_gib"]
    ].copy()
    t["headroom_pct"] = (t["headroom_gib"] / t["memory_gib"] * 100).round(1)
    for c in ("need_gib", "memory_gib", "headroom_gib"):
        t[c] = t[c].round(2)
    return t.rename(columns={"row": "gpu"}).reset_index(drop=True)


def pod_requests_table(plan: Plan) -> pd.DataFrame:
    """One row per workload: its ``resources.limits`` under the mixed and the single strategy."""
    mixed, single = plan.pod_requests("mixed"), plan.pod_requests("single")
    rows = []
    for w in mixed:
        s = single.get(w, {})
        rows.append({"workload": w, "mixed": _limits(mixed[w]), "single": s.get("error") or _limits(s)})
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
        fig.add_shape(
            type="rect",
            x0=x0 + 0.04,
            x1=x1 - 0.04,
            y0=y - 0.4,
            y1=y + 0.4,
            line={"color": "#333", "width": 1},
            fillcolor=_COLOURS[kind],
            layer="above",
        )
        short = r.workload.split("/")[-1] if r.workload else "(empty)"
        if len(short) > 4 * r.size + 6:
            short = short[: 4 * r.size + 4] + "…"
        fig.add_annotation(
            x=(x0 + x1) / 2,
            y=y,
            text=f"<b>{html.escape(r.profile)}</b><br>{html.escape(short)}",
            showarrow=False,
            font={"size": 10, "color": "white" if kind in ("used", "whole") else "#222"},
        )
        xs.append((x0 + x1) / 2), ys.append(y)
        extra = ""
        used = getattr(r, "used_gib", float("nan"))
        if not _blank(used):
            extra += f"<br>FB_USED max {used:.1f} GiB"
        if not _blank(r.need_gib):
            extra += f"<br>need {r.need_gib:.1f} GiB, headroom {r.headroom_gib:.1f} GiB"
        mem = "" if _blank(r.memory_gib) else f" ({r.memory_gib:g} GiB)"
        hover.append(
            f"{html.escape(r.row)} · {html.escape(r.profile)}{mem}<br>slots {x0}–{x1 - 1}"
            f"<br>{html.escape(r.workload or 'empty')}{extra}<br><i>{html.escape(r.where)}</i>"
        )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            marker={"opacity": 0, "size": 20},
            hovertext=hover,
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.update_layout(
        title=title,
        height=120 + 46 * max(len(rows), 1),
        margin={"l": 150, "r": 20, "t": 60, "b": 50},
        plot_bgcolor="white",
    )
    fig.update_xaxes(
        title="memory slot (1/8 of GPU memory; 1/4 on A30)",
        range=[0, max_slots],
        dtick=1,
        showgrid=True,
        gridcolor="#eee",
        zeroline=False,
    )
    fig.update_yaxes(
        title="GPU (node/index)",
        tickvals=list(ypos.values()),
        ticktext=list(ypos.keys()),
        range=[-0.6, len(rows) - 0.4],
        zeroline=False,
    )
    return fig


def savings_chart(sv: pd.DataFrame):
    """Bar chart of GPUs per placement, USD/month in the hover."""
    fig = go.Figure(
        go.Bar(
            x=sv["placement"],
            y=sv["gpus"],
            text=sv["gpus"],
            textposition="auto",
            hovertext=[f"{money(v, 'USD')}/month" if not _blank(v) else "no price" for v in sv["usd_per_month"]],
            marker_color=["#999", "#f58518", "#4c78a8"][-len(sv) :] if len(sv) <= 3 else None,
        )
    )
    price = sv.attrs.get("price_per_gpu_hour", float("nan"))
    sub = (
        f" (on-demand {money(price, 'USD')}/GPU-hour)"
        if not _blank(price)
        else " (no price for this GPU in the price table)"
    )
    fig.update_layout(title="GPUs needed for the sized workloads" + sub, height=360)
    fig.update_xaxes(title="placement")
    fig.update_yaxes(title="GPUs (count)")
    return fig


# ------------------------------------------------------------------------------------ the runbook's sections
def show_current(c, ui) -> None:
    ui.display(c.lay.node_table())
    ui.show(c.lay.diagram())


def show_usage(c, ui) -> None:
    for text, level in c.use.notes:
        ui.note(text, level)
    if c.use.table is not None:
        ui.display(c.use.table)


def show_proposed(c, ui) -> None:
    from IPython.display import Markdown

    ui.show(c.prop.diagram())
    ui.display(Markdown("**Memory headroom per instance** (instance memory − need, GiB)"))
    ui.display(c.prop.headroom_table())
    ui.display(c.prop.savings.round(2))
    ui.show(c.prop.savings_chart())


def show_configs_in_use(c, ui) -> None:
    """Where the base config came from (a step of its own: shown also when reading the ConfigMap failed)."""
    if c.base is not None:
        ui.note(*c.base.note())


def show_config(c, ui) -> None:
    if c.base is None:
        return
    ui.note(
        "The config keeps every config of the base above and adds the plan's; every node's "
        "nvidia.com/mig.config label still resolves.",
        "info",
    )
    if c.problems:
        ui.note("Generated config failed validation: " + "; ".join(c.problems), "error")
    ui.print(c.text)
    ui.print("\n".join(c.base.apply_commands()) + "  # with the config above saved as config.yaml")
    ui.print("\n".join(c.plan.label_commands()))
    ui.display(pod_requests_table(c.plan))


def show_change(c, ui) -> None:
    for text, level in c.change.notes:
        ui.note(text, level)


def show_change_dry_run(c, ui) -> None:
    if c.change is None:
        return
    for step in c.change.steps:
        ui.display(step)
