"""Readability checks on plotly Figure objects: axis titles with units, titles that fit the figure, and
annotation boxes that do not collide.

Text boxes are estimated, not rendered: a character is 0.6 x the font size wide (a typical sans-serif average)
and a line 1.3 x the font size high. Sizes are plotly's defaults unless the figure sets them: figure 700 x 450 px,
margins l/r 80, t 100, b 80, title font 17 px, axis titles 14 px, annotations 12 px
(https://plotly.com/python/reference/layout/, "width", "height", "margin", "font").
"""

from __future__ import annotations

import re
from datetime import datetime

import pandas as pd

CHAR_W, LINE_H = 0.6, 1.3
#: axis titles that name categories (no unit to give)
CATEGORICAL = {
    "GPU",
    "node",
    "device",
    "DaemonSet",
    "namespace",
    "action",
    "placement",
    "configuration",
    "GPU (node/index)",
}


def plain(text: str | None) -> str:
    return re.sub(r"<[^>]+>", "", (text or "").replace("<br>", "\n"))


def _lines(text: str | None) -> list[str]:
    return [ln for ln in plain(text).split("\n")] if text else []


def text_px(text: str | None, size: float) -> tuple[float, float]:
    """(width, height) in px of ``text`` (``<br>`` separates lines) at font ``size``."""
    lines = _lines(text)
    if not lines:
        return 0.0, 0.0
    return max(len(ln) for ln in lines) * CHAR_W * size, len(lines) * LINE_H * size


def size(fig) -> tuple[float, float, dict[str, float]]:
    lay = fig.layout
    m = {"l": 80, "r": 80, "t": 100, "b": 80}
    for k in m:
        v = getattr(lay.margin, k)
        if v is not None:
            m[k] = float(v)
    return float(lay.width or 700), float(lay.height or 450), m


def axes(fig) -> dict[str, object]:
    """Layout axis objects by their trace reference (``x``, ``x2``, ``y``...)."""
    out = {}
    for key in fig.layout:
        if re.fullmatch(r"[xy]axis\d*", key):
            out[key[0] + key[5:]] = fig.layout[key]
    return out


def _num(v):
    if isinstance(v, (datetime, pd.Timestamp)) or (isinstance(v, str) and re.match(r"\d{4}-\d\d-\d\d", v)):
        return pd.Timestamp(v).timestamp()
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def data_range(fig, ref: str) -> tuple[float, float] | None:
    """The range of axis ``ref`` (``x``, ``y2``...): the layout's when set, else the data's (traces and shapes)."""
    ax = axes(fig).get(ref)
    if ax is not None and ax.range is not None:
        lo, hi = (_num(v) for v in ax.range)
        if ax.type == "log":
            return lo, hi
        return lo, hi
    vals = []
    letter = ref[0]
    for tr in fig.data:
        if (getattr(tr, letter + "axis", None) or letter) != ref:
            continue
        seq = getattr(tr, letter, None)
        for v in [] if seq is None else list(seq):
            n = _num(v)
            if n is not None and n == n:
                vals.append(n)
    for sh in fig.layout.shapes:
        if getattr(sh, letter + "ref") == ref:
            for k in (letter + "0", letter + "1"):
                n = _num(getattr(sh, k))
                if n is not None:
                    vals.append(n)
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    return (lo, hi) if hi > lo else (lo - 1, hi + 1)


def _to_paper(fig, ref: str | None, v, letter: str) -> float | None:
    """A coordinate in paper units (0..1 of the plot area) from a paper, ``x domain`` or data reference."""
    ref = ref or "paper"
    if ref == "paper":
        return float(v)
    base = ref.split(" ")[0]
    ax = axes(fig).get(base)
    d0, d1 = ax.domain if ax is not None and ax.domain is not None else (0.0, 1.0)
    if ref.endswith("domain"):
        return d0 + float(v) * (d1 - d0)
    rng = data_range(fig, base)
    n = _num(v)
    if rng is None or n is None:
        return None
    lo, hi = rng
    if ax is not None and ax.type == "log" and not (ax.range is not None):
        import math

        lo, hi, n = math.log10(lo), math.log10(hi), math.log10(n)
    return d0 + (n - lo) / (hi - lo) * (d1 - d0)


def annotation_boxes(fig) -> list[tuple[str, float, float, float, float]]:
    """(text, x0, x1, y0, y1) in px of the figure (origin bottom left) for every annotation and the title."""
    w, h, m = size(fig)
    pw, ph = w - m["l"] - m["r"], h - m["t"] - m["b"]
    out = []
    for a in fig.layout.annotations:
        x, y = _to_paper(fig, a.xref, a.x, "x"), _to_paper(fig, a.yref, a.y, "y")
        if x is None or y is None:
            continue
        tw, th = text_px(a.text, (a.font.size if a.font and a.font.size else 12))
        if a.textangle in (90, -90):
            tw, th = th, tw
        px, py = m["l"] + x * pw, m["b"] + y * ph
        xa = a.xanchor if a.xanchor not in (None, "auto") else "center"
        ya = a.yanchor if a.yanchor not in (None, "auto") else "middle"
        x0 = px - {"left": 0, "center": tw / 2, "right": tw}[xa]
        y0 = py - {"bottom": 0, "middle": th / 2, "top": th}[ya]
        out.append((plain(a.text), x0, x0 + tw, y0, y0 + th))
    title = fig.layout.title
    if title and title.text:
        tw, th = text_px(title.text, (title.font.size if title.font and title.font.size else 17))
        tx = (title.x if title.x is not None else 0.05) * w
        x0 = (
            tx - tw / 2
            if (
                title.xanchor == "center"
                or (title.x is not None and title.x == 0.5 and title.xanchor in (None, "auto"))
            )
            else tx
        )
        ty = h - m["t"] / 2  # plotly centres the title in the top margin
        out.append(("title: " + plain(title.text), x0, x0 + tw, ty - th / 2, ty + th / 2))
    return out


def overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of annotation (or title) texts whose boxes intersect."""
    boxes = annotation_boxes(fig)
    bad = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]:
                bad.append((a[0], b[0]))
    return bad


def _traced(fig) -> set[str]:
    refs = set()
    for tr in fig.data:
        refs.add(getattr(tr, "xaxis", None) or "x")
        refs.add(getattr(tr, "yaxis", None) or "y")
    return refs


def axis_problems(fig) -> list[str]:
    """Axis titles missing (on a y axis that carries a trace, or on every x axis), without a unit in parentheses
    (categorical titles aside) or longer than their axis."""
    w, h, m = size(fig)
    pw, ph = w - m["l"] - m["r"], h - m["t"] - m["b"]
    out = []
    titled_x = False
    for ref, ax in axes(fig).items():
        text = ax.title.text if ax.title else None
        if ref.startswith("x") and text:
            titled_x = True
        if not text:
            if ref.startswith("y") and ref in _traced(fig) and ax.visible is not False:
                out.append(f"{ref}: no title")
            continue
        t = plain(text)
        if t not in CATEGORICAL and not re.search(r"\([^)]*\S[^)]*\)", t):
            out.append(f"{ref}: {t!r} has no unit in parentheses")
        d0, d1 = ax.domain if ax.domain is not None else (0.0, 1.0)
        room = (pw if ref.startswith("x") else ph) * (d1 - d0)
        tw, _ = text_px(text, ax.title.font.size if ax.title.font and ax.title.font.size else 14)
        if tw > room:
            out.append(f"{ref}: {t!r} ({tw:.0f} px) is longer than its axis ({room:.0f} px)")
    if fig.data and not titled_x:
        out.append("no x axis has a title")
    return out


def title_problems(fig) -> list[str]:
    w, _, _ = size(fig)
    title = fig.layout.title
    if not title or not title.text:
        return ["no title"]
    tw, _ = text_px(title.text, title.font.size if title.font and title.font.size else 17)
    x = title.x if title.x is not None else 0.05
    room = w * (1 - x) - 10
    return [f"title {plain(title.text)!r} ({tw:.0f} px) wider than the figure ({room:.0f} px)"] if tw > room else []


def legend_problems(fig, min_share: float = 0.5) -> list[str]:
    """A vertical legend on the right takes its longest entry's width from the plot area: the plot must keep at
    least ``min_share`` of the room between the margins (an entry is drawn at 12 px plus ~40 px for its symbol)."""
    lay = fig.layout
    names = [plain(tr.name) for tr in fig.data if tr.name and tr.showlegend is not False]
    if lay.showlegend is False or len(names) < 2:
        return []
    w, h, m = size(fig)
    if lay.legend and lay.legend.orientation == "h":
        # under the plot: below the x tick labels (two lines on a date axis) and the x-axis title, ~60 px
        lg = lay.legend
        y = lg.y if lg.y is not None else -0.1
        if lg.yref == "container":
            legend_h = 20 * len(names) + 10
            top = y * h + (legend_h if lg.yanchor == "bottom" else 0)
            return (
                []
                if m["b"] - top >= 60
                else [f"legend top {top:.0f} px reaches the x-axis title (margin {m['b']:.0f} px)"]
            )
        gap = -y * (h - m["t"] - m["b"])
        return [] if gap >= 60 else [f"legend {gap:.0f} px under the plot: over the x tick labels and axis title"]
    room = w - m["l"] - m["r"]
    title = plain(lay.legend.title.text) if lay.legend and lay.legend.title and lay.legend.title.text else ""
    lw = max(len(t) for t in names + [title]) * CHAR_W * 12 + 40
    return (
        [f"legend ({lw:.0f} px) leaves the plot {room - lw:.0f} of {room:.0f} px"]
        if room - lw < min_share * room
        else []
    )
