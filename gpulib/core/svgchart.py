"""A static SVG of a plotly figure, drawn on the server, for a page read without JavaScript (a mail client, a
browser with scripts off): every report chart gets one beside its interactive version (:func:`gpulib.runbook.show`).

Why a renderer of our own: plotly's static export needs Kaleido and a Chromium of its own
(https://plotly.com/python/static-image-export/), heavy for the report's image and absent from the environments the
project installs into; the report's charts are lines, bars, waterfalls and heatmaps, which an SVG of rectangles and
polylines shows faithfully enough to read (https://developer.mozilla.org/en-US/docs/Web/SVG/Element). Input is the
figure's JSON (``fig.to_json()``); plotly 6 writes numeric arrays as base64 typed arrays
(https://plotly.com/javascript/reference/ "typed arrays": ``{"dtype", "bdata", "shape"}``), decoded here.
"""

from __future__ import annotations

import base64
import html
import math
import re
from typing import Any

import numpy as np
import pandas as pd

W, H = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 34, 46
#: plotly's default colour sequence (plotly.colors.qualitative.Plotly)
COLOURS = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880")
DRAWN = ("scatter", "scattergl", "bar", "waterfall", "heatmap")


def _array(v: Any) -> list:
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if v.get("shape"):
            a = a.reshape([int(s) for s in str(v["shape"]).split(",")])
        return a.tolist()
    return list(v) if isinstance(v, (list, tuple)) else []


def _numbers(values: list) -> tuple[list[float], list[str] | None]:
    """Positions on an axis: numbers as they are, dates as seconds, anything else as categories 0, 1, ..."""
    if all(isinstance(x, (int, float)) or x is None for x in values):
        return [math.nan if x is None else float(x) for x in values], None
    try:
        t = pd.to_datetime(pd.Series(values), utc=True, errors="raise", format="ISO8601")
        return [x.timestamp() if not pd.isna(x) else math.nan for x in t], [str(values[0])[:16], str(values[-1])[:16]]
    except (ValueError, TypeError):
        cats = list(dict.fromkeys(str(x) for x in values))
        return [float(cats.index(str(x))) for x in values], cats


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _title(layout: dict) -> str:
    """The title's text, its HTML (``<br><sup>subtitle</sup>``) turned into spaces."""
    t = layout.get("title")
    text = str(t.get("text") or "") if isinstance(t, dict) else str(t or "")
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def svg_html(spec: dict) -> str:
    """The figure as an inline ``<svg>`` (or, for a kind of chart not drawn here, a sentence naming it): a figure
    this renderer cannot read never stops the report."""
    title = html.escape(_title(spec.get("layout") or {}))
    try:
        return _draw(spec, title)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return f"<p><i>{title or 'This chart'}: shown with JavaScript only.</i></p>"


def _numeric(values: list) -> bool:
    return all(isinstance(x, (int, float)) or x is None for x in values)


def _draw(spec: dict, title: str) -> str:
    data = spec.get("data") or []
    traces = [t for t in data if t.get("type", "scatter") in DRAWN]
    if not traces:
        return f"<p><i>{title or 'This chart'}: shown with JavaScript only.</i></p>"
    if traces[0].get("type") == "heatmap":
        return _heatmap(traces[0], title)
    series, xlabels = [], None
    for i, t in enumerate(traces):
        kind, horizontal = t.get("type", "scatter"), t.get("orientation") == "h"
        xs, ys = _array(t.get("x")), _array(t.get("y"))
        if horizontal or (xs and not _numeric(ys) and _numeric(xs)):  # categories on y: drawn along x
            xs, ys = ys, xs
        if not ys:
            continue
        if not xs:
            xs = list(range(len(ys)))
        xpos, labels = _numbers(xs)
        xlabels = xlabels or labels
        yv = [math.nan if v is None else float(v) for v in ys]
        base = [0.0] * len(yv)
        if kind == "waterfall":  # each bar starts where the running total stands; a "total" bar from zero
            measure, run = _array(t.get("measure")) or ["relative"] * len(yv), 0.0
            for j, v in enumerate(yv):
                if measure[j] == "total":
                    base[j], yv[j] = 0.0, run
                else:
                    base[j], run = run, run + (0.0 if math.isnan(v) else v)
                    yv[j] = run
        series.append((kind, xpos, base, yv, t.get("name") or "", COLOURS[i % len(COLOURS)]))
    return _xy(series, xlabels, title)


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _xy(series: list, xlabels: list[str] | None, title: str) -> str:
    xs = [x for s in series for x in s[1] if not math.isnan(x)]
    ys = [y for s in series for y in s[2] + s[3] if not math.isnan(y)]
    if not xs or not ys:
        return f"<p><i>{title or 'This chart'}: no data to draw.</i></p>"
    n_bars = max((len(s[1]) for s in series if s[0] != "scatter"), default=0)
    pad = 0.5 if n_bars else 0.0
    fx = _scale(min(xs) - pad, max(xs) + pad, LEFT, W - RIGHT)
    lo, hi = min(0.0, min(ys)), max(ys)
    fy = _scale(lo, hi, H - BOTTOM, TOP)
    bar_w = max(1.0, (W - LEFT - RIGHT) / max(1, n_bars) * 0.8 / max(1, sum(s[0] != "scatter" for s in series)))
    parts, bar_i = [], 0
    for kind, xpos, base, yv, _, colour in series:
        if kind in ("scatter", "scattergl"):
            pts = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in zip(xpos, yv) if not (math.isnan(x) or math.isnan(y)))
            parts.append(f"<polyline fill='none' stroke='{colour}' stroke-width='1.5' points='{pts}'/>")
        else:
            for x, b, y in zip(xpos, base, yv):
                if math.isnan(x) or math.isnan(y):
                    continue
                top, bottom = fy(max(b, y)), fy(min(b, y))
                parts.append(
                    f"<rect x='{fx(x) - bar_w / 2 + bar_i * bar_w:.1f}' y='{top:.1f}' width='{bar_w:.1f}' "
                    f"height='{max(0.5, bottom - top):.1f}' fill='{colour}'/>"
                )
            bar_i += 1
    axis = (
        f"<line x1='{LEFT}' y1='{H - BOTTOM}' x2='{W - RIGHT}' y2='{H - BOTTOM}' stroke='#888'/>"
        f"<line x1='{LEFT}' y1='{TOP}' x2='{LEFT}' y2='{H - BOTTOM}' stroke='#888'/>"
        f"<text x='{LEFT - 4}' y='{TOP + 4}' text-anchor='end'>{_fmt(hi)}</text>"
        f"<text x='{LEFT - 4}' y='{H - BOTTOM}' text-anchor='end'>{_fmt(lo)}</text>"
    )
    if xlabels and n_bars and len(xlabels) <= 12:  # categories: each under its bars
        axis += "".join(
            f"<text x='{fx(float(i)):.1f}' y='{H - BOTTOM + 16}' text-anchor='middle'>{html.escape(c[:14])}</text>"
            for i, c in enumerate(xlabels)
        )
    elif xlabels:
        first, last = html.escape(xlabels[0][:24]), html.escape(xlabels[-1][:24])
        axis += (
            f"<text x='{LEFT}' y='{H - BOTTOM + 16}'>{first}</text>"
            f"<text x='{W - RIGHT}' y='{H - BOTTOM + 16}' text-anchor='end'>{last}</text>"
        )
    legend = "".join(
        f"<tspan fill='{c}'>■ </tspan><tspan>{html.escape(str(name))[:40]}  </tspan>"
        for _, _, _, _, name, c in series
        if name
    )
    return _svg(title, axis + "".join(parts) + (f"<text x='{LEFT}' y='{H - 8}'>{legend}</text>" if legend else ""))


def _heatmap(t: dict, title: str) -> str:
    z = _array(t.get("z"))
    rows = [[math.nan if v is None else float(v) for v in (r if isinstance(r, list) else [r])] for r in z]
    vals = [v for r in rows for v in r if not math.isnan(v)]
    if not rows or not vals:
        return f"<p><i>{title or 'This chart'}: no data to draw.</i></p>"
    lo, hi = min(vals), max(vals)
    left = 120  # room for the row names (node names)
    cw, ch = (W - left - RIGHT) / max(len(r) for r in rows), (H - TOP - BOTTOM) / len(rows)
    cells = []
    for i, r in enumerate(rows):
        for j, v in enumerate(r):
            if math.isnan(v):
                continue
            k = (v - lo) / ((hi - lo) or 1.0)
            shade = f"rgb({int(240 - 200 * k)},{int(245 - 160 * k)},{int(255 - 100 * k)})"
            cells.append(
                f"<rect x='{left + j * cw:.1f}' y='{TOP + i * ch:.1f}' width='{cw + 0.3:.1f}' height='{ch + 0.3:.1f}' "
                f"fill='{shade}'/>"
            )
    ys = [str(y) for y in _array(t.get("y"))]
    labels = "".join(
        f"<text x='{left - 4}' y='{TOP + (i + 0.6) * ch:.1f}' text-anchor='end'>{html.escape(y[:20])}</text>"
        for i, y in enumerate(ys[: len(rows)])
        if len(rows) <= 24
    )
    scale = f"<text x='{left}' y='{H - 8}'>light {_fmt(lo)} … dark {_fmt(hi)}</text>"
    return _svg(title, "".join(cells) + labels + scale)


def _svg(title: str, body: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {W} {H}' width='100%' style='max-width:{W}px' "
        f"font-family='sans-serif' font-size='11' role='img' aria-label='{title}'>"
        f"<text x='{LEFT}' y='18' font-size='14'>{title}</text>{body}</svg>"
    )
