"""The ipykernel processes this test process started, and stopping the one a finished run left alive.

``cli.execute`` leaves each run's kernel running until the calling process exits (the bug that
tests/test_cli_runs.py::test_a_run_leaves_no_kernel_behind holds); a worker that runs dozens of notebooks, or a
fixture that runs 47 of them (tests/project/test_fault_matrix.py), would hold every one of them in memory.
A run's kernel is found by the findings path ``cli.execute`` puts in that kernel's environment, so a thread
stops its own run's kernel and never another run's.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path


def _kernels(pid: int) -> dict[int, bytes]:
    """Live ipykernel children of ``pid`` -> their environment (from /proc)."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) != pid or fields[0] == "Z" or b"ipykernel_launcher" not in (d / "cmdline").read_bytes():
                continue
            out[int(d.name)] = (d / "environ").read_bytes()
        except OSError:
            continue
    return out


def live_kernels() -> set[int]:
    return set(_kernels(os.getpid()))


def stop(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def stop_kernel_of(out_dir: Path) -> None:
    """Stop the kernel of the finished run whose folder is ``out_dir`` (if it is still alive)."""
    mark = f"\0GPUOPS_FINDINGS_PATH={Path(out_dir) / 'findings.json'}\0".encode()
    stop([pid for pid, env in _kernels(os.getpid()).items() if mark in b"\0" + env + b"\0"])
