"""Every HTML page `gpuops demo` writes reads cleanly in an incident channel: no NaN / <NA> / None cells, no
pandas index column, no dict or list repr, no text cut with "…" in any rendered table.

One `gpuops demo --out DIR` run (session-scoped fixture) is shared by every check here."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.notebook


class _Tables(HTMLParser):
    """Cells of every <table>: (table index, row index, is_header, text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.cells: list[tuple[int, int, bool, str]] = []
        self._t, self._r, self._cell, self._depth = -1, -1, None, 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._depth += 1
            self._t += 1
            self._r = -1
        elif tag == "tr" and self._depth:
            self._r += 1
        elif tag in ("td", "th") and self._depth:
            self._cell = [tag == "th", ""]

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append((self._t, self._r, self._cell[0], self._cell[1].strip()))
            self._cell = None
        elif tag == "table":
            self._depth -= 1

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


_BAD_CELL = [(re.compile(r"^(NaN|nan|<NA>|None|NaT)$"), "missing value shown raw"),
             (re.compile(r"^[\[{].*[:'\"].*[\]}]$"), "dict/list repr"),
             (re.compile(r"…$|\.\.\.$"), "text cut with an ellipsis")]


def problems_in(html_text: str) -> list[str]:
    p = _Tables()
    p.feed(html_text)
    out = []
    for t, r, is_header, text in p.cells:
        for rx, why in _BAD_CELL:
            if rx.search(text):
                out.append(f"table {t} row {r}: {why}: {text[:80]!r}")
    # pandas' index column: the header row starts with an empty <th> and body rows start with a <th> 0, 1, 2...
    by_table: dict[int, list] = {}
    for t, r, is_header, text in p.cells:
        by_table.setdefault(t, []).append((r, is_header, text))
    for t, cells in by_table.items():
        firsts = {}
        for r, is_header, text in cells:
            firsts.setdefault(r, (is_header, text))
        rows = sorted(firsts)
        if len(rows) >= 3 and firsts[rows[0]] == (True, "") and all(
                firsts[r][0] and firsts[r][1] == str(i) for i, r in enumerate(rows[1:])):
            out.append(f"table {t}: pandas index column")
    return out


@pytest.fixture(scope="session")
def demo_html(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUOPS_END": "2026-11-29T12:00:00+00:00"}
    p = subprocess.run([sys.executable, "-m", "gpulib.cli", "demo", "--out", str(out), "-q"], capture_output=True,
                       text=True, env=env, timeout=1500, cwd=ROOT)
    pages = sorted(out.glob("*/*.html"))
    assert pages, p.stdout[-2000:] + p.stderr[-2000:]
    return out, pages, p


def test_scanner_catches_planted_reprs():
    import pandas as pd

    bad = pd.DataFrame({"gpu": [1.0, None], "labels": [{"a": 1}, ["x", "y"]], "note": ["fine", "cut off…"]})
    found = " ".join(problems_in(bad.to_html()))
    for why in ("missing value", "dict/list repr", "ellipsis", "pandas index column"):
        assert why in found, found
    assert problems_in(bad.fillna("").astype(str).assign(labels="a=1").to_html(index=False).replace("cut off…", "cut off")) == []


def test_no_raw_reprs_in_any_rendered_table(demo_html):
    out, pages, _ = demo_html
    problems = [f"{p.relative_to(out)}: {x}" for p in pages for x in problems_in(p.read_text(errors="replace"))]
    assert not problems, "\n".join(problems[:80])


def test_summary_md_beside_each_runbook_html(demo_html):
    out, pages, _ = demo_html
    runs = [p for p in pages if not p.parent.name.split("-")[1].startswith("learn_")]
    missing = [str(p.parent.name) for p in runs if not (p.parent / "summary.md").is_file()]
    assert not missing, missing
    text = (runs[0].parent / "summary.md").read_text()
    assert "**Verdict:**" in text and "Parameters:" in text


def test_kernel_warning_not_shown(demo_html):
    _, _, proc = demo_html
    assert "without encryption" not in proc.stdout + proc.stderr
