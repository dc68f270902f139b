"""A bounded worker pool: ``kernels`` runs at once, at most ``queue_limit`` waiting (0: no limit); :class:`QueueFull`
otherwise (the webhook answers 503 with Retry-After, so Alertmanager retries rather than a run being dropped
silently). Waiting runs leave in priority order (a tuple, lower first: :func:`gpulib.serve.storms.priority`),
then in the order they came.

A run may wait in a ``lane`` of its own limit (``lanes``: name -> limit): page-started runs wait in theirs, so they
never take a place of the alerts' ``queue_limit``."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import Any, Callable


class QueueFull(Exception):
    pass


class WorkerPool:
    def __init__(
        self,
        work: Callable[[str], None],
        kernels: int,
        queue_limit: int,
        on_error: Callable[[str, Exception], None] | None = None,
        lanes: dict[str, int] | None = None,
    ):
        #: told of an exception ``work`` let out (the worker thread goes on with the next run)
        self._on_error = on_error
        self._work = work
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
