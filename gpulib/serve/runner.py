"""One run of ``gpuops serve``: the run engine (:func:`gpulib.run.render.execute`) in the worker thread, in this
process, with the per-run timeout (the kernel and every process it started are killed when it passes) and
without the webhook token in the kernel's environment.

A runner is ``run(folder, runbook, params, timeout) -> outcome``: ``status`` and ``error``
(:func:`gpulib.run.record.outcome`), and ``verdict`` (:func:`gpulib.run.record.verdict_of`; a runner that leaves it
out has its findings.json read instead). Tests give :class:`gpulib.serve.app.Service` runners of their own.

A verdicter (:class:`FastVerdicter`) computes the verdict before the runner renders the notebook as its evidence;
:class:`ProcessVerdicter` runs it in worker processes started ahead (one per CPU the server is given), so verdicts use
every core instead of sharing the server's interpreter lock with the HTTP handling
(https://docs.python.org/3/library/concurrent.futures.html#processpoolexecutor).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import select
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable

from gpulib.core.errors import GpulibError, redact
from gpulib.run.catalogue import RUNBOOKS, NotebookInfo, find_notebook
from gpulib.run.record import VERDICT_FILE, save_verdict, verdict_of
from gpulib.run.record import outcome as outcome_of
from gpulib.run.render import execute, outcome
from gpulib.run.verdict import fast_verdict, supports
from gpulib.serve.config import TOKEN_ENV

__all__ = ["VERDICT_FILE", "EngineRunner", "FastVerdicter", "ProcessVerdicter"]


class EngineRunner:
    """The default runner: the catalogued notebook ``runbook`` executed in this thread by the run engine, in a warm
    kernel when ``warm`` (:class:`gpulib.warm.WarmKernels`) has one ready."""

    def __init__(self, notebook: Callable[[str], NotebookInfo] = find_notebook, warm=None):
        self.notebook = notebook
        self.warm = warm

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        res = execute(
            self.notebook(runbook),
            params,
            folder.parent,
            out_dir=folder,
            progress=False,
            run_timeout=timeout,
            unset_env=(TOKEN_ENV,),
            summary=False,
            warm=self.warm,
            charts="shared",  # plotly.js once per store (gpulib/core/plotlyjs.py), served by the app
        )
        return outcome(res)


class FastVerdicter:
    """The verdict of a run before its notebook (:func:`gpulib.run.verdict.fast_verdict`), in the server's worker
    thread, where gpulib is already imported: ``(folder, runbook, params) -> outcome`` (as :func:`outcome`, its
    findings also written to ``folder/verdict.json``), or ``None`` when the runbook has no fast verdict (the
    notebook decides)."""

    def __init__(self, notebook: Callable[[str], NotebookInfo] = find_notebook):
        self.notebook = notebook

    def warm(self) -> None:
        """Import what a verdict needs (pandas, the domains, the demo backend), so the first alert does not wait."""

        for mod in (*(e.module for e in RUNBOOKS.values()), "gpulib.demo.source"):
            importlib.import_module(mod)

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any]) -> dict[str, Any] | None:

        if not supports(runbook, params):
            return None
        info = self.notebook(runbook)
        if info.kind != "runbook":  # a report's headless verdict is the whole report: it would hold a verdict worker
            return None
        v = fast_verdict(runbook, params, info)
        save_verdict(
            folder,
            v.findings,
            runbook=runbook,
            parameters=v.parameters,
            errors=v.errors,
            usage_errors=v.usage_errors,
            steps=v.steps,
            inputs=v.inputs,
        )
        return outcome_of(None, v.usage_errors, v.errors, verdict_of(list(v.findings), v.doc()))


#: the FastVerdicter of a verdict worker process (made by :func:`_worker_start`)
_WORKER: FastVerdicter | None = None


#: the barrier every worker waits at once in :meth:`ProcessVerdicter.warm` (so each of them starts)
_BARRIER = None


def _end_with(server: int) -> None:
    """End this process when the process ``server`` has ended, whatever ended it: a verdict worker is a child of
    multiprocessing's forkserver, not of the server, and after a SIGKILL of the server (no shutdown code runs) it
    would wait on its call queue for ever, holding the forkserver's alive pipe open too (CPython 3.11:
    Lib/multiprocessing/forkserver.py, connect_to_new_process sends each child the alive fd). A pidfd becomes
    readable when its process ends (``man 2 pidfd_open``, Linux 5.3: https://man7.org/linux/man-pages/man2/pidfd_open.2.html);
    elsewhere the server is polled every second."""

    def watch() -> None:
        try:
            fd = os.pidfd_open(server)
        except (AttributeError, OSError):  # not Linux >= 5.3, or the server is already gone
            fd = None
        if fd is not None:
            select.select([fd], [], [])
        else:
            while True:
                try:
                    os.kill(server, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
                time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch, name="gpuops-server-watch", daemon=True).start()


def _worker_start(env: dict[str, str], barrier, server: int) -> None:
    """A verdict process: the environment of its verdicter (the forkserver it was forked from keeps the one it
    started with), less the names it was told to unset (the webhook token); imports done; it ends with ``server``
    (:func:`_end_with`)."""
    global _WORKER, _BARRIER
    _end_with(server)
    _BARRIER = barrier
    os.environ.clear()
    os.environ.update(env)
    _WORKER = FastVerdicter()
    _WORKER.warm()


def _worker_verdict(folder: str, runbook: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """One verdict in a worker process. Errors come back in a form that pickles whatever they were: a GpulibError as a
    plain GpulibError with the same text (the server answers it as in-process: failed, no notebook), any other as a
    RuntimeError with its type named."""
    try:
        return _WORKER(Path(folder), runbook, params)
    except GpulibError as exc:
        raise GpulibError(str(exc)) from None
    except Exception as exc:
        raise RuntimeError(f"{type(exc).__name__}: {redact(str(exc))}"[:1000]) from None


def _ready(timeout: float) -> int:
    _BARRIER.wait(timeout)  # a worker holding this cannot take another: each of them answers once
    return os.getpid()


class ProcessVerdicter:
    """:class:`FastVerdicter` in ``workers`` processes started from a clean server (``forkserver``, gpulib preloaded,
    https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods): a verdict waits for a free
    process, never for the server's interpreter lock. A worker that dies is replaced with the whole pool (the
    verdict it held fails, so that run's notebook decides)."""

    def __init__(self, workers: int, unset: tuple[str, ...] = ()):
        self.workers, self.unset = workers, tuple(unset)
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(["gpulib.serve.runner", "gpulib.run.verdict"])
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        self._barrier = self._ctx.Barrier(self.workers)
        env = {k: v for k, v in os.environ.items() if k not in self.unset}
        return ProcessPoolExecutor(
            self.workers, mp_context=self._ctx, initializer=_worker_start, initargs=(env, self._barrier, os.getpid())
        )

    def warm(self, timeout: float = 120) -> list[int]:
        """Start every worker now (the imports happen in each), so the first alert does not wait; their pids."""
        futures = [self._pool.submit(_ready, timeout) for _ in range(self.workers)]
        return sorted(f.result() for f in futures)

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any]) -> dict[str, Any] | None:
        pool = self._pool
        try:
            return pool.submit(_worker_verdict, str(folder), runbook, params).result()
        except BrokenProcessPool:
            if self._pool is pool:
                self._pool = self._start()
            raise

    def expire(self) -> None:
        """A verdict passed its deadline (:class:`gpulib.serve.deadline.Deadlined`): its worker cannot be stopped
        alone, so every worker process is killed and a new pool started (a verdict the others held fails with
        BrokenProcessPool: that run's notebook decides)."""
        pool, self._pool = self._pool, self._start()
        _kill(pool)

    def close(self) -> None:
        _kill(self._pool)


def _kill(pool: ProcessPoolExecutor, wait_s: float = 5.0) -> None:
    """Stop ``pool`` now: its worker processes killed (``_processes``: the executor has no public way to reach them)
    and reaped, its futures cancelled."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        try:
            p.kill()
        except (OSError, ValueError):  # already gone / already closed
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.join(wait_s)
        except (OSError, ValueError, AssertionError):
            pass
