"""plotly.js once per folder of runs: in the "shared" mode (``gpuops demo --out DIR``, ``gpuops serve``'s run store,
``gpuops report --charts shared``, ``GPUOPS_CHARTS=shared``) each report names ``../plotly-<version>.min.js``, written
once beside the run folders, instead of carrying ~5 MB of plotly.js in its HTML and again in its executed notebook; a
run folder then weighs what it shows. A plain ``gpuops run`` / ``gpuops report`` stays self-contained (inline: a report
e-mailed to a manager opens offline). The charts themselves in Chromium: tests/project/test_report_browser_shared.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs, get_plotlyjs_version
from typer.testing import CliRunner

from gpulib import cli
from gpulib.core.settings import CHARTS_ENV
from gpulib.run.catalogue import find_notebook
from gpulib.run.params import prepare
from gpulib.run.render import execute

pytestmark = pytest.mark.notebook

#: a runbook whose report draws small charts (three, each a few hundred points)
NAME = "fleet_overview"
#: the banner at the head of plotly.js's bundle: present where the bundle was copied in
BUNDLE_MARK = f"plotly.js v{get_plotlyjs_version()}"
SHARED = f"plotly-{get_plotlyjs_version()}.min.js"


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture(autouse=True)
def no_setting(monkeypatch):
    monkeypatch.delenv(CHARTS_ENV, raising=False)


def test_shared_runs_weigh_what_they_show_and_name_one_copy(tmp_path, monkeypatch):
    """Failed before: execute had no shared way; every run folder carried plotly.js twice (10-12 MB a run)."""
    info = find_notebook(NAME)
    one = execute(info, prepare(info, source="demo"), tmp_path, progress=False, charts="shared")
    # gpuops demo --out DIR writes its runs the same way, into the same folder: still one copy
    monkeypatch.setattr(cli, "catalogue", lambda: {NAME: info})
    r = CliRunner().invoke(cli.app, ["demo", "--out", str(tmp_path), "-q", "--no-include-learn"])
    assert r.exit_code == 0, r.output
    runs = sorted(p for p in tmp_path.iterdir() if p.is_dir() and NAME in p.name)
    assert len(runs) == 2 and one.out_dir in runs
    assert [p.name for p in tmp_path.glob("plotly-*")] == [SHARED]
    assert (tmp_path / SHARED).read_bytes() == get_plotlyjs().encode()
    for d in runs:
        html = (d / f"{NAME}.html").read_text()
        assert html.count('class="plotly-graph-div"') >= 1  # the charts are there
        assert html.count(f'src="../{SHARED}"') == 1  # plotly.js named once, relatively
        assert BUNDLE_MARK not in html and BUNDLE_MARK not in (d / f"{NAME}.ipynb").read_text()
        assert html.count("gpuops-static") == html.count('class="plotly-graph-div"')  # the static chart beside each
        assert _bytes(d) < 1_000_000, _bytes(d)


def test_a_plain_run_stays_self_contained(tmp_path):
    """What `gpuops run` and `gpuops report` write without a flag: plotly.js inline, no file named beside it."""
    info = find_notebook(NAME)
    res = execute(info, prepare(info, source="demo"), tmp_path, progress=False)
    html = res.html.read_text()
    assert html.count(BUNDLE_MARK) == 1 and 'src="../plotly-' not in html
    assert list(tmp_path.glob("plotly-*")) == []


def test_the_setting_and_the_report_flag_choose_the_shared_way(tmp_path, monkeypatch):
    from gpulib.inspection import PLOTLY_JS_MODES

    assert "shared" in PLOTLY_JS_MODES  # gpuops report --charts shared
    assert cli._charts_option("shared") == [("charts", "shared")]
    monkeypatch.setenv(CHARTS_ENV, "shared")
    info = find_notebook(NAME)
    res = execute(info, prepare(info, source="demo"), tmp_path, progress=False)
    assert f'src="../{SHARED}"' in res.html.read_text() and (tmp_path / SHARED).is_file()
