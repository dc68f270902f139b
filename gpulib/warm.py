"""Warm kernels for notebook renders: kernels started ahead with gpulib imported, each used by one run only.

A cold run starts a kernel and imports pandas, plotly and gpulib in it before its first cell. :class:`WarmKernels`
keeps ``size`` kernels started (``jupyter_client``'s kernel manager, the one :func:`gpulib.run.render.execute` hands
papermill, https://jupyter-client.readthedocs.io/en/stable/api/jupyter_client.html) with those imports done in a
throwaway namespace, so the notebook's globals start empty. :meth:`take` hands one out and starts its replacement
in the background; the run's engine sets the run's environment and folder in it before the first cell, stops it
when the run ends and kills it at the run timeout as for a cold kernel. A kernel is never used twice, so a run
never sees another run's globals.
"""

from __future__ import annotations

import queue
import threading
from typing import Iterable

from gpulib.run.render import KERNEL_ARGS, kernel_manager, run_code, shutdown_kernel

#: what a warm kernel imports before it is handed out (in a namespace of its own: the notebook's stays empty)
PRELOAD = (
    "exec('import pandas, plotly.graph_objects, IPython.display, gpulib.runbook, gpulib.xid.steps, "
    "gpulib.xid.view, gpulib.fleet.steps, gpulib.fleet.view, gpulib.nccl.steps, gpulib.gpu_operator.steps', {})"
)


class WarmKernels:
    """``size`` started kernels (without the names of ``unset`` in their environment: the webhook token)."""

    def __init__(self, size: int, unset: Iterable[str] = (), preload: str = PRELOAD, nice: int = 0):
        # ``nice``: added to the kernel's niceness first (os.nice, https://docs.python.org/3/library/os.html#os.nice),
        # so renders and their imports yield the CPU to what runs at the server's priority (the fast verdicts)
        self.size, self.unset = size, tuple(unset)
        self.preload = (f"import os; os.nice({int(nice)})\n" if nice else "") + preload
        self._ready: queue.Queue = queue.Queue()
        self._closed = False
        self.started = self.failed = 0
        #: why the last kernel could not be started (shown by tests and /healthz)
        self.last_error: str | None = None
        for _ in range(size):
            self._refill()

    def _refill(self) -> None:
        threading.Thread(target=self._start_one, name="gpuops-warm-kernel", daemon=True).start()

    def _start_one(self) -> None:
        from jupyter_core.utils import run_sync

        km = kernel_manager({}, None, self.unset)
        try:
            run_sync(km.start_kernel)(extra_arguments=list(KERNEL_ARGS))
            run_code(km, self.preload)
        except Exception as exc:
            self.failed += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            shutdown_kernel(km)
            return
        if self._closed:
            shutdown_kernel(km)
            return
        self.started += 1
        self._ready.put(km)

    def take(self, wait: float = 0) -> object | None:
        """A warm kernel manager (its replacement starting now), or None when none is ready within ``wait`` s
        (the run then starts a cold kernel)."""
        try:
            km = self._ready.get(timeout=wait) if wait else self._ready.get_nowait()
        except queue.Empty:
            return None
        if not self._closed:
            self._refill()
        return km

    @property
    def ready(self) -> int:
        return self._ready.qsize()

    def close(self) -> None:
        """Stop every kernel not handed out (and those still starting, when they are up)."""

        self._closed = True
        while True:
            try:
                shutdown_kernel(self._ready.get_nowait())
            except queue.Empty:
                return
