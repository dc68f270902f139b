"""A bounded worker pool: ``kernels`` runs at once, at most ``queue_limit`` waiting (0: no limit); :class:`QueueFull`
otherwise (the webhook answers 503 with Retry-After, so Alertmanager retries rather than a run being dropped
silently). Waiting runs leave in priority order (a tuple, lower first: :func:`gpulib.serve.storms.priority`),
then in the order they came.

A run may wait in a ``lane`` of its own limit (``lanes``: name -> limit): page-started runs wait in theirs, so they
never take a place of the alerts' ``queue_limit``.

``release_memory`` (the render pool): after each run, the pool's garbage is collected and glibc is asked to give the
free memory of every malloc arena back to the system (``malloc_trim(0)``,
https://man7.org/linux/man-pages/man3/malloc_trim.3.html). A render (papermill's messages, the executed notebook,
nbconvert's HTML: tens of MB of short-lived strings, from two or more threads) leaves no Python object behind, but
glibc keeps the freed pages of each thread's arena, so ``gpuops serve``'s RSS rose ~30 MB a burst of two renders
and never came down (benchmarks/RESULTS.md, soak; tests/serve/test_soak.py).

``malloc_trim`` gives back the free chunks of every arena but the free *top* of a thread's arena only when glibc
trims it itself, above its trim threshold (``mtrim`` trims the top of the main arena alone: bminor/glibc:
malloc/malloc.c @2fb12bbd092b0c10f1f2083216e723d2406e21c4). That threshold is dynamic: freeing a mapped buffer raises
the mmap threshold to its size and the trim threshold to twice that (mallopt(3), M_MMAP_THRESHOLD,
https://man7.org/linux/man-pages/man3/mallopt.3.html), so once a render had freed its multi-MB notebook text, every
thread's arena (page reads, renders: up to 8 per core) kept MBs of free top resident, a few more each burst.
:func:`tune_malloc` (``gpuops serve`` at its start) fixes both thresholds (rows of
``gpulib/data/serve/serve_limits.csv``), which also turns the dynamic adjustment off."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import itertools
import queue
import threading
import time
from typing import Any, Callable


class QueueFull(Exception):
    pass


def _malloc_trim():
    """glibc's ``malloc_trim``, or None (musl, macOS: nothing to call)."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


_TRIM = _malloc_trim()
#: mallopt(3) parameters (bminor/glibc: malloc/malloc.h @1e5a5866cb9541b5231dba3d86c8a1a35d516de9)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def _mallopt():
    """glibc's ``mallopt``, or None (not glibc)."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


_MALLOPT = _mallopt()


def tune_malloc(mmap_threshold: int | None = None, trim_threshold: int | None = None) -> bool:
    """Fix glibc's mmap and trim thresholds for this process (default: ``malloc_mmap_threshold_bytes`` and
    ``malloc_trim_threshold_bytes`` of ``gpulib/data/serve/serve_limits.csv``): a buffer above the first is mapped
    and unmapped on its own, an arena's free top above the second goes back to the system. Whether glibc took both
    (False: not glibc)."""
    if _MALLOPT is None:
        return False
    from gpulib.serve.config import limit

    mmap_b = int(limit("malloc_mmap_threshold_bytes")) if mmap_threshold is None else int(mmap_threshold)
    trim_b = int(limit("malloc_trim_threshold_bytes")) if trim_threshold is None else int(trim_threshold)
    return bool(_MALLOPT(M_MMAP_THRESHOLD, mmap_b)) and bool(_MALLOPT(M_TRIM_THRESHOLD, trim_b))


def release_memory() -> bool:
    """Collect garbage, then hand the allocator's free pages back to the system; whether glibc's trim ran."""
    gc.collect()
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


class WorkerPool:
    def __init__(
        self,
        work: Callable[[str], None],
        kernels: int,
        queue_limit: int,
        on_error: Callable[[str, Exception], None] | None = None,
        lanes: dict[str, int] | None = None,
        release_memory: bool = False,
    ):
        #: told of an exception ``work`` let out (the worker thread goes on with the next run)
        self._on_error = on_error
        self._work = work
        self._release = release_memory
        #: runs after which memory was handed back (:func:`release_memory`)
        self.releases = 0
        self._q: queue.PriorityQueue[tuple] = queue.PriorityQueue()
        #: lane -> most runs waiting in it (0: no limit); "" is the main lane (``queue_limit``)
        self._limits = {"": queue_limit, **(lanes or {})}
        self._waiting: dict[str, int] = dict.fromkeys(self._limits, 0)
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self._threads = [
            threading.Thread(target=self._loop, name=f"gpuops-run-{i}", daemon=True) for i in range(kernels)
        ]
        for t in self._threads:
            t.start()

    def submit(self, run_id: str, priority: tuple = (), lane: str = "") -> None:
        with self._lock:
            limit = self._limits.get(lane, 0)
            if limit and self._waiting.get(lane, 0) >= limit:
                raise QueueFull(run_id)
            self._waiting[lane] = self._waiting.get(lane, 0) + 1
            self._q.put_nowait((tuple(priority), next(self._seq), run_id, lane))

    def waiting(self, lane: str = "") -> int:
        """Runs waiting in ``lane``."""
        return self._waiting.get(lane, 0)

    @property
    def depth(self) -> int:
        return self._q.qsize()

    def idle(self) -> bool:
        """No run waiting and none in progress."""
        return self._q.unfinished_tasks == 0

    def _loop(self) -> None:
        while True:
            _prio, _seq, run_id, lane = self._q.get()
            if run_id is None:
                return
            with self._lock:
                self._waiting[lane] -= 1
                self.active += 1
                self.peak = max(self.peak, self.active)
            try:
                self._work(run_id)
            except Exception as exc:  # a bug in the work must not stop this thread, or every queued run waits forever
                if self._on_error is not None:
                    try:
                        self._on_error(run_id, exc)
                    except Exception:
                        pass
            finally:
                with self._lock:
                    self.active -= 1
                if self._release:
                    release_memory()
                    self.releases += 1
                self._q.task_done()

    def join(self, timeout: float = 60) -> bool:
        """Wait until the queue is empty and no run is active (tests and shutdown)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._q.unfinished_tasks == 0:
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        for _ in self._threads:
            try:
                self._q.put_nowait(((float("inf"),), next(self._seq), None, ""))
            except queue.Full:
                break

    def stats(self) -> dict[str, Any]:
        return {"active": self.active, "peak": self.peak, "queued": self.depth, "lanes": dict(self._waiting)}
