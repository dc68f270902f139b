"""The run index of a real ``gpuops demo`` output in headless Chromium (the binary and flags of
tests/project/test_report_browser.py): every run's cause is visible, the filters narrow the rows (from the URL
fragment and from a changed select), and the page has no script error.

A probe script appended to a copy of the page reports what the browser shows: the runbook and the rendered text of
the cause cell of every row that is displayed (``offsetParent`` is null for a hidden row), written into the DOM that
``--dump-dom`` prints. Skipped without chromium unless GPUOPS_REQUIRE_BROWSER=1."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.project.test_report_browser import BUDGET_MS, FLAGS, chromium_binary, script_errors

PROBE = """<script>
(function () {
  %s
  var seen = [];
  document.querySelectorAll('#runs tbody tr').forEach(function (tr) {
    if (tr.offsetParent !== null) {
      seen.push([tr.getAttribute('data-runbook'), tr.querySelector('td.cause').innerText]);
    }
  });
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({seen: seen, shown: document.getElementById('shown').textContent,
                                    filters: !document.getElementById('filters').hidden});
  document.body.appendChild(pre);
})();
</script>"""
CHANGE = "var s = document.getElementById('f-severity'); s.value = 'critical'; s.dispatchEvent(new Event('change'));"


@pytest.fixture(scope="module")
def demo(shared_runs):
    run = shared_runs.demo()
    assert (run.out / "index.html").is_file(), run.proc.stderr[-2000:]
    return run.out


def _worst(out: Path) -> dict[str, str]:
    """runbook -> worst severity, read from each demo run's findings.json (not from the page)."""
    out_map = {}
    for fj in out.glob("*/findings.json"):
        doc = json.loads(fj.read_text())
        out_map[doc["runbook"]] = doc["worst"]
    return out_map


def _open(demo: Path, tmp_path: Path, fragment: str = "", action: str = "") -> tuple[dict, str]:
    page = tmp_path / "index.html"
    text = (demo / "index.html").read_text()
    page.write_text(text.replace("</body>", PROBE % action + "</body>"))
    (tmp_path / "profile").mkdir(exist_ok=True)
    cmd = [
        chromium_binary(),
        *FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--virtual-time-budget={BUDGET_MS}",
        "--dump-dom",
        page.resolve().as_uri() + fragment,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-2000:]
    return json.loads(m[1].replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")), (
        proc.stderr
    )


def test_every_run_and_its_cause_is_visible(demo, tmp_path):
    got, err = _open(demo, tmp_path)
    worst = _worst(demo)
    assert got["filters"] is True and script_errors(err) == []
    assert sorted(rb for rb, _ in got["seen"]) == sorted(worst)
    causes = dict(got["seen"])
    assert causes["xid_ecc_triage"] == "XID 79 on dgx-h100-1 GPU 5: hardware (RESTART_BM)"
    assert all(c.strip() for c in causes.values())  # every run shows a cause ("no finding" for the lessons)
    assert got["shown"] == f"{len(worst)} of {len(worst)} runs shown"


def test_the_url_fragment_filters_by_runbook_and_node(demo, tmp_path):
    got, _ = _open(demo, tmp_path, "#runbook=xid_ecc_triage")
    assert got["seen"] == [["xid_ecc_triage", "XID 79 on dgx-h100-1 GPU 5: hardware (RESTART_BM)"]]
    got, _ = _open(demo, tmp_path, "#node=dgx-h100-0")
    assert [rb for rb, _ in got["seen"]] == ["nccl_check"]


def test_changing_the_severity_select_narrows_the_rows(demo, tmp_path):
    got, err = _open(demo, tmp_path, action=CHANGE)
    critical = sorted(rb for rb, sev in _worst(demo).items() if sev == "critical")
    assert len(critical) >= 2 and sorted(rb for rb, _ in got["seen"]) == critical
    assert got["shown"].startswith(f"{len(critical)} of ") and script_errors(err) == []
