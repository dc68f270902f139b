"""The report in headless Chromium when plotly.js is one shared copy (``gpuops demo --out DIR`` writes
DIR/plotly-<version>.min.js once and each report names it as ``../plotly-<version>.min.js``): the charts are drawn and
interactive from that copy; a report whose copy is missing (the HTML mailed alone) keeps each chart's static SVG
instead of a blank box; a report made with plotly.js inline (what `gpuops report` writes by default) still draws
every chart. Same browser and checks as tests/project/test_report_browser.py."""

from __future__ import annotations

import re
import shutil

from plotly.offline import get_plotlyjs_version

from tests.project.test_report_browser import (  # noqa: F401 (exe and report_html are fixtures)
    CHART_TITLES,
    chart_blocks,
    exe,
    has_data,
    report_html,
    run_chromium,
    script_errors,
)

SHARED = f"plotly-{get_plotlyjs_version()}.min.js"
BUNDLE_MARK = f"plotly.js v{get_plotlyjs_version()}"


def _drawn(proc, n):
    dom = proc.stdout
    blocks = chart_blocks(dom)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(blocks) == n == len(CHART_TITLES), (len(blocks), n)
    for title in CHART_TITLES:
        block = next((b for b in blocks if title in b[:200000]), None)
        assert block is not None and has_data(block), title
    assert len(re.findall(r'<div class="gpuops-static" style="display: none;">', dom)) == n  # live replaced static
    assert script_errors(proc.stderr) == []


def test_the_demo_report_draws_its_charts_from_the_one_shared_copy(exe, report_html, tmp_path):  # noqa: F811
    """Failed before: the demo's report carried its own plotly.js (5 MB) and named no shared copy."""
    page = report_html.read_text()
    assert page.count(f'src="../{SHARED}"') == 1 and BUNDLE_MARK not in page
    assert (report_html.parent.parent / SHARED).is_file()
    n = len(re.findall(r'class="plotly-graph-div"', page))
    _drawn(run_chromium(exe, report_html, tmp_path / "profile", "--dump-dom"), n)


def test_a_report_without_its_shared_copy_keeps_the_static_charts(exe, report_html, tmp_path):  # noqa: F811
    """The report's HTML alone (mailed, or its folder copied without the copy): scripts run, plotly.js does not load,
    and each chart stays its static SVG, not an empty box. Failed before: the swap ran without plotly.js and hid the
    static chart (a blank box)."""
    alone = tmp_path / "mail" / "report"
    alone.mkdir(parents=True)
    page = shutil.copy(report_html, alone / report_html.name)
    n = len(re.findall(r'class="plotly-graph-div"', report_html.read_text()))
    proc = run_chromium(exe, page, tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert chart_blocks(proc.stdout) == []  # nothing drawn by plotly
    statics = re.findall(r'<div class="gpuops-static"( style="[^"]*")?>(<svg.*?</svg>)</div>', proc.stdout, re.S)
    assert len(statics) == n and all("none" not in (style or "") for style, _ in statics)
    lives = re.findall(r'<div class="gpuops-live" style="([^"]*)"', proc.stdout)
    assert len(lives) == n and all("none" in s for s in lives)


def test_an_inline_report_still_draws_every_chart(exe, shared_runs, tmp_path):  # noqa: F811
    """`gpuops report --charts inline` (the default of a plain `gpuops report`): self-contained, drawn."""
    res = shared_runs.run("gpu_utilization_report", source="demo", window="7d", charts="inline")
    assert res.failed is None and res.errors == []
    html = res.out_dir / "gpu_utilization_report.html"
    page = html.read_text()
    assert page.count(BUNDLE_MARK) == 1 and 'src="../plotly-' not in page
    _drawn(run_chromium(exe, html, tmp_path / "profile", "--dump-dom"), len(CHART_TITLES))
