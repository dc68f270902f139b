"""Charts an engineer can read in an incident channel: every chart of the runbooks, built from the demo source
with the calls the notebooks make, checked on the plotly Figure objects (tests/helpers/chartcheck.py): axis titles with
units, titles that fit, threshold labels that do not collide, the XID timeline over the whole window, and a
sentence instead of a flat chart where a panel's counters never moved."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

import gpulib
import gpulib.nccl.steps as ns
import gpulib.nccl.view as nv
import gpulib.xid.steps as xs
import gpulib.xid.view as xv
from tests.helpers.chartcheck import annotation_boxes, axis_problems, legend_problems, overlaps, title_problems

END = "2026-12-01T06:45:00Z"
END_TS = pd.Timestamp(END)
#: demo nodes (gpulib/data/demo/demo_fleet.yaml): XID 79 on GPU 5; DBE + remap failure on GPU 1 (and rising SBE on
#: GPU 3); a hot GPU 2; no incident at all
XID_NODE, ECC_NODE, HOT_NODE, QUIET_NODE = (
    ("dgx-h100-1", "5"),
    ("a100-80-0", "1"),
    ("h200-infer-0", "2"),
    ("a100-80-1", None),
)


@pytest.fixture(scope="module")
def src():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", END)
        yield gpulib.connect("demo")


_INPUTS: dict = {}


def _inp(src, node, gpu, window="6h"):
    key = (node, gpu, window)
    if key not in _INPUTS:
        _INPUTS[key] = xs.collect(src, node, gpu, window)
    return _INPUTS[key]


def _nccl(src):
    import gpulib.nvidia as nvidia
    from gpulib.demo.artifacts import DEMO_NCCL_TESTS, DEMO_TOPOLOGY

    topo = nvidia.parse_topology(ns.read_input("", "topology_file", DEMO_TOPOLOGY)[0])
    text = ns.read_input("", "nccl_tests_file", DEMO_NCCL_TESTS)[0]
    results = ns.read_results(text)
    vs = ns.verdicts(results, text=text, **ns.model_kwargs(topology=topo))
    return topo, results, vs


def build(name: str, src):
    """One chart, built the way its notebook builds it."""
    if name.startswith("xid_"):
        what, case = name[4:].split(":")
        node, gpu = {"xid": XID_NODE, "ecc": ECC_NODE, "hot": HOT_NODE, "quiet": QUIET_NODE}[case]
        inp = _inp(src, node, gpu)
        if what == "timeline":
            return xv.timeline_chart(xs.xid_timeline(inp), inp.node, "6h", inp.end)
        return {"memory": xv.memory_chart, "thermal": xv.thermal_chart}[what](inp)
    if name.startswith("nccl_"):
        topo, results, vs = _nccl(src)
        if name == "nccl_topology":
            return nv.topology_chart(topo)
        if name == "nccl_busbw":
            return nv.busbw_chart(results[0], vs[0])
        if name == "nccl_history":
            from gpulib.demo.nccl_history import demo_nccl_history

            return nv.history_chart(demo_nccl_history())
        if name == "nccl_nvlink":
            return nv.nvlink_chart(ns.nvlink_rates(ns.nvlink_series(src, "dgx-h100-0", "6h")), "dgx-h100-0", "6h")
    if name.startswith("fleet_"):
        import gpulib.fleet as fleet

        if name == "fleet_allocation":
            return fleet.allocation_chart(fleet.inventory(src.nodes(), src.pods()))
        if name == "fleet_heatmap":
            caps = src.preflight("6h")
            act = fleet.activity(src, "6h", caps.activity_metric)
            return fleet.heatmap(fleet.utilisation_matrix(act), caps.activity_metric)
        if name == "fleet_temp_power":
            return fleet.temp_power_chart(fleet.health_frames(src, "6h"))
    if name == "operator_daemonsets":
        import gpulib.gpu_operator as operator
        import gpulib.gpu_operator.view as ov

        return ov.daemonset_chart(operator.operator_state(src, "gpu-operator")["daemonsets"])
    if name.startswith("vllm_"):
        import gpulib.vllm as inference
        import gpulib.vllm.view as vv

        if name == "vllm_memory":
            return vv.memory_chart(
                inference.plan(
                    "Llama-3-70B", "H100-80GB", gpus=4, context_len=8192, concurrency=32, latency_p99_s=10.0
                ),
                "H100-80GB",
            )
        return vv.waiting_chart(inference.waiting_requests(src, "inference", "vllm-llama70b", "1h"), "vllm-llama70b")
    if name.startswith("mig_"):
        import gpulib.mig.steps as mr

        return mr.current_step(src, node="a100-40-mig-0", gpu_model="", window="6h", headroom=0.2).diagram()
    if name.startswith("cost_"):
        import gpulib.cost.steps as report

        data = report.load_report_data(src, "24h")
        rep = report.cost_report(data)
        if name == "cost_heatmap":
            return report.heatmap(rep, data)
        if name == "cost_namespaces":
            return report.namespace_chart(rep)
        return report.waterfall(rep)
    raise KeyError(name)


#: the incident runbooks' charts (xid_ecc_triage, nccl_check, fleet_overview, operator_install): every check
INCIDENT = [
    "xid_timeline:xid",
    "xid_timeline:ecc",
    "xid_timeline:quiet",
    "xid_memory:ecc",
    "xid_thermal:xid",
    "xid_thermal:hot",
    "xid_thermal:ecc",
    "nccl_topology",
    "nccl_busbw",
    "nccl_history",
    "nccl_nvlink",
    "fleet_allocation",
    "fleet_heatmap",
    "fleet_temp_power",
    "operator_daemonsets",
]
#: the other runbooks' charts: the axis-title rule
OTHER = ["vllm_memory", "vllm_waiting", "mig_current", "cost_heatmap", "cost_namespaces", "cost_waterfall"]
_FIGS: dict = {}


def fig_of(name, src):
    if name not in _FIGS:
        _FIGS[name] = build(name, src)
    assert _FIGS[name] is not None and not isinstance(_FIGS[name], str), f"{name}: no chart"
    return _FIGS[name]


@pytest.mark.parametrize("name", INCIDENT + OTHER)
def test_every_axis_title_has_a_unit_and_fits(name, src):
    assert axis_problems(fig_of(name, src)) == []


@pytest.mark.parametrize("name", INCIDENT + OTHER)
def test_the_title_fits_the_default_width(name, src):
    assert title_problems(fig_of(name, src)) == []


@pytest.mark.parametrize("name", INCIDENT)
def test_no_two_labels_overlap(name, src):
    assert overlaps(fig_of(name, src)) == []


@pytest.mark.parametrize("name", INCIDENT)
def test_the_legend_leaves_room_for_the_plot(name, src):
    assert legend_problems(fig_of(name, src)) == []


# ------------------------------------------------------------------------------------ the checker itself
def test_the_checker_sees_overlapping_threshold_labels_and_unitless_axes():
    """The checks can fail: plotly's default placement of two threshold labels 1 unit apart collides."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[0, 1], y=[30, 95]))
    fig.add_hline(y=88, annotation_text="warn 88 °C")
    fig.add_hline(y=89, annotation_text="critical 89 °C")
    fig.update_layout(xaxis_title="time", yaxis_title="counter units/s temperature of the GPU over the window " * 2)
    assert overlaps(fig) == [("warn 88 °C", "critical 89 °C")]
    probs = axis_problems(fig)
    assert any("'time' has no unit" in p for p in probs) and any("longer than its axis" in p for p in probs)


# ------------------------------------------------------------------------------------ XID timeline
@pytest.mark.parametrize("case", ["xid", "quiet"])
def test_the_xid_timeline_spans_the_whole_window(case, src):
    node, gpu = {"xid": XID_NODE, "quiet": QUIET_NODE}[case]
    inp = _inp(src, node, gpu)
    events = xs.xid_timeline(inp)
    assert (len(events) > 0) == (case == "xid")
    fig = xv.timeline_chart(events, inp.node, "6h", inp.end)
    assert fig.layout.xaxis.type == "date"  # also without a trace to tell plotly the axis holds times
    lo, hi = (pd.Timestamp(v) for v in fig.layout.xaxis.range)
    assert (lo.tz_convert("UTC") if lo.tzinfo else lo.tz_localize("UTC")) == END_TS - pd.Timedelta("6h")
    assert (hi.tz_convert("UTC") if hi.tzinfo else hi.tz_localize("UTC")) == END_TS
    now = [s for s in fig.layout.shapes if s.type == "line" and pd.Timestamp(s.x0) == pd.Timestamp(s.x1)]
    assert len(now) == 1 and pd.Timestamp(now[0].x0).tz_localize(None) == END_TS.tz_localize(None)
    assert any("now" in (a.text or "") for a in fig.layout.annotations)


# ------------------------------------------------------------------------------------ flat panels
def test_all_zero_ecc_counters_are_a_sentence_not_a_flat_chart(src):
    inp = _inp(src, *XID_NODE)
    for f in (xs.triage.DBE_VOL, xs.triage.SBE_VOL, xs.triage.UNC_REMAP, xs.triage.REMAP_FAILURE):
        s = inp.series[f]
        assert (s[s["gpu"] == "5"]["value"] == 0).all()  # the demo premise: this GPU's counters never moved
    out = xv.memory_chart(inp)
    assert isinstance(out, str)
    assert out.startswith("No SBE/DBE ECC errors and no remapped rows on dgx-h100-1 GPU 5 over the last 6h")
    for f in (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    ):
        assert f in out


def test_a_moving_counter_is_drawn_and_the_flat_ones_are_named(src):
    inp = _inp(src, *ECC_NODE)
    fig = xv.memory_chart(inp)
    assert not isinstance(fig, str) and fig is not None
    drawn = {a.text for a in fig.layout.annotations if a.textangle in (90, -90)} | {tr.name for tr in fig.data}
    sbe = inp.series[xs.triage.SBE_VOL]
    assert (sbe[sbe["gpu"] == "1"]["value"] == 0).all()  # demo premise: SBE stays 0 on GPU 1
    assert not any("SBE" in (t or "") for t in drawn)
    assert "ECC_SBE_VOL_TOTAL" in fig.layout.title.text and "0" in fig.layout.title.text


def test_the_notebook_shows_a_sentence_as_a_note(monkeypatch):
    import gpulib.runbook as nb

    shown = []
    monkeypatch.setattr(nb, "_display", lambda **kw: shown.append(kw))
    nb.show("No SBE/DBE ECC errors on n GPU 0 over the last 6h.")
    assert len(shown) == 1 and "No SBE/DBE ECC errors" in shown[0]["html_text"]


def test_no_nvlink_traffic_is_a_sentence():
    ts = pd.date_range(END_TS - pd.Timedelta("1h"), END_TS, freq="5min")
    series = pd.DataFrame(
        {"timestamp": list(ts) * 2, "node": "n", "gpu": ["0"] * len(ts) + ["1"] * len(ts), "value": 0.0}
    )
    out = nv.nvlink_chart(ns.nvlink_rates(series), "n", "1h")
    assert isinstance(out, str) and out.startswith("No NVLink traffic on n")


# ------------------------------------------------------------------------------------ units
def test_nvlink_bandwidth_is_drawn_in_gbs_from_dcgm_mbs(src):
    """DCGM's field table gives field 449 in MB/s (gpulib/data/nvidia/dcgm_fields.csv cites it): 1 GB/s = 1000 MB/s."""
    from gpulib.core.knowledge import load_table

    row = load_table("nvidia/dcgm_fields.csv").set_index("field").loc["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"]
    assert row["unit"] == "MB/s" and "dcgm_fields.cpp" in row["source"]
    series = ns.nvlink_series(src, "dgx-h100-0", "6h")
    fig = nv.nvlink_chart(ns.nvlink_rates(series), "dgx-h100-0", "6h")
    assert "(GB/s)" in fig.layout.yaxis.title.text
    g0 = series[series["gpu"] == "0"].sort_values("timestamp")
    tr = next(t for t in fig.data if t.name == "GPU 0")
    assert list(tr.y) == pytest.approx(list(g0["value"] / 1000.0))


# ------------------------------------------------------------------------------------ thresholds close together
def test_temperature_thresholds_one_degree_apart_both_read(src, monkeypatch):
    inp = _inp(src, *HOT_NODE)
    real = xv.threshold
    monkeypatch.setattr(xv, "threshold", lambda k: {"gpu_temp_warn_c": 88.0, "gpu_temp_crit_c": 89.0}.get(k, real(k)))
    fig = xv.thermal_chart(inp)
    texts = [b[0] for b in annotation_boxes(fig)]
    assert any("88" in t for t in texts) and any("89" in t for t in texts)
    assert overlaps(fig) == []


def test_busbw_band_and_link_peak_one_gbs_apart_both_read(src):
    _, results, vs = _nccl(src)
    v = vs[0]
    assert v.band is not None
    close = replace(v, band=replace(v.band, low=v.band.low, high=v.band.low + 10, link_peak=v.band.low + 11))
    fig = nv.busbw_chart(results[0], close)
    texts = [b[0] for b in annotation_boxes(fig)]
    assert any("expected" in t for t in texts) and any("link peak" in t for t in texts)
    assert overlaps(fig) == []


def test_fleet_temperature_thresholds_one_degree_apart_both_read(src, monkeypatch):
    import gpulib.fleet as fleet
    import gpulib.fleet.view as fleet_view

    real = fleet_view.threshold
    monkeypatch.setattr(
        fleet_view, "threshold", lambda k: {"gpu_temp_warn_c": 88.0, "gpu_temp_crit_c": 89.0}.get(k, real(k))
    )
    fig = fleet.temp_power_chart(fleet.health_frames(src, "6h"))
    texts = [b[0] for b in annotation_boxes(fig)]
    assert "warn 88 °C" in texts and "critical 89 °C" in texts
    assert overlaps(fig) == []


def test_flat_but_not_zero_counters_are_stated_with_their_values():
    """Rows remapped before the window stay at 7: a sentence with the value, and no 'no errors' claim for a
    field the source did not export."""
    ts = pd.date_range(END_TS - pd.Timedelta("6h"), END_TS, freq="10min")

    def frame(v):
        return pd.DataFrame({"timestamp": ts, "node": "n", "gpu": "0", "value": float(v)})

    inp = xs.TriageInputs(
        node="n",
        gpu="0",
        window="6h",
        end=END_TS,
        series={xs.triage.DBE_VOL: frame(0), xs.triage.SBE_VOL: frame(0), xs.triage.UNC_REMAP: frame(7)},
    )
    out = xv.memory_chart(inp)
    assert isinstance(out, str) and not out.startswith("No ")
    assert "UNCORRECTABLE_REMAPPED_ROWS = 7" in out and "no samples of DCGM_FI_DEV_ROW_REMAP_FAILURE" in out


def test_the_node_view_sentence_names_the_node(src):
    out = xv.memory_chart(_inp(src, "dgx-h100-1", None))
    assert isinstance(out, str) and out.startswith(
        "No SBE/DBE ECC errors and no remapped rows on dgx-h100-1 over the last 6h"
    )


def test_a_field_without_samples_is_not_counted_as_zero():
    ts = pd.date_range(END_TS - pd.Timedelta("6h"), END_TS, freq="10min")
    zero = pd.DataFrame({"timestamp": ts, "node": "n", "gpu": "0", "value": 0.0})
    series = {f: zero for f in (xs.triage.DBE_VOL, xs.triage.SBE_VOL, xs.triage.UNC_REMAP)}
    series[xs.triage.REMAP_FAILURE] = zero.assign(value=float("nan"))
    out = xv.memory_chart(xs.TriageInputs(node="n", gpu="0", window="6h", end=END_TS, series=series))
    assert isinstance(out, str) and not out.startswith("No ") and "no samples of DCGM_FI_DEV_ROW_REMAP_FAILURE" in out
