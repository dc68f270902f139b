"""Open the generated utilization report in a real headless Chromium (Debian's ``chromium`` package, no browser
download): every chart rendered with data, no script error in the console, and a screenshot saved as an artifact.

Skipped when chromium is not installed, unless GPUOPS_REQUIRE_BROWSER=1 (CI), then it fails.
Screenshots go to $GPUOPS_ARTIFACT_DIR when set (CI keeps them), else to the test's tmp folder.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

CHART_TITLES = ("GPU activity per node", "Allocation vs activity per namespace", "Savings waterfall")
WINDOW = (1280, 2000)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
#: virtual time Chromium gives the page's scripts before dumping or shooting (ms)
BUDGET_MS = "15000"


def chromium_binary() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        msg = "headless Chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it)"
        if os.environ.get("GPUOPS_REQUIRE_BROWSER") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def run_chromium(exe: str, page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    profile.mkdir(parents=True, exist_ok=True)
    cmd = [
        exe,
        *FLAGS,
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        f"--virtual-time-budget={BUDGET_MS}",
        *extra,
        page.resolve().as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def script_errors(stderr: str) -> list[str]:
    """Console lines Chromium logs for uncaught exceptions / failed script loads."""
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln and ("Uncaught" in ln or "is not defined" in ln)]


def chart_blocks(dom: str) -> list[str]:
    """The rendered DOM of each plotly chart (from one plot-container to the next)."""
    return re.split(r'class="plot-container plotly"', dom)[1:]


def has_data(block: str) -> bool:
    """A heatmap draws an <image> in g.hm; bar and waterfall charts draw one g.point per bar."""
    return (
        bool(re.search(r'<g class="hm"', block) and "<image" in block) or len(re.findall(r'class="point"', block)) > 0
    )


@pytest.fixture(scope="module")
def exe():
    return chromium_binary()


@pytest.fixture(scope="module")
def report_html(exe, shared_runs):
    """The report as `gpuops report` writes it on the demo fleet (7 d, its default: the session's demo run of it)."""
    res = shared_runs.run("gpu_utilization_report", source="demo", window="7d")
    assert res.failed is None and res.errors == [] and res.html is not None
    return res.html


def test_every_chart_renders_with_data_and_no_script_errors(exe, report_html, tmp_path):
    proc = run_chromium(exe, report_html, tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    n_divs = len(re.findall(r'class="plotly-graph-div"', report_html.read_text()))
    blocks = chart_blocks(dom)
    assert n_divs == len(CHART_TITLES) and len(blocks) == n_divs  # every chart div became a plot
    for title in CHART_TITLES:
        block = next((b for b in blocks if title in b[:200000]), None)
        assert block is not None, f"chart {title!r} not rendered"
        assert has_data(block), f"chart {title!r} rendered without data"
        assert dom.count('class="main-svg"') >= 2 * n_divs
    assert script_errors(proc.stderr) == []
    assert "jupyter-alice" in dom  # the zombie table is in the page


def test_screenshot_artifact(exe, report_html, tmp_path):
    art = Path(os.environ.get("GPUOPS_ARTIFACT_DIR") or tmp_path)
    art.mkdir(parents=True, exist_ok=True)
    shot = art / "gpu_utilization_report.png"
    proc = run_chromium(
        exe, report_html, tmp_path / "profile", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}"
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == WINDOW
    assert shot.stat().st_size > 50_000  # a blank page compresses to a few KiB


def test_detectors_catch_a_broken_page(exe, tmp_path):
    """Negative control: a script error and a chart div plotly never drew are both caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<html><body><div class='plotly-graph-div'></div><script>throw new Error('report-boom')</script></body></html>"
    )
    proc = run_chromium(exe, page, tmp_path / "profile", "--dump-dom")
    errs = script_errors(proc.stderr)
    assert errs and "report-boom" in errs[0]
    assert chart_blocks(proc.stdout) == []


#: what a mail client does to a page's scripts, in the page itself: a Content-Security-Policy that runs none
#: (https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Content-Security-Policy/script-src); Chromium's own
#: --blink-settings=scriptEnabled=false leaves headless Chromium unable to dump or shoot the page at all
NO_SCRIPTS = "<meta http-equiv=\"Content-Security-Policy\" content=\"script-src 'none'\">"


def test_every_chart_is_visible_without_javascript(exe, report_html, tmp_path):
    """With scripts off (a mail client), each chart's static SVG shows and the empty interactive box stays hidden;
    with scripts on, plotly's chart replaces it. Failed before: every chart was a blank div without JavaScript."""
    page = report_html.read_text()
    n = len(re.findall(r'class="plotly-graph-div"', page))
    off_page = tmp_path / "no-scripts.html"
    off_page.write_text(page.replace("<head>", "<head>" + NO_SCRIPTS, 1))
    off = run_chromium(exe, off_page, tmp_path / "off", "--dump-dom")
    assert off.returncode == 0, off.stderr[-2000:]
    assert chart_blocks(off.stdout) == []  # no script ran: plotly drew nothing
    statics = re.findall(r'<div class="gpuops-static"( style="[^"]*")?>(<svg.*?</svg>)</div>', off.stdout, re.S)
    assert len(statics) == n == len(CHART_TITLES)
    for style, svg in statics:
        assert "none" not in (style or "") and ("<rect" in svg or "<polyline" in svg)
    lives = re.findall(r'<div class="gpuops-live" style="([^"]*)"', off.stdout)
    assert len(lives) == n and all("none" in s for s in lives)  # the empty interactive box stays hidden
    shots = {}
    for name, body in (("charts", "".join(svg for _, svg in statics)), ("blank", "")):
        one_page = tmp_path / f"{name}.html"
        one_page.write_text(f"<html><head>{NO_SCRIPTS}</head><body>{body}</body></html>")
        shot = tmp_path / f"{name}.png"
        proc = run_chromium(exe, one_page, tmp_path / f"p-{name}", "--window-size=1280,1000", f"--screenshot={shot}")
        assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
        shots[name] = shot.stat().st_size
    assert shots["charts"] > 4 * shots["blank"], shots  # drawn marks, not an empty page
    on = run_chromium(exe, report_html, tmp_path / "on", "--dump-dom")
    hidden = re.findall(r'<div class="gpuops-static" style="display: none;">', on.stdout)
    assert len(hidden) == n and len(chart_blocks(on.stdout)) == n
