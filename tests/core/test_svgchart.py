"""The static SVG drawn beside each chart (gpulib/core/svgchart.py): one mark per data point, from plotly's own
JSON (typed arrays included), and a sentence instead of an empty box for a kind it does not draw."""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go

from gpulib.core.svgchart import svg_html


def _spec(fig) -> dict:
    return json.loads(fig.to_json())


def test_bars_lines_and_heatmap_cells_are_drawn():
    bars = svg_html(_spec(go.Figure(go.Bar(x=["ml", "ads", "search"], y=[3.0, 0.0, 5.5]), layout={"title": "T"})))
    assert bars.count("<rect") == 3 and ">T</text>" in bars
    line = svg_html(_spec(go.Figure(go.Scatter(x=["2026-12-01T00:00", "2026-12-01T01:00"], y=[1, 2], name="n1"))))
    (points,) = re.findall(r"points='([^']*)'", line)
    assert len(points.split()) == 2 and "n1" in line
    heat = svg_html(_spec(go.Figure(go.Heatmap(z=[[0.1, 0.9, 0.5], [0.2, 0.3, 0.4]], y=["a", "b"]))))
    assert heat.count("<rect") == 6


def test_typed_arrays_decode_and_waterfall_totals_stand_on_zero():
    import numpy as np

    fig = go.Figure(go.Waterfall(x=["a", "b", "total"], y=np.array([10.0, -4.0, 0.0]), measure=["relative",
                                                                                                  "relative", "total"]))
    spec = _spec(fig)
    assert isinstance(spec["data"][0]["y"], dict) and "bdata" in spec["data"][0]["y"]  # plotly 6's encoding
    svg = svg_html(spec)
    heights = [float(h) for h in re.findall(r"<rect [^>]*height='([\d.]+)'", svg)]
    assert len(heights) == 3 and heights[0] > heights[2] > heights[1]  # 10 up, 4 down, the total of 6


def test_a_kind_not_drawn_is_named_not_left_blank():
    out = svg_html(_spec(go.Figure(go.Pie(values=[1, 2]), layout={"title": "Shares"})))
    assert "<svg" not in out and "Shares" in out and "JavaScript" in out


def test_categories_on_y_and_a_figure_it_cannot_read_never_stop_the_report():
    """Failed before: the reliability report's change chart (rate ratio on x, the change's name on y) stopped the
    report with 'could not convert string to float'."""
    ci = go.Figure(go.Scatter(x=[17.3, 0.8], y=["driver 535 -> 550 · p5", "operator 24.9 · a100"], mode="markers"))
    assert "<polyline" in svg_html(_spec(ci))
    assert "JavaScript" in svg_html({"data": [{"type": "bar", "y": [{"not": "a number"}]}], "layout": {}})
