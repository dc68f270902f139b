"""A file or folder parameter that matches nothing is a usage error (exit 2) found before any kernel starts
(gpulib/run/params.py check_paths, from ``Param.kind`` of the runbook's definition): the message the kernel gave
after a notebook run, in a fraction of the time, with no run folder written. A relative path is the file the kernel
would read, handed on as its absolute path."""

from __future__ import annotations

import os
import time

import pytest

from gpulib import cli
from gpulib.core.errors import InvalidParameter
from gpulib.core.runbook import PATH_KINDS
from gpulib.inspection import server_only
from gpulib.run.catalogue import LESSONS, RUNBOOKS, definition, find_notebook
from gpulib.run.params import path_params, prepare

MISSING = "/nonexistent/gpuops-test-input"

#: (runbook, parameter, what else the run needs, the message's ending) for every declared file parameter
CASES = [
    ("nccl_check", "nccl_log_file", [], "no such file or folder"),
    ("nccl_check", "nccl_tests_file", [], "no such file"),
    ("nccl_check", "topology_file", [], "no such file"),
    ("xid_ecc_triage", "smi_file", ["-p", "node", "dgx-h100-1", "-p", "gpu", "5"], "no such file"),
    ("xid_ecc_triage", "kernel_log_file", [], "no such file"),
    ("xid_ecc_triage", "diag_file", [], "no such file"),
    ("gpu_utilization_report", "price_file", [], "no such file"),
    ("operator_install", "operator_logs", [], "no such file or folder"),
]
#: runbooks whose snapshot_dir is a folder the snapshot source reads
SNAPSHOT_RUNBOOKS = ["fleet_overview", "xid_ecc_triage", "nccl_check", "gpu_utilization_report", "node_health"]


def run(args, capsys):
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err, time.perf_counter() - t0


@pytest.fixture
def no_kernel(monkeypatch):
    """A spy on the run engine: a kernel started for a bad path fails the test."""
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
    monkeypatch.setattr(cli.engine, "execute", lambda *a, **k: pytest.fail("a kernel was started for a bad path"))


def _declared() -> set[tuple[str, str]]:
    return {(n, p) for n in [*RUNBOOKS, *LESSONS] for p in path_params(n)}


def test_every_declared_file_parameter_has_a_case():
    """The cases below cover every file parameter the definitions declare (snapshot_dir has its own test)."""
    assert {(r, p) for r, p in _declared() if p != "snapshot_dir"} == {(r, p) for r, p, _, _ in CASES}
    assert {(r, "snapshot_dir") for r in SNAPSHOT_RUNBOOKS} <= _declared()


@pytest.mark.parametrize(("runbook", "param", "extra", "needle"), CASES, ids=[c[1] for c in CASES])
def test_a_missing_file_parameter_exits_2_before_any_kernel(runbook, param, extra, needle, no_kernel, capsys, tmp_path):
    code, out, err, wall = run(["run", runbook, "-p", param, MISSING, *extra, "-o", str(tmp_path)], capsys)
    assert code == cli.EXIT_USAGE, (code, out, err)
    assert f"{param}={MISSING!r}: {needle}" in err and "Traceback" not in out + err
    assert not any(tmp_path.iterdir())  # no run folder, no index: nothing ran
    assert wall < 10, wall  # a notebook run that found it took 13 s and more


@pytest.mark.parametrize("runbook", SNAPSHOT_RUNBOOKS)
def test_a_missing_snapshot_folder_exits_2_before_any_kernel(runbook, no_kernel, capsys, tmp_path):
    """Before: the kernel's first step said 'snapshot folder ... does not exist' and the run ended INCOMPLETE (3)."""
    node = ["-p", "node", "n1"] if runbook in ("xid_ecc_triage", "node_health") else []  # no demo node on a snapshot
    for args in (["--snapshot", MISSING], ["-p", "source", "snapshot", "-p", "snapshot_dir", MISSING]):
        code, out, err, _ = run(["run", runbook, *args, *node, "-o", str(tmp_path)], capsys)
        assert code == cli.EXIT_USAGE, (code, err)
        assert f"snapshot_dir={MISSING!r}: no such folder" in err
        assert not any(tmp_path.iterdir())


def test_a_fifo_a_folder_or_a_device_is_refused_not_read(no_kernel, capsys, tmp_path):
    """A FIFO is never opened (a kernel reading one waited for a writer: pandas' read_csv of price_file hung), as
    the snapshot reader refuses one (gpulib/core/files.py read_regular)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out_dir = tmp_path / "out"
    for param, runbook, value, needle in [
        ("price_file", "gpu_utilization_report", str(fifo), "is a FIFO (named pipe), not a file"),
        ("smi_file", "xid_ecc_triage", str(tmp_path), "is a folder, not a file"),
        ("kernel_log_file", "xid_ecc_triage", "/dev/null", "is a device, not a file"),
        ("nccl_log_file", "nccl_check", f"{tmp_path},{fifo}", "is a FIFO (named pipe), not a file or folder"),
        ("snapshot_dir", "fleet_overview", str(fifo), "is a FIFO (named pipe), not a folder"),
    ]:
        extra = ["-p", "source", "snapshot"] if param == "snapshot_dir" else []
        code, out, err, _ = run(["run", runbook, *extra, "-p", param, value, "-o", str(out_dir)], capsys)
        assert code == cli.EXIT_USAGE and needle in err, (param, code, err)
        assert not out_dir.exists()


def test_a_relative_path_is_read_where_the_caller_is_and_handed_on_absolute(tmp_path, monkeypatch):
    """``kubectl logs job/nccl-probe > nccl-probe.txt && gpuops run nccl_check -p nccl_tests_file nccl-probe.txt``
    (README): the file is in the caller's folder, the kernel runs in the notebook's; the kernel gets the path of
    the file that was checked."""
    from gpulib.nccl.steps import read_input

    (tmp_path / "nccl-probe.txt").write_text("# nccl-tests output\n")
    monkeypatch.chdir(tmp_path)
    info = find_notebook("nccl_check")
    params = prepare(info, [("nccl_tests_file", "nccl-probe.txt")])
    assert params["nccl_tests_file"] == str(tmp_path / "nccl-probe.txt")
    monkeypatch.chdir(info.path.parent)  # where the kernel runs
    assert read_input(params["nccl_tests_file"], "nccl_tests_file")[1] == str(tmp_path / "nccl-probe.txt")


def test_paths_that_ran_before_still_run(tmp_path, monkeypatch):
    """A path relative to the notebook's folder (where the kernel read it) and a packaged demo log named from the
    checkout (gpulib/nccl/joblog.py log_paths) are found from any folder, and an absolute path is handed on as
    given."""
    from gpulib.nccl.joblog import log_paths

    monkeypatch.chdir(tmp_path)
    info = find_notebook("nccl_check")
    demo_log = "gpulib/data/demo/nccl_job_oom_one_rank.log"
    params = prepare(info, [("nccl_log_file", demo_log), ("topology_file", "../README.md")])
    checkout = info.path.parent.parent
    assert params["nccl_log_file"] == str(checkout / demo_log)
    assert log_paths(params["nccl_log_file"]) == log_paths(demo_log)  # the file the kernel read before
    assert params["topology_file"] == os.path.abspath(info.path.parent / "../README.md")
    absolute = str(checkout / demo_log)
    assert prepare(info, [("nccl_log_file", f"{absolute}, {absolute}")])["nccl_log_file"] == f"{absolute},{absolute}"
    assert prepare(info, [("topology_file", absolute)])["topology_file"] == absolute


def test_an_empty_path_parameter_is_the_default_not_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = prepare(find_notebook("xid_ecc_triage"), [("smi_file", ""), ("kernel_log_file", "")])
    assert params["smi_file"] == "" and params["kernel_log_file"] == ""


def test_a_request_to_serve_or_mcp_never_sets_a_path_parameter(tmp_path):
    """Only the one who runs gpuops names a path on its machine: every declared path parameter is refused from a
    request (operator_logs, a file or folder of operand logs, was accepted: its name ends in neither _file nor
    _dir)."""
    from gpulib.mcp.tools import Tools
    from gpulib.serve.routing import check_params, load_catalogue

    cat, tools = load_catalogue(), Tools(tmp_path / "runs")
    for runbook, param in _declared():
        if runbook in cat and cat[runbook].kind == "runbook":  # serve runs runbooks, gpuops mcp reports too
            with pytest.raises(InvalidParameter, match="set by the server"):
                check_params(runbook, {param: "/etc"}, cat)
        if runbook in cat and cat[runbook].kind != "learn":
            with pytest.raises(InvalidParameter, match="set by the server"):
                tools.run_runbook(runbook, {param: "/etc"})
    books = {b["name"]: b for b in tools.list_runbooks()["runbooks"]}
    assert {p["name"]: p["set_by"] for p in books["operator_install"]["parameters"]}["operator_logs"] == "server"
    assert not (tmp_path / "runs").exists()
    assert server_only("smi_file") and server_only("snapshot_dir")  # the names' rule stays


def test_a_path_kind_is_one_of_the_kinds_on_a_text_parameter():
    from gpulib.core.runbook import Param

    assert {p.kind for n in RUNBOOKS for p in definition(n).params} <= {"", *PATH_KINDS}
    with pytest.raises(TypeError):
        Param("smi_file", "", kind="pipe")
    with pytest.raises(TypeError):
        Param("count", 0, kind="file")
