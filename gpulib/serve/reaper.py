"""The clean stop of ``gpuops serve``: every process the server started (the forkserver, the verdict workers, the
resource tracker, render kernels) is stopped when it stops, within ``shutdown_grace_s``
(``gpulib/data/serve/serve_limits.csv``), also when one of them ignores SIGTERM.

uvicorn raises a captured SIGTERM / SIGINT again after its shutdown (``uvicorn.server.Server.capture_signals``); with
the default handler that ends the process before any ``finally`` or exit handler runs, so :func:`exit_on_signals`
makes it a ``SystemExit`` (exit status 128 + the signal, as a shell reports it)."""

from __future__ import annotations

import multiprocessing.forkserver as mp_forkserver
import multiprocessing.resource_tracker as mp_tracker
import os
import signal
import threading
import time

from gpulib.run.render import descendants
from gpulib.serve.config import limit


def _exit(signum, frame) -> None:
    raise SystemExit(128 + signum)


def exit_on_signals() -> None:
    """SIGTERM and SIGINT end the process through ``SystemExit`` (so ``finally`` blocks run)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit)


def _alive(pid: int) -> bool:
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)  # reaps a child of ours that has ended
        if done:
            return False
    except ChildProcessError:  # not our child (a grandchild): /proc says whether it still runs
        pass
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def stop_descendants(grace_s: float | None = None) -> list[int]:
    """SIGTERM every descendant of this process (the whole tree read first, so none is lost when its parent ends),
    SIGKILL those still there after ``grace_s``; the pids that were signalled."""
    grace_s = float(limit("shutdown_grace_s")) if grace_s is None else grace_s
    pids = descendants(os.getpid())
    _stop_multiprocessing_helpers(grace_s)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        end = time.monotonic() + (grace_s if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < end and any(_alive(p) for p in pids):
            time.sleep(0.05)
    return pids


def _stop_multiprocessing_helpers(timeout: float) -> None:
    """Stop multiprocessing's forkserver, then its resource tracker, the way they stop at exit (their ``_stop``, which
    CPython's own tests use: the "alive" pipe closed, the process waited for), so the tracker unlinks what it tracks
    (the verdict workers' semaphores) before it ends; the tracker ignores SIGTERM. At most ``timeout`` seconds."""

    def stop():
        for helper in (getattr(mp_forkserver, "_forkserver", None), getattr(mp_tracker, "_resource_tracker", None)):
            try:
                helper._stop()
            except Exception:  # not started, or already gone
                pass

    t = threading.Thread(target=stop, name="gpuops-stop-mp", daemon=True)
    t.start()
    t.join(timeout)
