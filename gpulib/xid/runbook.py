"""What ``runbooks/xid_ecc_triage.ipynb`` shows: inputs gathered from a source, tables and charts.

The analysis itself is :func:`gpulib.xid.triage.triage_node`; this module fetches its inputs from any
source (kernel log, ``nvidia-smi -q``, DCGM summaries and series), says what is missing and how to
get it, builds the Meaning table from the XID catalog, draws the charts and plans the dry-run
remediation (:mod:`gpulib.kube.remediate`) that follows from the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import gpulib.xid.triage as triage
from gpulib.core.errors import EmptyResult, InvalidParameter, NoInput
from gpulib.sources.base import default_step
from gpulib.core.validate import command
from gpulib.core.findings import Finding, Severity, sort_findings
from gpulib.core.knowledge import threshold
from gpulib.nvidia.dcgmi import parse_dcgmi_diag
from gpulib.nvidia.smi import parse_query
from gpulib.core.timeutil import parse_window
from gpulib.core.ids import normalise_pci_bus_id
from gpulib.core.validate import command, node_name, shell_quote
from gpulib.xid.catalog import lookup
from gpulib.xid.kernel_log import parse_kernel_log
from gpulib.xid.target import Target, resolve

#: DCGM fields the triage reads as one value per GPU over the window, with the stat it needs
SUMMARY_STATS = {
    triage.DBE_VOL: "increase",
    triage.SBE_VOL: "increase",
    triage.UNC_REMAP: "increase",
    triage.REMAP_FAILURE: "max",
    triage.REMAP_PENDING: "max",
    triage.RETIRED_PENDING: "max",
    triage.GPU_TEMP: "p95",
}
#: gauges read as the max over each step, so an event shorter than a step is never missed (a plain range
#: query returns one sample per step: https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries)
EVENT_GAUGES = (triage.XID_GAUGE, triage.REMAP_FAILURE)
#: DCGM fields drawn over time (the XID gauge is also read for its changes)
SERIES_FIELDS = [triage.XID_GAUGE, triage.DBE_VOL, triage.SBE_VOL, triage.UNC_REMAP, triage.REMAP_FAILURE,
                 triage.GPU_TEMP, "DCGM_FI_DEV_POWER_USAGE"]

MEANING_COLUMNS = ["xid", "mnemonic", "category", "description", "immediate_action", "investigatory_action",
                   "fatal", "dcgm_severity"]
#: SOP rules of triage that take the GPU out of service (besides XID buckets in triage.DRAIN_BUCKETS)
_DRAIN_RULES = {"ROW_REMAP_FAILURE", "DBE_ERRORS"}
DEBUG_IMAGE = "ubuntu:22.04"


def kernel_log_command(node: str) -> str:
    """How to fetch a node's NVRM lines with ``kubectl debug`` (the host's root is at /host): the Xid lines and
    the "fallen off the bus" messages the driver prints without an Xid (:func:`gpulib.xid.catalog.parse_kernel_log`).
    ``-i`` without ``-t``: the output goes through a pipe; ``--profile=sysadmin`` lets dmesg read the kernel ring."""
    return (command("kubectl", "debug", f"node/{node}", "-i", "--quiet", "--profile=sysadmin", f"--image={DEBUG_IMAGE}",
                    "--", "chroot", "/host", "dmesg", "-T") + " | grep -i -E 'NVRM: Xid|fallen off the bus'")


def collect_command(node: str) -> str:
    """The ``gpuops collect`` line that fetches the node's kernel log and nvidia-smi reports (:mod:`gpulib.kube.collect`)."""
    from gpulib.core.validate import command, node_name

    return command("gpuops", "collect", node_name(node), "--apply")


def smi_query_commands(node: str) -> list[str]:
    """How to get ``nvidia-smi -q`` from a GPU Operator node (the driver pod carries nvidia-smi)."""
    pod = ("$(kubectl -n gpu-operator get pods -l app=nvidia-driver-daemonset "
           f"--field-selector spec.nodeName={shell_quote(node)} -o name)")
    return [command("kubectl", "-n", "gpu-operator", "get", "pods", "-o", "wide", f"--field-selector=spec.nodeName={node}"),
            f"kubectl -n gpu-operator exec {pod} -- nvidia-smi -q > nvidia-smi-q.txt"]


@dataclass
class TriageInputs:
    """Everything the triage of one node (and GPU) reads, and what could not be had."""

    node: str
    gpu: str | None
    window: str
    kernel_log: str | None = None
    kernel_log_from: str = ""
    xid_events: pd.DataFrame | None = None
    smi_text: str | None = None
    smi_from: str = ""
    smi: pd.DataFrame | None = None
    summaries: dict[str, pd.DataFrame] = field(default_factory=dict)
    series: dict[str, pd.DataFrame] = field(default_factory=dict)
    pods: pd.DataFrame | None = None
    diag_text: str | None = None
    diag_from: str = ""
    diag: pd.DataFrame | None = None
    after_reset: bool = False
    missing: list[str] = field(default_factory=list)
    target: Target | None = None
    #: the end of the window (the source's :attr:`~gpulib.sources.base.Source.end`): the timeline's right edge
    end: Any = None

    @property
    def missing_dcgm(self) -> list[str]:
        """The DCGM fields this source did not export (so the ECC/row-remap step could not check them)."""
        return [f for f in self.missing if f.startswith("DCGM_")]

    @property
    def dcgm(self) -> dict[str, pd.DataFrame]:
        """DCGM frames for :func:`gpulib.xid.triage.triage_node`: summaries plus the XID gauge series."""
        out = dict(self.summaries)
        if triage.XID_GAUGE in self.series:
            out[triage.XID_GAUGE] = self.series[triage.XID_GAUGE]
        return out


def _read(path: str, what: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameter(f"{what}={path!r}: no such file", hint="give the path of a saved text capture, or leave it empty")
    return p.read_text(errors="replace")


def validate(src, node: str, gpu: Any, window: str) -> tuple[str, str | None]:
    """Check the parameters against the source: UnknownNode, UnknownGPU, InvalidWindow name the bad value.
    Returns (node, GPU index or None); a UUID or MIG UUID is resolved to its GPU's index (:mod:`gpulib.xid.target`)."""
    t = _target(src, node, gpu, window)
    return t.node, t.gpu


def _target(src, node: str, gpu: Any, window: str, smi: pd.DataFrame | None = None) -> Target:
    parse_window(window)
    if not node:
        raise InvalidParameter("node is empty: give the GPU node from the alert (its hostname label)")
    node = node_name(node)
    if gpu in (None, ""):
        src.gpus(node, window)  # UnknownNode for a node the source does not have
    return resolve(src, node, gpu, window, smi)


def collect(src, node: str, gpu: Any = None, window: str = "6h", *, kernel_log_file: str = "",
            smi_file: str = "", diag_file: str = "", after_reset: bool = False) -> TriageInputs:
    """Gather the triage inputs for ``node`` (and ``gpu``: index, GPU UUID or MIG UUID) from ``src``; files
    given override the source's. A ``gpu`` matching none of the node's GPUs raises UnknownGPU.

    ``diag_file`` / the source's ``diag_report``: a ``dcgmi diag`` result (JSON or table) read by
    :func:`gpulib.xid.diag.diag_findings`; ``after_reset``: the SOP's reset or reboot was done before it ran."""
    parse_window(window)
    if not node:
        raise InvalidParameter("node is empty: give the GPU node from the alert (its hostname label)")
    node = node_name(node)
    def text_input(path: str, param: str, fetch):   # a file given overrides what the source has
        return (_read(path, param), path) if path else (fetch(node), src.describe())

    smi_text, smi_from = text_input(smi_file, "smi_file", src.smi_query)
    smi = parse_query(smi_text) if smi_text is not None else None
    target = _target(src, node, gpu, window, smi)
    inp = TriageInputs(node=node, gpu=target.gpu, window=window, target=target, after_reset=bool(after_reset),
                       end=src.end)
    inp.diag_text, inp.diag_from = text_input(diag_file, "diag_file", src.diag_report)
    if inp.diag_text is not None:
        inp.diag = parse_dcgmi_diag(inp.diag_text)
    inp.kernel_log, inp.kernel_log_from = text_input(kernel_log_file, "kernel_log_file", src.kernel_log)
    if inp.kernel_log is not None:
        inp.xid_events = parse_kernel_log(inp.kernel_log)
    else:
        inp.missing.append("kernel log")
    inp.smi_text, inp.smi_from, inp.smi = smi_text, smi_from, smi
    if smi is None:
        inp.missing.append("nvidia-smi -q")
    for f, stat in SUMMARY_STATS.items():
        try:
            inp.summaries[f] = src.summary(f, window, stat, node=node)
        except EmptyResult:
            inp.missing.append(f)
    step = default_step(parse_window(window))
    for f in SERIES_FIELDS:
        try:
            if f in EVENT_GAUGES:
                inp.series[f] = src.series(f, window, node=node, step=step, agg="max")
            else:
                inp.series[f] = src.series(f, window, node=node)
        except EmptyResult:
            if f not in inp.missing:
                inp.missing.append(f)
    inp.pods = src.pods()
    return inp


def gpu_map(inp: TriageInputs) -> pd.DataFrame:
    """GPU index <-> UUID <-> PCI bus id on the node, from nvidia-smi and the node's DCGM rows (``pci_bus_id``)."""
    frames = [inp.smi] + [f for f in list(inp.summaries.values()) + list(inp.series.values()) if f is not None]
    return triage.node_gpu_ids(inp.node, *frames)


def xid_timeline(inp: TriageInputs) -> pd.DataFrame:
    """Every XID event on the node: kernel-log lines (GPU index and UUID found by PCI bus id through
    nvidia-smi or DCGM's ``pci_bus_id`` label) and DCGM gauge changes (PCI bus id filled the same way).

    Columns: timestamp, gpu (index as str, "" when unknown), uuid, pci_bus_id, xid, mnemonic, source, message.
    """
    cols = ["timestamp", "gpu", "uuid", "pci_bus_id", "xid", "mnemonic", "source", "message"]
    ids = gpu_map(inp).to_dict("records")
    by_pci = {r["pci_bus_id"]: r for r in ids if r["pci_bus_id"]}
    by_gpu = {r["gpu"]: r for r in ids if r["gpu"]}
    rows = []
    if inp.xid_events is not None:
        for r in inp.xid_events.to_dict("records"):
            pci = normalise_pci_bus_id(r.get("pci_bus_id"))
            hit = by_pci.get(pci, {})
            rows.append({"timestamp": r.get("timestamp"), "gpu": hit.get("gpu") or "", "uuid": hit.get("uuid") or "",
                         "pci_bus_id": pci or "", "xid": int(r["xid"]), "source": "kernel log",
                         "message": str(r.get("message") or "")})
    ev = triage.xid_events_from_gauge(inp.series.get(triage.XID_GAUGE))
    for r in ev.to_dict("records"):
        hit = by_gpu.get(str(r["gpu"]), {})
        rows.append({"timestamp": r["timestamp"], "gpu": str(r["gpu"]), "uuid": (r["uuid"] if isinstance(r.get("uuid"), str) and r["uuid"] else hit.get("uuid") or ""),
                     "pci_bus_id": hit.get("pci_bus_id") or "", "xid": int(r["xid"]),
                     "source": triage.XID_GAUGE + (" (before the window)" if r["carried_over"] else ""),
                     "message": "gauge changed to this code"})
    df = pd.DataFrame(rows, columns=[c for c in cols if c != "mnemonic"])
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, errors="coerce")
    df["mnemonic"] = [lookup(x).mnemonic for x in df["xid"]]
    return df[cols].sort_values("timestamp", kind="stable").reset_index(drop=True)


def for_gpu(events: pd.DataFrame, gpu: str | None) -> pd.DataFrame:
    """Events of one GPU (all when ``gpu`` is None; events whose GPU is unknown are kept)."""
    if gpu is None or events.empty:
        return events
    return events[(events["gpu"] == str(gpu)) | (events["gpu"] == "")]


def meaning_table(codes) -> pd.DataFrame:
    """What each XID code means and NVIDIA's resolution buckets (``gpulib/data/xid/xid_catalog.csv``)."""
    rows = []
    for c in sorted({int(x) for x in codes}):
        rec = lookup(c)
        rows.append({"xid": c, "mnemonic": rec.mnemonic, "category": rec.category, "description": rec.description,
                     "immediate_action": rec.immediate_action, "investigatory_action": rec.investigatory_action,
                     "fatal": "yes" if rec.fatal else "no", "dcgm_severity": rec.dcgm_severity or "-"})
    return pd.DataFrame(rows, columns=MEANING_COLUMNS)


def impact(inp: TriageInputs) -> pd.DataFrame:
    """Pods on the affected GPU (or the node's GPU pods), with owners (:func:`gpulib.xid.triage.pod_impact`)."""
    uuid = None
    if inp.gpu is not None:
        ids = gpu_map(inp)
        hit = ids[ids["gpu"] == inp.gpu]
        uuid = hit["uuid"].iloc[0] if len(hit) else None
    return triage.pod_impact(inp.node, inp.gpu, pods=inp.pods, dcgm=inp.dcgm, uuid=uuid)


def memory_summary(inp: TriageInputs) -> pd.DataFrame:
    """One row per GPU: DBE/SBE increase, remapped rows, remap failure, p95 temperature (DCGM) and the
    nvidia-smi view of the same counters when a report is available."""
    keys = ["gpu"]
    out: pd.DataFrame | None = None
    names = {triage.DBE_VOL: "dbe_increase", triage.SBE_VOL: "sbe_increase", triage.UNC_REMAP: "uncorr_remapped_rows_increase",
             triage.REMAP_FAILURE: "row_remap_failure_max", triage.GPU_TEMP: "temp_p95_c"}
    for f, col in names.items():
        s = inp.summaries.get(f)
        if s is None or s.empty:
            continue
        part = s.groupby("gpu", as_index=False)["value"].max().rename(columns={"value": col})
        out = part if out is None else out.merge(part, on=keys, how="outer")
    if inp.smi is not None and len(inp.smi):
        ids = gpu_map(inp)
        smi = inp.smi.merge(ids[["uuid", "gpu"]], on="uuid", how="left")
        smi = smi.assign(gpu=smi["gpu"].fillna(""))[["gpu", "pci_bus_id", "ecc_dbe_volatile", "ecc_dbe_aggregate",
                                                    "remapped_rows_uncorrectable", "remapped_rows_pending",
                                                    "remapped_rows_failure", "temperature_gpu_c"]]
        smi = smi.rename(columns={c: f"smi_{c}" for c in smi.columns if c not in ("gpu", "pci_bus_id")})
        out = smi if out is None else out.merge(smi, on="gpu", how="outer")
    if out is None:
        return pd.DataFrame(columns=["gpu"])
    out["_k"] = pd.to_numeric(out["gpu"], errors="coerce")
    return out.sort_values("_k").drop(columns="_k").reset_index(drop=True)


def has_input(inp: TriageInputs) -> bool:
    """Whether anything the triage reads was there: a kernel log, nvidia-smi -q, or a DCGM frame with rows."""
    frames = list(inp.summaries.values()) + list(inp.series.values())
    diag = getattr(inp, "diag", None)
    return (inp.kernel_log is not None or inp.smi is not None or (diag is not None and len(diag) > 0)
            or any(f is not None and len(f) for f in frames))


def findings(inp: TriageInputs) -> list[Finding]:
    """:func:`gpulib.xid.triage.triage_node` on the inputs, restricted to the requested GPU.
    NoInput (the run is INCOMPLETE) when none of the inputs could be read: no input, no verdict."""
    if not has_input(inp):
        raise NoInput(f"no input to triage {inp.node}: no kernel log, no nvidia-smi -q and no DCGM series for the node "
                      f"in the last {inp.window} (missing: {', '.join(inp.missing)})")
    from gpulib.xid.diag import diag_findings

    fs = triage.triage_node(inp.node, gpu=inp.gpu, window=inp.window, xid_events=inp.xid_events, smi=inp.smi,
                            dcgm=inp.dcgm, pods=inp.pods)
    t = inp.target
    ds = diag_findings(inp.diag, inp.node, inp.gpu, after_reset=inp.after_reset, source=inp.diag_from, smi=inp.smi,
                       pci_bus_id=t.pci_bus_id if t else "", uuid=t.uuid if t else "")
    if any(d.data.get("rule") == "DIAG_RETURN_TO_SERVICE" for d in ds):
        fs = [_cleared(f) for f in fs]
    if ds:
        fs = [f for f in fs if f.category != "ok"] + ds
    if inp.gpu is not None:  # triage keeps cases it cannot pin to an index; show only this GPU's
        fs = [f for f in fs if f.gpu in (None, "", inp.gpu)]
    if not fs:
        fs = [Finding(Severity.OK, f"No XID, ECC or thermal problem found on {inp.node} GPU {inp.gpu}", node=inp.node,
                      gpu=inp.gpu, category="ok", runbook="xid_ecc_triage")]
    return sort_findings(fs)


#: XID buckets whose SOP ends in "reset or reboot, then dcgmi diag -r 3, then uncordon" (xid_sop.csv)
_CLEARED_BY_DIAG = {"RESET_GPU", "RESTART_BM"}


def _cleared(f: Finding) -> Finding:
    """An XID finding whose SOP step (reset/reboot, then a passing diagnostic) is done: kept as INFO history."""
    from dataclasses import replace

    if f.data.get("bucket") not in _CLEARED_BY_DIAG or f.severity not in (Severity.CRITICAL, Severity.WARNING):
        return f
    return replace(f, severity=Severity.INFO, title=f"{f.title} (reset done, dcgmi diag passed afterwards)",
                   summary=(f.summary + " " if f.summary else "") + "after_reset=true and every diagnostic test passed: "
                           "the SOP's reset/reboot step is complete.")


def takes_gpu_out(f: Finding | None) -> bool:
    """Whether a finding's SOP step drains the node (XID bucket or memory rule that takes the GPU out of service)."""
    if f is None or f.severity not in (Severity.CRITICAL, Severity.WARNING):
        return False
    return f.data.get("bucket") in triage.DRAIN_BUCKETS or f.data.get("rule") in _DRAIN_RULES


def remediation_plan(fs: list[Finding], node: str, cluster: Any = None):
    """Dry-run remediation for the top finding: a drain (cordon + GPU pod evictions) when its SOP takes the
    GPU out of service, nothing otherwise. ``cluster``: a KubeCluster for a server-side dry run, else a plan."""
    import gpulib.kube.remediate as remediate

    top = fs[0] if fs else None
    if not takes_gpu_out(top):
        return []
    return [remediate.drain(node, cluster=cluster, apply=False, reason=f"xid_ecc_triage: {top.title}")]


# ------------------------------------------------------------------------------------------ charts
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
    import plotly.express as px
    import plotly.graph_objects as go

    start, end = window_bounds(window, end)
    title = f"XID events on {node} (last {window})"
    if len(events):
        df = events.assign(gpu_label=["GPU " + g if g else f"PCI {p}" for g, p in zip(events["gpu"], events["pci_bus_id"])],
                           code=[f"XID {x} {m}" for x, m in zip(events["xid"], events["mnemonic"])])
        df["source"] = df["source"].str.replace(triage.XID_GAUGE, "DCGM gauge", regex=False)
        fig = px.scatter(df, x="timestamp", y="gpu_label", color="code", symbol="source", hover_data=["message"],
                         title=title, labels={"timestamp": "time (UTC)", "gpu_label": "GPU", "code": "XID"})
        fig.update_traces(marker={"size": 13})
        n = len(fig.data)
    else:
        fig = go.Figure(layout={"title": title})
        fig.add_annotation(text=f"no XID event in the last {window}", x=0.5, y=0.5, xref="x domain", yref="y domain",
                           showarrow=False)
        fig.update_yaxes(showticklabels=False)
        n = 0
    fig.add_shape(type="line", x0=end, x1=end, xref="x", y0=0, y1=1, yref="y domain", layer="above",
                  line={"color": "#555", "width": 4})  # at the right edge: half of it shows
    fig.add_annotation(text="now (window end)", x=end, xref="x", y=1, yref="y domain", xanchor="right", yanchor="bottom",
                       showarrow=False, font={"color": "#555"})
    fig.update_xaxes(type="date", range=[start, end], title_text="time (UTC)")
    fig.update_yaxes(title_text="GPU")
    # the legend under the plot: XID mnemonics are long (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS) and a legend
    # on the right would squeeze the window to a sliver
    rows = events["gpu"].nunique() if len(events) else 1
    fig.update_layout(height=230 + 35 * rows + 22 * n, margin={"t": 80, "b": 100 + 22 * n},
                      legend={"title": {"text": "XID, source: "}, "orientation": "h", "yref": "container", "y": 0,
                              "yanchor": "bottom", "x": 0, "xanchor": "left"})
    return fig


def _colour(gpu) -> str:
    """One colour per GPU index in every panel of a chart (plotly's default palette, ``qualitative.Plotly``)."""
    from plotly.express.colors import qualitative

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
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go

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
            return (f"No SBE/DBE ECC errors and no remapped rows on {target} over the last {inp.window} "
                    f"(fields checked: {fields}; every sample 0, so there is nothing to chart).")
        missing = [f for f in MEMORY_PANELS if f not in checked]
        return (f"The ECC and row-remap counters of {target} did not change over the last {inp.window}: "
                f"{_flat_text(checked)} throughout (fields checked: {fields}"
                + (f"; no samples of {', '.join(missing)}" if missing else "") + ").")
    fig = make_subplots(rows=len(moving), cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=[f"{MEMORY_PANELS[f][0]}" for f in moving])
    for row, (f, s) in enumerate(moving.items(), start=1):
        for g, gs in s.groupby("gpu", sort=True):
            fig.add_trace(go.Scatter(x=gs["timestamp"], y=gs["value"], name=f"GPU {g}", legendgroup=str(g),
                                     showlegend=row == 1, mode="lines", line={"shape": "hv", "color": _colour(g)},
                                     hovertemplate=f"{f}<br>%{{x}}<br>%{{y:g}}<extra>GPU {g}</extra>"), row=row, col=1)
        fig.update_yaxes(title_text=MEMORY_PANELS[f][1], rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=len(moving), col=1)
    title = f"ECC errors and remapped rows on {target} (last {inp.window})"
    lines = []
    if flat:
        import textwrap

        lines = textwrap.wrap("flat over the window, not drawn: " + _flat_text(flat), 62)
    fig.update_layout(title="<br>".join([title] + [f"<sup>{ln}</sup>" for ln in lines]),
                      height=200 * len(moving) + 140 + 20 * len(lines), margin={"t": 100 + 20 * len(lines)})
    return fig


def _axis_range(values, lines, pad: float) -> list[float]:
    vals = [float(v) for v in values if pd.notna(v)] + [float(v) for v in lines]
    return [min(vals) - pad, max(vals) + pad] if vals else [0.0, 1.0]


def thermal_chart(inp: TriageInputs):
    """GPU temperature with the warn/critical lines and power draw with the power limit (nvidia-smi).

    Threshold labels sit on opposite sides (critical above its line at the left, warn below its line at the
    right), so two thresholds one degree apart both read; the axis ranges include every line."""
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go

    temp, power = inp.series.get(triage.GPU_TEMP), inp.series.get("DCGM_FI_DEV_POWER_USAGE")
    if temp is None and power is None:
        return None
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=("GPU temperature", "Power draw"))
    for row, df in ((1, temp), (2, power)):
        if df is None:
            continue
        for g, s in df.groupby("gpu", sort=True):
            focus = inp.gpu is None or g == inp.gpu
            fig.add_trace(go.Scatter(x=s["timestamp"], y=s["value"], name=f"GPU {g}", legendgroup=g, showlegend=row == 1,
                                     line={"width": 2.5 if focus and inp.gpu else 1, "color": _colour(g)},
                                     opacity=1.0 if focus else 0.35),
                          row=row, col=1)
    warn, crit = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c")
    fig.add_hline(y=crit, line_dash="dash", line_color="#b00020", annotation_text=f"critical {crit:.0f} °C",
                  annotation_position="top left", row=1, col=1)
    fig.add_hline(y=warn, line_dash="dot", line_color="#b36b00", annotation_text=f"warn {warn:.0f} °C",
                  annotation_position="bottom right", row=1, col=1)
    fig.update_yaxes(range=_axis_range(temp["value"] if temp is not None else [], [warn, crit], 8), row=1, col=1)
    lim = None
    if inp.smi is not None and len(inp.smi) and inp.smi["power_limit_w"].notna().any():
        lim = float(inp.smi["power_limit_w"].max())
        fig.add_hline(y=lim, line_dash="dot", line_color="#b00020", annotation_text=f"power limit {lim:.0f} W",
                      annotation_position="top left", row=2, col=1)
    pw = list(power["value"]) if power is not None else []
    top = max([float(v) for v in pw if pd.notna(v)] + ([lim] if lim else []) + [1.0])
    fig.update_yaxes(range=[0, top * 1.15], row=2, col=1)
    fig.update_yaxes(title_text="temperature (°C)", row=1, col=1)
    fig.update_yaxes(title_text="power (W)", row=2, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=2, col=1)
    fig.update_layout(title=f"Temperature and power on {inp.node} (last {inp.window})", height=560)
    return fig
