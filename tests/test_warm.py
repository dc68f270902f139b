"""Warm kernels (gpulib/warm.py) through the run engine: a run takes a pre-started kernel with gpulib imported, the
kernel is used once and replaced in the background, a second run does not see the first run's globals, the run's
environment (where findings.json goes) and folder are its own, and the run timeout kills a warm kernel too."""

from __future__ import annotations

import os
import time

import pytest

from gpulib.catalogue import find_notebook
from gpulib.execute import _shutdown, execute
from gpulib.warm import WarmKernels
from tests.serve.test_app import _alive, planted_home

PROBE = """import os, sys
from pathlib import Path
run = Path(os.environ["GPUOPS_FINDINGS_PATH"]).parent
seen = "leak" in globals()
leak = 1
(run / "probe.txt").write_text(f"{os.getpid()} {seen} {'gpulib.runbook' in sys.modules} {os.getcwd()} "
                               f"{os.environ.get('GPUOPS_SERVE_TOKEN', 'absent')}")"""
HANG = """import os, time
from pathlib import Path
(Path(os.environ["GPUOPS_FINDINGS_PATH"]).parent / "pid.txt").write_text(str(os.getpid()))
time.sleep(300)"""


def wait_ready(pool: WarmKernels, n: int, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while pool.ready < n and time.monotonic() < end:
        time.sleep(0.1)
    assert pool.ready >= n, f"{pool.ready} warm kernel(s) after {timeout} s (failed: {pool.failed})"


@pytest.mark.notebook
def test_each_run_gets_a_fresh_warm_kernel_and_sees_no_other_runs_globals(tmp_path, monkeypatch):
    home = planted_home(tmp_path, PROBE)
    monkeypatch.setenv("GPUOPS_HOME", str(home))
    monkeypatch.setenv("GPUOPS_SERVE_TOKEN", "secret-token-" + "z" * 20)
    pool = WarmKernels(1, unset=("GPUOPS_SERVE_TOKEN",))
    try:
        wait_ready(pool, 1)
        info = find_notebook("xid_ecc_triage")
        probes = []
        for i in range(2):
            (tmp_path / f"run{i}").mkdir()
            res = execute(info, {}, tmp_path, progress=False, out_dir=tmp_path / f"run{i}", warm=pool)
            assert res.warm, f"run {i} did not get a warm kernel"
            probes.append((tmp_path / f"run{i}" / "probe.txt").read_text().split())
            if i == 0:
                wait_ready(pool, 1)  # the replacement started in the background
        (pid0, seen0, pre0, cwd0, tok0), (pid1, seen1, pre1, cwd1, tok1) = probes
        assert pid0 != pid1, "a kernel was used twice"
        assert seen0 == seen1 == "False", "a run saw another run's globals"
        assert pre0 == pre1 == "True", "gpulib was not imported ahead"
        assert cwd0 == cwd1 == str(home / "runbooks")  # the notebook's folder, as a cold kernel has it
        assert tok0 == tok1 == "absent"  # the webhook token never reaches a kernel
        deadline = time.monotonic() + 10
        while _alive(int(pid0)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(int(pid0)), "the first run's kernel outlived its run"
    finally:
        pool.close()


@pytest.mark.notebook
def test_the_run_timeout_kills_a_warm_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_HOME", str(planted_home(tmp_path, HANG)))
    pool = WarmKernels(1)
    try:
        wait_ready(pool, 1)
        t0 = time.monotonic()
        (tmp_path / "r").mkdir()
        res = execute(
            find_notebook("xid_ecc_triage"),
            {},
            tmp_path,
            progress=False,
            out_dir=tmp_path / "r",
            warm=pool,
            run_timeout=8,
        )
        assert res.warm and res.timed_out and "timed out after 8 s" in res.failed
        assert time.monotonic() - t0 < 60
        pid = int((tmp_path / "r" / "pid.txt").read_text())
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid), "the warm kernel survived the run timeout"
    finally:
        pool.close()


def test_no_warm_kernel_ready_means_a_cold_start():
    pool = WarmKernels(0)
    assert pool.take() is None and pool.ready == 0
    pool.close()
    assert os.environ.get("GPUOPS_FINDINGS_PATH") is None


def test_a_warm_kernel_runs_at_the_niceness_it_was_given():
    pool = WarmKernels(1, nice=5)
    try:
        wait_ready(pool, 1)
        km = pool.take()
        pid = km.provisioner.process.pid
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 5)
        _shutdown(km)
    finally:
        pool.close()


def test_code_run_in_a_kernel_reports_its_error_and_a_kernel_that_dies(monkeypatch):
    """gpulib/run/render.py ``run_code`` (a warm kernel's preload, a run's environment set in it, the tests' kept
    kernels) waits for the kernel's reply alone: an error in the code is raised with its name, and a kernel that dies
    instead of replying is a RuntimeError within seconds, not a wait for the whole timeout."""
    from jupyter_core.utils import run_sync

    from gpulib.execute import KERNEL_ARGS, _kernel_manager, run_code

    km = _kernel_manager({})
    try:
        run_sync(km.start_kernel)(extra_arguments=list(KERNEL_ARGS))
        run_code(km, "import os\nassert os.getpid() > 0")  # a kernel still starting: the request waits for it
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            run_code(km, "1 / 0")
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="died"):
            run_code(km, "import os; os._exit(1)", timeout=60)
        assert time.monotonic() - t0 < 30
    finally:
        _shutdown(km)
