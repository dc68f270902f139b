"""The tables and charts of ``runbooks/xid_ecc_triage.ipynb``: what the XIDs mean, the ECC and row-remap
counters per GPU, the XID timeline, the memory counters and the temperature and power over the window.

No decision is made here: the verdict is :mod:`gpulib.xid.findings` over :mod:`gpulib.xid.triage`; the inputs are
gathered by :func:`gpulib.xid.steps.collect`.
"""

from __future__ import annotations

import textwrap

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.express.colors import qualitative
from plotly.subplots import make_subplots

import gpulib.xid.triage as triage
from gpulib.core.knowledge import threshold
from gpulib.core.timeutil import parse_window
from gpulib.xid.catalog import lookup
from gpulib.xid.steps import TriageInputs, gpu_map

MEANING_COLUMNS = [
    "xid",
    "mnemonic",
    "category",
    "description",
    "immediate_action",
    "investigatory_action",
    "fatal",
    "dcgm_severity",
]


def meaning_table(codes) -> pd.DataFrame:
    """What each XID code means and NVIDIA's resolution buckets (``gpulib/data/xid/xid_catalog.csv``)."""
    rows = []
    for c in sorted({int(x) for x in codes}):
        rec = lookup(c)
        rows.append(
            {
                "xid": c,
                "mnemonic": rec.mnemonic,
                "category": rec.category,
                "description": rec.description,
                "immediate_action": rec.immediate_action,
                "investigatory_action": rec.investigatory_action,
                "fatal": "yes" if rec.fatal else "no",
                "dcgm_severity": rec.dcgm_severity or "-",
            }
        )
    return pd.DataFrame(rows, columns=MEANING_COLUMNS)


def memory_summary(inp: TriageInputs) -> pd.DataFrame:
    """One row per GPU: DBE/SBE increase, remapped rows, remap failure, p95 temperature (DCGM) and the
    nvidia-smi view of the same counters when a report is available."""
    keys = ["gpu"]
    out: pd.DataFrame | None = None
    names = {
        triage.DBE_VOL: "dbe_increase",
        triage.SBE_VOL: "sbe_increase",
        triage.UNC_REMAP: "uncorr_remapped_rows_increase",
        triage.REMAP_FAILURE: "row_remap_failure_max",
        triage.GPU_TEMP: "temp_p95_c",
    }
    for f, col in names.items():
        s = inp.summaries.get(f)
        if s is None or s.empty:
            continue
        part = s.groupby("gpu", as_index=False)["value"].max().rename(columns={"value": col})
        out = part if out is None else out.merge(part, on=keys, how="outer")
    if inp.smi is not None and len(inp.smi):
        ids = gpu_map(inp)
        smi = inp.smi.merge(ids[["uuid", "gpu"]], on="uuid", how="left")
        smi = smi.assign(gpu=smi["gpu"].fillna(""))[
            [
                "gpu",
                "pci_bus_id",
                "ecc_dbe_volatile",
                "ecc_dbe_aggregate",
                "remapped_rows_uncorrectable",
                "remapped_rows_pending",
                "remapped_rows_failure",
                "temperature_gpu_c",
            ]
        ]
        smi = smi.rename(columns={c: f"smi_{c}" for c in smi.columns if c not in ("gpu", "pci_bus_id")})
        out = smi if out is None else out.merge(smi, on="gpu", how="outer")
    if out is None:
        return pd.DataFrame(columns=["gpu"])
    out["_k"] = pd.to_numeric(out["gpu"], errors="coerce")
    return out.sort_values("_k").drop(columns="_k").reset_index(drop=True)


#: ECC / row-remap panels of :func:`memory_chart`: field -> (panel title, y-axis title with its unit)
MEMORY_PANELS = {
    triage.DBE_VOL: ("double-bit ECC errors, volatile", "errors (count)"),
    triage.SBE_VOL: ("single-bit ECC errors, volatile", "errors (count)"),
    triage.UNC_REMAP: ("rows remapped for uncorrectable errors", "rows (count)"),
    triage.REMAP_FAILURE: ("row-remap failure", "failed (0/1)"),
}


def window_bounds(window: str, end) -> tuple[pd.Timestamp, pd.Timestamp]:
    """(start, end) of the runbook window ending at ``end`` (the source's window end, :attr:`Source.end`), UTC."""
    hi = pd.Timestamp(end) if end is not None else pd.Timestamp.now(tz="UTC")
    hi = hi.tz_localize("UTC") if hi.tzinfo is None else hi.tz_convert("UTC")
    return hi - parse_window(window), hi


def timeline_chart(events: pd.DataFrame, node: str, window: str, end):
    """XID events per GPU over the whole window (``end``: the source's window end), so the engineer sees when in
    the window they happened and that nothing followed; the window end is marked "now"."""
    start, end = window_bounds(window, end)
    title = f"XID events on {node} (last {window})"
    if len(events):
        df = events.assign(
            gpu_label=["GPU " + g if g else f"PCI {p}" for g, p in zip(events["gpu"], events["pci_bus_id"])],
            code=[f"XID {x} {m}" for x, m in zip(events["xid"], events["mnemonic"])],
        )
        df["source"] = df["source"].str.replace(triage.XID_GAUGE, "DCGM gauge", regex=False)
        fig = px.scatter(
            df,
            x="timestamp",
            y="gpu_label",
            color="code",
            symbol="source",
            hover_data=["message"],
            title=title,
            labels={"timestamp": "time (UTC)", "gpu_label": "GPU", "code": "XID"},
        )
        fig.update_traces(marker={"size": 13})
        n = len(fig.data)
    else:
        fig = go.Figure(layout={"title": title})
        fig.add_annotation(
            text=f"no XID event in the last {window}", x=0.5, y=0.5, xref="x domain", yref="y domain", showarrow=False
        )
        fig.update_yaxes(showticklabels=False)
        n = 0
    fig.add_shape(
        type="line",
        x0=end,
        x1=end,
        xref="x",
        y0=0,
        y1=1,
        yref="y domain",
        layer="above",
        line={"color": "#555", "width": 4},
    )  # at the right edge: half of it shows
    fig.add_annotation(
        text="now (window end)",
        x=end,
        xref="x",
        y=1,
        yref="y domain",
        xanchor="right",
        yanchor="bottom",
        showarrow=False,
        font={"color": "#555"},
    )
    fig.update_xaxes(type="date", range=[start, end], title_text="time (UTC)")
    fig.update_yaxes(title_text="GPU")
    # the legend under the plot: XID mnemonics are long (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS) and a legend
    # on the right would squeeze the window to a sliver
    rows = events["gpu"].nunique() if len(events) else 1
    fig.update_layout(
        height=230 + 35 * rows + 22 * n,
        margin={"t": 80, "b": 100 + 22 * n},
        legend={
            "title": {"text": "XID, source: "},
            "orientation": "h",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "x": 0,
            "xanchor": "left",
        },
    )
    return fig


def _colour(gpu) -> str:
    """One colour per GPU index in every panel of a chart (plotly's default palette, ``qualitative.Plotly``)."""
    try:
        return qualitative.Plotly[int(gpu) % len(qualitative.Plotly)]
    except (TypeError, ValueError):
        return "#555"


def _flat(s: pd.DataFrame) -> bool:
    """Whether every GPU's series holds one value over the window (a flat line that says nothing a number does not)."""
    return bool((s.groupby("gpu")["value"].nunique(dropna=True) <= 1).all())


def _flat_text(fields: dict[str, pd.DataFrame]) -> str:
    parts = []
    for f, s in fields.items():
        vals = sorted({float(v) for v in s["value"].dropna()})
        parts.append(f"{f.replace('DCGM_FI_DEV_', '')} = " + "/".join(f"{v:g}" for v in vals))
    return "; ".join(parts)


def memory_chart(inp: TriageInputs):
    """ECC and row-remap counters over time for the GPU (or the node), one panel per field that moved.

    None when no field has samples; a sentence (str) when every field held one value over the window (a flat
    line on a -1..1 axis tells the engineer less than the sentence); otherwise the chart, with the flat fields
    named under its title. :func:`gpulib.runbook.show` prints a sentence as a note."""
    checked: dict[str, pd.DataFrame] = {}
    for f in MEMORY_PANELS:
        s = inp.series.get(f)
        if s is None or s.empty:
            continue
        s = (s if inp.gpu is None else s[s["gpu"] == inp.gpu]).dropna(subset=["value"])
        if len(s):  # a field without a sample is not evidence of anything
            checked[f] = s
    if not checked:
        return None
    target = inp.node + (f" GPU {inp.gpu}" if inp.gpu else "")
    flat = {f: s for f, s in checked.items() if _flat(s)}
    moving = {f: s for f, s in checked.items() if f not in flat}
    if not moving:
        fields = ", ".join(checked)
        if all((s["value"] == 0).all() for s in checked.values()) and len(checked) == len(MEMORY_PANELS):
            return (
                f"No SBE/DBE ECC errors and no remapped rows on {target} over the last {inp.window} "
                f"(fields checked: {fields}; every sample 0, so there is nothing to chart)."
            )
        missing = [f for f in MEMORY_PANELS if f not in checked]
        return (
            f"The ECC and row-remap counters of {target} did not change over the last {inp.window}: "
            f"{_flat_text(checked)} throughout (fields checked: {fields}"
            + (f"; no samples of {', '.join(missing)}" if missing else "")
            + ")."
        )
    fig = make_subplots(
        rows=len(moving),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=[f"{MEMORY_PANELS[f][0]}" for f in moving],
    )
    for row, (f, s) in enumerate(moving.items(), start=1):
        for g, gs in s.groupby("gpu", sort=True):
            fig.add_trace(
                go.Scatter(
                    x=gs["timestamp"],
                    y=gs["value"],
                    name=f"GPU {g}",
                    legendgroup=str(g),
                    showlegend=row == 1,
                    mode="lines",
                    line={"shape": "hv", "color": _colour(g)},
                    hovertemplate=f"{f}<br>%{{x}}<br>%{{y:g}}<extra>GPU {g}</extra>",
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text=MEMORY_PANELS[f][1], rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=len(moving), col=1)
    title = f"ECC errors and remapped rows on {target} (last {inp.window})"
    lines = []
    if flat:
        lines = textwrap.wrap("flat over the window, not drawn: " + _flat_text(flat), 62)
    fig.update_layout(
        title="<br>".join([title] + [f"<sup>{ln}</sup>" for ln in lines]),
        height=200 * len(moving) + 140 + 20 * len(lines),
        margin={"t": 100 + 20 * len(lines)},
    )
    return fig


def _axis_range(values, lines, pad: float) -> list[float]:
    vals = [float(v) for v in values if pd.notna(v)] + [float(v) for v in lines]
    return [min(vals) - pad, max(vals) + pad] if vals else [0.0, 1.0]


def thermal_chart(inp: TriageInputs):
    """GPU temperature with the warn/critical lines and power draw with the power limit (nvidia-smi).

    Threshold labels sit on opposite sides (critical above its line at the left, warn below its line at the
    right), so two thresholds one degree apart both read; the axis ranges include every line."""
    temp, power = inp.series.get(triage.GPU_TEMP), inp.series.get("DCGM_FI_DEV_POWER_USAGE")
    if temp is None and power is None:
        return None
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=("GPU temperature", "Power draw")
    )
    for row, df in ((1, temp), (2, power)):
        if df is None:
            continue
        for g, s in df.groupby("gpu", sort=True):
            focus = inp.gpu is None or g == inp.gpu
            fig.add_trace(
                go.Scatter(
                    x=s["timestamp"],
                    y=s["value"],
                    name=f"GPU {g}",
                    legendgroup=g,
                    showlegend=row == 1,
                    line={"width": 2.5 if focus and inp.gpu else 1, "color": _colour(g)},
                    opacity=1.0 if focus else 0.35,
                ),
                row=row,
                col=1,
            )
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    fig.add_hline(
        y=crit,
        line_dash="dash",
        line_color="#b00020",
        annotation_text=f"critical {crit:.0f} °C",
        annotation_position="top left",
        row=1,
        col=1,
    )
    fig.add_hline(
        y=warn,
        line_dash="dot",
        line_color="#b36b00",
        annotation_text=f"warn {warn:.0f} °C",
        annotation_position="bottom right",
        row=1,
        col=1,
    )
    fig.update_yaxes(range=_axis_range(temp["value"] if temp is not None else [], [warn, crit], 8), row=1, col=1)
    lim = None
    if inp.smi is not None and len(inp.smi) and inp.smi["power_limit_w"].notna().any():
        lim = float(inp.smi["power_limit_w"].max())
        fig.add_hline(
            y=lim,
            line_dash="dot",
            line_color="#b00020",
            annotation_text=f"power limit {lim:.0f} W",
            annotation_position="top left",
            row=2,
            col=1,
        )
    pw = list(power["value"]) if power is not None else []
    top = max([float(v) for v in pw if pd.notna(v)] + ([lim] if lim else []) + [1.0])
    fig.update_yaxes(range=[0, top * 1.15], row=2, col=1)
    fig.update_yaxes(title_text="temperature (°C)", row=1, col=1)
    fig.update_yaxes(title_text="power (W)", row=2, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=2, col=1)
    fig.update_layout(title=f"Temperature and power on {inp.node} (last {inp.window})", height=560)
    return fig


# ----------------------------------------------------------- what each step of the runbook shows (gpulib.xid.steps)
def show_inputs(c, ui) -> None:
    inp = c.inp
    ui.note(
        f"Triage of <b>{c.target}</b> over the last {c.window}. Inputs: kernel log "
        f"{'yes' if inp.kernel_log is not None else '<b>no</b>'}, nvidia-smi -q "
        f"{'yes' if inp.smi is not None else '<b>no</b>'}, "
        f"DCGM fields {len(inp.summaries)} summaries / {len(inp.series)} series."
    )


def show_meaning(c, ui) -> None:
    if c.mine.empty:
        ui.note(f"No XID on {c.target} in the last {c.window} (kernel log and DCGM_FI_DEV_XID_ERRORS checked).", "ok")
    else:
        ui.display(meaning_table(c.mine["xid"]))


def show_impact(c, ui) -> None:
    if c.hit.empty:
        ui.note(f"No pod found on {c.target}.", "info")
    else:
        ui.display(c.hit)
        ui.print("namespaces:", ", ".join(sorted(c.hit["namespace"].unique())))


def show_timeline(c, ui) -> None:
    inp, events = c.inp, c.events
    if inp.kernel_log is None:
        collect_cmd, log_cmd = c.log_commands
        ui.note(
            f"The {c.src.describe()} source has no kernel log for {inp.node}: the XIDs below come from DCGM only. "
            f"Collect it with <code>{collect_cmd}</code> and re-run on that snapshot, or re-run on "
            "the live source with <code>-p collect true</code>; by hand: "
            f"<code>{log_cmd}</code> and <code>-p kernel_log_file dmesg.txt</code>.",
            "warning",
        )
    else:
        ui.print(f"kernel log from {inp.kernel_log_from}: {len(inp.xid_events)} NVRM Xid line(s)")
    if events.empty:
        ui.note(f"No XID event on {inp.node} in the last {c.window}.", "ok")
    else:
        ui.show(timeline_chart(events, inp.node, c.window, inp.end))
        ui.display(events)


def show_memory(c, ui) -> None:
    inp = c.inp
    off = inp.missing_dcgm
    if off:
        ui.note("Not exported by this source, so not checked from DCGM: " + ", ".join(off), "warning")
    if inp.smi is None:
        ui.note(
            f"No nvidia-smi -q for {inp.node} from the {c.src.describe()} source. Get it with<br><code>"
            + "</code><br><code>".join(c.smi_commands)
            + "</code><br>and re-run with <code>-p smi_file nvidia-smi-q.txt</code>.",
            "info",
        )
    else:
        ui.print(f"nvidia-smi -q from {inp.smi_from}: {len(inp.smi)} GPU(s) reported")
    ui.display(memory_summary(inp))
    fig = memory_chart(inp)
    if fig is not None:
        ui.show(fig)


def show_thermal(c, ui) -> None:
    fig = thermal_chart(c.inp)
    if fig is not None:
        ui.show(fig)


def show_triage(c, ui) -> None:
    ui.print(f"{len(c.fs)} finding(s); top: {c.fs[0].title}")


def show_evidence(c, ui) -> None:
    ui.display(
        pd.DataFrame(
            [(d, ", ".join(used) or "none: not decided") for d, used in c.evidence],
            columns=["decision", "rests on"],
        )
    )


def show_plan(c, ui) -> None:
    if not c.plan:
        ui.note(
            "The top finding does not take the GPU out of service: no cordon or drain. "
            "Follow its SOP step (e.g. notify the pod owner).",
            "info",
        )
    for result in c.plan:
        if result.mode != "plan":  # a plan prints itself
            ui.display(result)
    if c.plan:
        modes = {result.mode for result in c.plan}
        how = (
            "the kubectl commands above without <code>--dry-run=server</code>"
            if "server-dry-run" in modes
            else "the kubectl commands above, in order (nothing was sent: they are the plan)"
        )
        ui.note(f"To act: <code>gpulib.kube.remediate.drain(node, cluster=..., apply=True)</code> or {how}.", "info")
