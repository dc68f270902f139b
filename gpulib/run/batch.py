"""Several notebooks run at once (``gpuops demo``): each in its own kernel, ``jobs`` at a time.

A run is a kernel process plus the engine's thread that feeds it cells and writes the run folder
(:func:`gpulib.run.render.execute`, safe from several threads: the HTML exporter and the run index take locks), so
two runs at once use two cores where one run mostly waits on the other side. The parameters of every run are checked
before the first kernel starts, and the results come back in the order asked."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

from gpulib.run import render as engine
from gpulib.run.catalogue import NotebookInfo
from gpulib.run.params import prepare
from gpulib.run.render import RunResult


def default_jobs() -> int:
    """One run per CPU this process may use (``os.sched_getaffinity``: the CPUs of its cgroup or taskset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def run_each(
    todo: Sequence[NotebookInfo],
    out: Path,
    *,
    jobs: int,
    progress: bool,
    started: Callable[[int, NotebookInfo], None],
    finished: Callable[[RunResult], None],
    **execute_kw: Any,
) -> list[RunResult]:
    """Run ``todo`` on the demo fleet into ``out``, ``jobs`` at a time; ``started(n, info)`` and ``finished(result)``
    are called one at a time (under a lock), as each run starts and ends. Papermill's cell progress is shown only for
    one job at a time (bars of runs side by side would interleave)."""
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    params = [prepare(info, source="demo") for info in todo]  # every usage error before any kernel
    lock = threading.Lock()

    def one(n: int) -> RunResult:
        with lock:
            started(n + 1, todo[n])
        res = engine.execute(todo[n], params[n], out, progress=progress and jobs == 1, **execute_kw)
        with lock:
            finished(res)
        return res

    if jobs == 1:
        return [one(n) for n in range(len(todo))]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="gpuops-run") as pool:
        return list(pool.map(one, range(len(todo))))
