"""gpulib.run.index_page and the index.html write_index makes of a run root: newest first, verdict, cause, node/GPU,
parameters, UTC and local time, duration, a run still going said to be one, filters built from the rows, every value
escaped, and every row there without JavaScript."""

from __future__ import annotations

import html
import re

from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.run.index_page import render, write_index
from gpulib.run.record import write_status

EVIL = "<script>alert('x')</script>"


def _rec(i, **kw):
    base = {
        "id": f"20261201T06450{i}Z-xid_ecc_triage-00000{i}",
        "runbook": "xid_ecc_triage",
        "status": "done",
        "params": {"node": "n1", "gpu": "3"},
        "severity": "critical",
        "cause": "XID 79 on n1 GPU 3",
        "node": "n1",
        "gpu": "3",
        "created": 1796107500.0 + i,
        "started": 1796107500.0 + i,
        "finished": 1796107500.0 + i + 185,
        "html": "xid_ecc_triage.html",
    }
    return {**base, **kw}


def _rows(page):
    return re.findall(r"<tr data-runbook=.*?</tr>", page)


def test_rows_are_newest_first_with_verdict_where_times_and_duration():
    page = render([_rec(1), _rec(3, node="n2", cause="XID 48 on n2 GPU 0", gpu="0"), _rec(2)], lambda r: "x", title="t")
    rows = _rows(page)
    assert [re.search(r"-00000(\d)", r)[1] for r in rows] == ["3", "2", "1"]
    first = rows[0]
    assert "<td class='cause'>XID 48 on n2 GPU 0</td>" in first and "<td>n2 GPU 0</td>" in first
    assert "<td class='critical'>critical</td>" in first and "<td>node=n1, gpu=3</td>" in first
    # 1796107503 = 2026-12-01 06:45:03 UTC (date -u -d @1796107503); 185 s = 3 min 05 s
    assert "2026-12-01 06:45:03 UTC</time>" in first and "datetime='2026-12-01T06:45:03Z'" in first
    assert "<td>3 min 05 s</td>" in first and "data-ts='1796107503.0'" in first


def test_filters_list_the_rows_values_and_the_page_reads_without_javascript():
    recs = [_rec(1), _rec(2, runbook="fleet_overview", node="", severity="warning"), _rec(3, severity="ok")]
    page = render(recs, lambda r: "x", title="t")
    sel = dict(re.findall(r"<select id='f-(\w+)'>(.*?)</select>", page))
    assert re.findall(r"value='([^']*)'", sel["runbook"]) == ["", "fleet_overview", "xid_ecc_triage"]
    assert re.findall(r"value='([^']*)'", sel["node"]) == ["", "n1"]
    assert re.findall(r"value='([^']*)'", sel["severity"]) == ["", "critical", "warning", "ok"]
    # without JavaScript: the filters are hidden, every row is shown (none carries `hidden`), a note says so
    assert "<form id='filters' hidden>" in page and "<noscript>" in page
    assert len(_rows(page)) == 3 and not [r for r in _rows(page) if " hidden" in r.split(">", 1)[0]]


def test_a_run_still_going_says_so_and_has_no_report_link():
    page = render(
        [_rec(1, status="running", html=None, severity="", cause="", finished=None)], lambda r: None, title="t"
    )
    (row,) = _rows(page)
    assert "running: the report is still rendering" in row and "(no report yet)" in row and "<a " not in row
    assert "<td></td>" in row  # no duration yet


def test_every_value_is_escaped():
    rec = _rec(1, cause=EVIL, runbook="a'b", params={"x": EVIL}, node='n"1')
    page = render([rec], lambda r: "javascript:'x'", title=EVIL)
    assert EVIL not in page and "<script>alert" not in page
    assert html.escape(EVIL) in page and "data-runbook='a&#x27;b'" in page and "data-node='n&quot;1'" in page


def test_write_index_lists_finished_and_running_folders(tmp_path):
    done = tmp_path / "20261201T064500Z-xid_ecc_triage-aaaaaa"
    done.mkdir()
    write_status(done, runbook="xid_ecc_triage", status="running", started=10.0)
    save_findings(
        [Finding(Severity.CRITICAL, "XID 79 on n1 GPU 3", node="n1", gpu="3")],
        done / "findings.json",
        runbook="xid_ecc_triage",
        parameters={"node": "n1", "gpu": "3"},
    )
    (done / "xid_ecc_triage.html").write_text("<html></html>")
    write_status(done, status="done", finished=52.0)
    going = tmp_path / "20261201T064600Z-fleet_overview-bbbbbb"
    going.mkdir()
    write_status(going, runbook="fleet_overview", status="running", started=60.0)
    (tmp_path / "not-a-run").mkdir()
    page = write_index(tmp_path).read_text()
    rows = _rows(page)
    assert len(rows) == 2 and "fleet_overview" in rows[0] and "still rendering" in rows[0]
    assert f"<a href='{done.name}/xid_ecc_triage.html'>" in rows[1] and "XID 79 on n1 GPU 3" in rows[1]
    assert "<td>42 s</td>" in rows[1] and "<td>n1 GPU 3</td>" in rows[1]
