"""``gpuops run`` records its run through the run record (gpulib/run/record.py EngineRecord): the same
RunRecord events and transitions as a ``gpuops serve`` run, written to the run folder's status.json with the time of
each status; a crash (a full disk, a bug) ends the record failed, with exit 3.

The notebook is replaced by a stand-in that writes the findings a notebook writes (no kernel, papermill's
``execute_notebook`` is where the engine hands over); ``test_a_demo_run_records_its_transitions`` reads real runs."""

from __future__ import annotations

import ast
import errno
import json
import re
from pathlib import Path

import pytest

from gpulib import cli
from gpulib.core.findings import save_findings
from gpulib.run import render
from gpulib.run.index_page import read_run
from gpulib.run.record import FINDINGS_FILE, STATUS_FILE, EngineRecord

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def notebook(monkeypatch):
    """A stand-in notebook: it notes the record as it was when the notebook started, and writes findings.json with
    ``errors`` (none: a run that got its data) as the notebook's ``rb.finish()`` does."""
    import papermill

    seen: dict = {"errors": []}

    def execute_notebook(src, out, *, parameters, **kw):
        folder = Path(out).parent
        seen["at_start"] = json.loads((folder / STATUS_FILE).read_text())
        save_findings([], folder / FINDINGS_FILE, runbook=Path(src).stem, parameters=parameters, errors=seen["errors"])

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
    return seen


def gpuops_run(tmp_path, capsys, *args):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "fleet_overview", "-o", str(tmp_path), "-q", *args])
    out = capsys.readouterr()
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return e.value.code, out.out + out.err, folder, json.loads((folder / STATUS_FILE).read_text())


def statuses(doc) -> list[str]:
    return [t["status"] for t in doc["transitions"]]


def test_gpuops_run_records_queued_running_done(notebook, tmp_path, capsys):
    code, out, folder, doc = gpuops_run(tmp_path, capsys)
    assert code == 0, out  # no finding, no error
    assert statuses(notebook["at_start"]) == ["queued", "running"] and notebook["at_start"]["status"] == "running"
    assert statuses(doc) == ["queued", "running", "done"] and doc["status"] == "done"
    times = [t["at"] for t in doc["transitions"]]
    assert times == sorted(times) and doc["started"] == times[1] and doc["finished"] == times[2]
    assert doc["runbook"] == "fleet_overview" and doc["params"] == {} and doc["error"] is None
    assert read_run(folder)["status"] == "done"  # the run index reads the same record


def test_a_run_without_its_data_ends_incomplete_exit_3(notebook, tmp_path, capsys):
    notebook["errors"] = ["Load the fleet: no nodes"]
    code, out, folder, doc = gpuops_run(tmp_path, capsys)
    assert code == cli.EXIT_FAILED and statuses(doc) == ["queued", "running", "incomplete"]


@pytest.mark.parametrize(
    ("where", "crash", "trail"),
    [
        ("kernel_manager", MemoryError(), ["queued", "running", "failed"]),
        ("write_summary", OSError(errno.ENOSPC, "No space left on device"), ["queued", "running", "failed"]),
        ("_print_result", RuntimeError("a bug after the run"), ["queued", "running", "done", "failed"]),
    ],
    ids=["before_the_kernel", "after_the_notebook", "after_the_run"],
)
def test_a_crash_ends_the_record_failed_with_exit_3(notebook, tmp_path, capsys, monkeypatch, where, crash, trail):
    def boom(*a, **k):
        raise crash

    monkeypatch.setattr(cli if where == "_print_result" else render, where, boom)
    code, out, folder, doc = gpuops_run(tmp_path, capsys)
    assert code == cli.EXIT_FAILED and type(crash).__name__ in out and "Traceback" not in out
    assert statuses(doc) == trail and doc["status"] == "failed"
    assert doc["error"].startswith(type(crash).__name__) and doc["finished"] == doc["transitions"][-1]["at"]
    assert read_run(folder)["status"] == "failed"


def test_the_record_refuses_a_transition_the_table_has_not(tmp_path):
    rec = EngineRecord(tmp_path)
    rec.queued("fleet_overview", {})
    rec.started()
    rec.ended("done", None)
    with pytest.raises(ValueError, match="done cannot become running"):
        rec.started()
    rec.queued("fleet_overview", {})  # a render Job run again in its folder starts a new record
    assert statuses(json.loads((tmp_path / STATUS_FILE).read_text())) == ["queued"]


def test_only_the_run_record_writes_status_json():
    """The engine and the front ends write a run's status through EngineRecord; write_status stays record.py's."""
    users = []
    for path in sorted((ROOT / "gpulib").rglob("*.py")):
        if path == ROOT / "gpulib" / "run" / "record.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Name)
                and node.id == "write_status"
                or (isinstance(node, ast.alias) and node.name == "write_status")
            ):
                users.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}")
    assert users == []


@pytest.mark.notebook
def test_a_demo_run_records_its_transitions(shared_runs):
    """Real notebook runs (``gpuops demo``): each folder's record went queued, running, then the status the command
    printed for it."""
    demo = shared_runs.demo()
    printed = dict(re.findall(r"^== (\S+): (FAILED|BAD PARAMETER|INCOMPLETE|done) ·", demo.proc.stdout, re.M))
    folders = [p for p in demo.out.iterdir() if (p / STATUS_FILE).is_file()]
    assert folders and printed
    for folder in folders:
        doc = json.loads((folder / STATUS_FILE).read_text())
        assert statuses(doc)[:2] == ["queued", "running"] and len(doc["transitions"]) == 3, (folder.name, doc)
        assert doc["status"] == statuses(doc)[-1] == printed[doc["runbook"]].lower(), (folder.name, doc)
