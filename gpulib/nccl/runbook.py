"""What ``runbooks/nccl_check.ipynb`` shows: nccl-tests results against the expected band, the
topology, the NCCL log diagnosis, environment checks and a node's NVLink traffic from DCGM.

The parsers, bands and verdicts are :mod:`gpulib.nccl.results`, :mod:`gpulib.nccl.bands` and :mod:`gpulib.nccl.log`;
this module loads the runbook's inputs
(a file given as a parameter, else a packaged capture under ``gpulib/data/`` that the runbook names),
applies the parameters (GPU model, interconnect, an ``expected`` override) and draws the charts.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

import gpulib.nccl as nccl
from gpulib.nccl.findings import _fmt_bytes
from gpulib.nvidia.topology import Topology
from gpulib.core.errors import EmptyResult, InvalidParameter
from gpulib.core.findings import Finding
from gpulib.core.knowledge import data_path
from gpulib.fleet import NVLINK_MB_PER_GB, HealthFrames, health_findings

NVLINK_FIELD = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"


def read_input(path: str, parameter: str, default: str | None = None) -> tuple[str, str]:
    """(text, where it came from) of a runbook input file; ``default`` names a packaged capture under
    ``gpulib/data/`` (the runbook passes the real 2xH200 captures the demo uses, e.g.
    :data:`gpulib.demo.artifacts.DEMO_TOPOLOGY`)."""
    if not path:
        if default is None:
            raise InvalidParameter(f"{parameter} is empty and has no default")
        p = data_path(default)
        return p.read_text(errors="replace"), f"packaged capture {default}"
    p = Path(path).expanduser()
    if not p.is_file():
        raise InvalidParameter(f"{parameter}={path!r}: no such file",
                               hint="give the path of a saved capture, or leave it empty for the packaged 2xH200 capture")
    return p.read_text(errors="replace"), str(p)


def parse_expected(expected: str | float | None, collective: str) -> nccl.Band | None:
    """The ``expected`` parameter as a band: ``"300"`` (low end only) or ``"300-340"`` (GB/s busbw); empty -> None."""
    if expected in (None, ""):
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*(?:GB/s)?\s*", str(expected))
    if not m:
        raise InvalidParameter(f"expected={expected!r}: give the busbw band in GB/s as '300' or '300-340'")
    low = float(m.group(1))
    high = float(m.group(2)) if m.group(2) else low
    if high < low:
        raise InvalidParameter(f"expected={expected!r}: the high end is below the low end")
    return nccl.Band(collective, low, high, "override: runbook parameter expected", "runbook parameter", True)


def model_kwargs(*, topology: Topology | None = None, gpu_model: str = "", interconnect: str = "") -> dict[str, Any]:
    """Keywords for :func:`gpulib.nccl.bands.verdict` from the runbook parameters (empty ones left out, so the
    verdict still reads the GPU model from the run's rank lines)."""
    kw: dict[str, Any] = {}
    if topology is not None and topology.gpus:
        kw["topology"] = topology
    if gpu_model:
        kw["gpu_model"] = gpu_model
    if interconnect:
        kw["interconnect"] = interconnect
    return kw


def capture_hosts(result: nccl.NcclTestResult) -> str | None:
    """The host(s) a run's ``#  Rank`` lines name (the machine the findings are about), else None."""
    if result.ranks.empty:
        return None
    return ",".join(dict.fromkeys(str(h) for h in result.ranks["host"]))


def verdicts(results: list[nccl.NcclTestResult], *, expected: str = "", node: str | None = None,
             text: str | None = None, **model: Any) -> list[nccl.Verdict]:
    """One verdict per collective run (an ``expected`` override replaces the modelled band); each finding
    names ``node``, else the host(s) of the run's rank lines. A run judged against a band measured on that
    very capture (``text`` equals a file the band's source cites) is a ``reference`` verdict, not a
    comparison: a capture always meets a band derived from itself."""
    out = []
    for r in results:
        host = node or capture_hosts(r)
        v = nccl.verdict(r, parse_expected(expected, r.collective or "unknown"), node=host, **model)
        if text is not None and v.band is not None and not expected and _band_measured_on(v.band, text):
            from dataclasses import replace

            from gpulib.core.findings import Severity

            f = Finding(Severity.INFO, f"Reference capture, not judged ({v.collective})", node=host, category="nccl",
                        summary=(f"The expected band ({v.band.low:g}-{v.band.high:g} GB/s) was measured on this very "
                                 f"capture from host {host or 'unknown'}, so comparing them says nothing about any node. "
                                 "Run the probe on your nodes and give its output as nccl_tests_file for a verdict."),
                        evidence=[f"best busbw {v.measured_busbw:g} GB/s" if v.measured_busbw is not None else "no busbw",
                                  f"band source: {v.band.source}"],
                        data={"status": "reference", "host": host})
            v = replace(v, status="reference", finding=f)
        out.append(v)
    return out


def _band_measured_on(band: nccl.Band, text: str) -> bool:
    """Whether ``band.source`` cites a capture file of this checkout whose text is ``text``."""
    root = Path(__file__).resolve().parent.parent.parent
    for name in re.findall(r"[\w./-]+\.txt", band.source or ""):
        for cand in (root / name, root / "gpulib" / "data" / name):
            try:
                if cand.is_file() and cand.read_text(errors="replace").strip() == text.strip():
                    return True
            except OSError:
                continue
    return False


def verdict_table(vs: list[nccl.Verdict]) -> pd.DataFrame:
    rows = [{"collective": v.collective, "status": v.status, "best busbw (GB/s)": v.measured_busbw,
             "at size": _fmt_bytes(v.size_bytes) if v.size_bytes else "",
             "expected (GB/s)": f"{v.band.low:g}-{v.band.high:g}" if v.band else "no band",
             "link peak (GB/s)": v.band.link_peak if v.band else None,
             "basis": v.band.basis if v.band else ""} for v in vs]
    return pd.DataFrame(rows)


def _size_ticks(sizes: pd.Series) -> tuple[list[float], list[str]]:
    lo, hi = int(math.log2(max(sizes.min(), 1))), int(math.ceil(math.log2(max(sizes.max(), 1))))
    vals = [2.0 ** k for k in range(lo, hi + 1, 2)]
    return vals, [_fmt_bytes(int(v)) for v in vals]


def busbw_chart(result: nccl.NcclTestResult, verdict: nccl.Verdict | None = None):
    """busbw (GB/s) vs message size on a log2 axis, out-of-place and in-place, with the expected band."""
    import plotly.graph_objects as go

    t = result.table
    fig = go.Figure()
    for side, name, dash in (("oop", "out-of-place", "solid"), ("ip", "in-place", "dot")):
        fig.add_trace(go.Scatter(x=t["size_bytes"], y=t[f"{side}_busbw"], mode="lines+markers", name=name,
                                 line={"dash": dash}))
    band = verdict.band if verdict else None
    if band is not None:
        fig.add_hrect(y0=band.low, y1=max(band.high, band.low + 0.5), fillcolor="#1b7f3b", opacity=0.18, line_width=0,
                      annotation_text=f"expected {band.low:g}-{band.high:g} GB/s", annotation_position="top left")
        if band.link_peak:
            fig.add_hline(y=band.link_peak, line_dash="dash", line_color="#555",
                          annotation_text=f"link peak {band.link_peak:g} GB/s")
    vals, text = _size_ticks(t["size_bytes"]) if len(t) else ([], [])
    status = f" - {verdict.status}" if verdict else ""
    fig.update_xaxes(type="log", tickvals=vals, ticktext=text, title_text="message size (bytes, log2 scale)")
    fig.update_yaxes(title_text="bus bandwidth (GB/s)", rangemode="tozero")
    fig.update_layout(title=f"{result.collective or 'collective'}: busbw vs message size ({result.nranks or '?'} ranks){status}",
                      height=420)
    return fig


def topology_chart(topo: Topology):
    """Device x device heatmap of ``nvidia-smi topo -m`` link codes (NV# = number of bonded NVLinks)."""
    import plotly.graph_objects as go

    order = {"X": np.nan, "SYS": 0, "NODE": 1, "PHB": 2, "PXB": 3, "PIX": 4}
    links = topo.links
    z = [[(float(c[2:]) + 4 if re.fullmatch(r"NV\d+", str(c)) else order.get(str(c), np.nan)) for c in row]
         for row in links.to_numpy()]
    fig = go.Figure(go.Heatmap(z=z, x=list(links.columns), y=list(links.index), text=links.to_numpy(),
                               texttemplate="%{text}", colorscale="Blues", showscale=False))
    fig.update_layout(title=f"nvidia-smi topo -m ({topo.interconnect}; min NVLinks per GPU pair {topo.min_nvlinks})",
                      xaxis_title="device", yaxis_title="device", height=max(300, 140 + 45 * len(links)),
                      yaxis={"autorange": "reversed"})
    return fig


def environment_findings(log_text: str, node: str | None = None) -> list[Finding]:
    """:func:`gpulib.nccl.env.check_environment` on the NCCL_* variables the log says were set by environment."""
    return list(nccl.check_environment(nccl.summarize_log(log_text).env, node=node))


# ------------------------------------------------------------------------------------ NVLink (DCGM)
def nvlink_rates(series: pd.DataFrame) -> pd.DataFrame:
    """NVLink bandwidth per GPU in GB/s (column ``gbs``) from a SERIES frame of :data:`NVLINK_FIELD`: a bandwidth
    in MB/s, not a byte counter (:data:`gpulib.fleet.health.NVLINK_MB_PER_GB` cites DCGM's field table)."""
    cols = ["timestamp", "node", "gpu", "gbs"]
    if series is None or series.empty:
        return pd.DataFrame(columns=cols)
    df = series.sort_values(["node", "gpu", "timestamp"], kind="stable")
    out = pd.DataFrame({"timestamp": df["timestamp"], "node": df["node"], "gpu": df["gpu"].astype(str),
                        "gbs": pd.to_numeric(df["value"], errors="coerce") / NVLINK_MB_PER_GB})
    return out.dropna(subset=["gbs"]).reset_index(drop=True)[cols]


def nvlink_chart(rates: pd.DataFrame, node: str, window: str):
    """NVLink bandwidth per GPU (GB/s) over the window; a sentence (str) when no GPU moved any traffic (a flat
    line at 0 says less than the sentence); None without samples."""
    import plotly.express as px

    if rates is None or rates.empty:
        return None
    if (rates["gbs"] == 0).all():
        return (f"No NVLink traffic on {node} over the last {window}: {NVLINK_FIELD} was 0 on every GPU "
                f"({', '.join(sorted(rates['gpu'].unique(), key=lambda g: (len(g), g)))}).")
    df = rates.assign(gpu="GPU " + rates["gpu"])
    fig = px.line(df, x="timestamp", y="gbs", color="gpu", title=f"NVLink bandwidth per GPU on {node} (last {window})",
                  labels={"timestamp": "time (UTC)", "gbs": "NVLink bandwidth (GB/s)", "gpu": "GPU"})
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(height=380)
    return fig


def nvlink_findings(src, node: str, window: str) -> list[Finding]:
    """NVLink traffic far below the node's other GPUs (:mod:`gpulib.fleet.health`'s check on this node only)."""
    df = src.summary(NVLINK_FIELD, window, "avg", node=node)
    return health_findings(HealthFrames(window=window, frames={NVLINK_FIELD: df}))


def nvlink_series(src, node: str, window: str) -> pd.DataFrame:
    try:
        return src.series(NVLINK_FIELD, window, node=node)
    except EmptyResult as exc:
        raise EmptyResult(f"{NVLINK_FIELD} has no samples on {node}: the GPUs may have no NVLink, or the field "
                          "is not exported", query=NVLINK_FIELD) from exc


# ------------------------------------------------------------------------------------ results history
def runbook_history(history_dir: str, cluster: str, *, results: list[nccl.NcclTestResult],
                    verdicts: list[nccl.Verdict], record: bool = False, instance_type: str = "",
                    default_input: bool = True,
                    default_history: Callable[[], tuple[pd.DataFrame, str]] | None = None,
                    ) -> tuple[pd.DataFrame | None, str]:
    """(history, where it came from) for the runbook, or (None, why not).

    ``history_dir`` given: ``<history_dir>/<cluster>.csv``, after appending this run's verdicts when ``record``.
    Empty: ``default_history()`` -> (history, where it came from) when the runbook shows the packaged capture
    (``default_input``; the runbook passes :func:`gpulib.demo.nccl_history.runbook_default_history`); none for a
    user's own file (a history of the packaged capture next to it would mislead) or when no ``default_history``
    is given."""
    import gpulib.nccl.history as nh

    if not history_dir:
        if record:
            raise InvalidParameter("record_history=True needs history_dir (the folder of the per-cluster CSVs)")
        if not default_input or default_history is None:
            return None, ("No results history: set history_dir (and record_history=True to add this run) to chart "
                          "busbw over time.")
        return default_history()
    path = nh.default_path(cluster, history_dir)
    if record:
        judged = [(r, v) for r, v in zip(results, verdicts) if v.measured_busbw is not None]
        if judged:
            rs, vs = zip(*judged)
            nh.append(nh.rows_from_run(list(rs), list(vs), cluster=cluster, instance_type=instance_type,
                                       origin="runbook nccl_check"), path)
    return nh.load(path), str(path)


# ------------------------------------------------------------------------------------ in-cluster probe
def runbook_probe_manifest(nodes: int, gpus: int, node: str = "", image: str = "") -> tuple[dict[str, Any], list[str]]:
    """The in-cluster probe manifest for the runbook's parameters (the probe's ConfigMap plus a Job on ``node`` for
    one node, a PyTorchJob for several; ``image`` empty: the public default of ``nccl_job_defaults.csv``) and what
    validation said (kubernetes-validate is a test extra: skipped with a line if absent)."""
    import gpulib.nccl.job as nccl_job

    manifest = nccl_job.probe_manifest(nodes, gpus=gpus, node=node or None, image=image or None)
    try:
        checked = nccl_job.validate(manifest)
    except ImportError:
        checked = ["kubernetes-validate is not installed: schema validation skipped (pip install kubernetes-validate)"]
    return manifest, checked


def read_results(text: str) -> list[nccl.NcclTestResult]:
    """The nccl-tests runs of ``text`` that have a result table or errors (runs that printed nothing are dropped)."""
    return [r for r in nccl.parse_nccl_tests_all(text) if len(r.table) or r.errors]
