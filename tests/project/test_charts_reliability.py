"""The reliability charts pass the suite's chart checks (tests/helpers/chartcheck.py), built the way the notebooks
build them, and the node timeline draws an exporter gap as a "no data" band, not as a run of zeros."""

from __future__ import annotations

import pandas as pd
import pytest

import gpulib
import gpulib.reliability.report_steps as R
import gpulib.reliability.steps as S
import gpulib.reliability.view as V
from tests.helpers.chartcheck import axis_problems, legend_problems, overlaps, title_problems

END = "2026-12-01T06:45:00Z"


@pytest.fixture(scope="module")
def src():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUOPS_END", END)
        yield gpulib.connect("demo")


def _timeline(src, node, window):
    inp = S.read_history(src, node, window)
    return V.timeline_chart(S.timeline(inp), node, inp.start, inp.end, window)


@pytest.fixture(scope="module")
def figs(src):
    rep = R.build(R.load(src, "30d"), "30d")
    return {
        "timeline_offender": _timeline(src, "h200-infer-0", "7d"),
        "timeline_flapping": _timeline(src, "l4-spot-0", "7d"),
        "timeline_gap": _timeline(src, "a100-80-1", "30d"),
        "rates": V.rates_chart(rep.rates, "30d"),
        "changes": V.changes_chart(R.F.changes_table(rep.changes)),
        "out_of_service": V.out_of_service_chart(rep.out_of_service, sorted(rep.fh.nodes["pool"].unique()), "30d"),
    }


NAMES = ["timeline_offender", "timeline_flapping", "timeline_gap", "rates", "changes", "out_of_service"]


@pytest.mark.parametrize("name", NAMES)
def test_reliability_chart_is_readable(name, figs):
    fig = figs[name]
    assert axis_problems(fig) == [] and title_problems(fig) == []
    assert overlaps(fig) == [] and legend_problems(fig) == []


def test_an_exporter_gap_is_a_no_data_band(figs):
    fig = figs["timeline_gap"]
    bands = [s for s in fig.layout.shapes if s.type == "rect" and s.yref == "y domain"]
    assert len(bands) == 1
    width = pd.Timestamp(bands[0].x1) - pd.Timestamp(bands[0].x0)
    assert width == pd.Timedelta(hours=18)  # demo_history.yaml: a100-80-1 exporter down 18 h
    assert any(a.text == "no data" for a in fig.layout.annotations)
    assert all(tr.name != "no data" for tr in fig.data)  # drawn as a band, never as points at zero
