"""The render pool hands a run's freed memory back to the system after each run (gpulib/serve/pool.py): without it
glibc keeps the pages a render freed in its thread's arena and ``gpuops serve`` grows a burst at a time
(tests/serve/test_soak.py measures the server; here the mechanism, without wall time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib.serve import pool as P


def test_the_render_pool_releases_memory_after_every_run_and_the_verdict_pool_does_not():
    done = []
    renders = P.WorkerPool(done.append, kernels=1, queue_limit=0, release_memory=True)
    verdicts = P.WorkerPool(done.append, kernels=1, queue_limit=0)
    for i in range(3):
        renders.submit(f"r{i}")
        verdicts.submit(f"v{i}")
    assert renders.join(30) and verdicts.join(30)
    assert sorted(done) == ["r0", "r1", "r2", "v0", "v1", "v2"]
    assert (renders.releases, verdicts.releases) == (3, 0)
    renders.stop()
    verdicts.stop()


# In a fresh interpreter (glibc's malloc settings are per process): a buffer of 24 MiB freed in the main thread raises
# glibc's dynamic mmap threshold to 24 MiB and its trim threshold to 48 MiB (__libc_free in bminor/glibc:
# malloc/malloc.c @2fb12bbd092b0c10f1f2083216e723d2406e21c4), as a render's notebook text does in the server; a
# worker thread (a page read, a render) then allocates 40 MiB in 2 MiB buffers in its own arena and frees them.
# What the thread's arena keeps resident after the pool's release_memory() is printed, in MiB.
_ARENA_SCRIPT = """
import sys, threading
from gpulib.serve import pool

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

if sys.argv[1] == "tuned":
    pool.tune_malloc()
big = bytearray(24 << 20)
del big

def work():
    bufs = [bytearray(2 << 20) for _ in range(20)]
    del bufs

base = rss_mib()
t = threading.Thread(target=work)
t.start()
t.join()
pool.release_memory()
print(round(rss_mib() - base, 1))
"""


def _kept_mib(mode: str) -> float:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"):
        env.pop(name, None)
    cmd = [sys.executable, "-c", _ARENA_SCRIPT, mode]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def test_a_thread_arena_gives_its_freed_buffers_back_once_the_malloc_thresholds_are_fixed():
    """What the 10-burst soak found (benchmarks/RESULTS.md, soak): malloc_trim(0) returns the free chunks of every
    arena but not the free top of a thread's arena, which glibc trims only above its trim threshold, and that
    threshold follows the largest buffer freed so far (dynamic, up to 64 MiB). ``gpuops serve`` fixes both
    thresholds at its start (:func:`gpulib.serve.pool.tune_malloc`): a buffer above the mmap threshold is mapped
    and unmapped on its own, and an arena's top is trimmed above the trim threshold."""
    if P._MALLOPT is None:
        pytest.skip("not glibc: no mallopt")
    assert _kept_mib("tuned") < 8
    assert _kept_mib("default") > 30  # the mechanism itself: without the fixed thresholds the arena keeps the 40 MiB


def test_gpuops_serve_fixes_the_malloc_thresholds_before_it_builds_the_app(monkeypatch):
    import uvicorn

    import gpulib.serve as serve
    import gpulib.serve.app as app_mod
    import gpulib.serve.reaper as reaper

    calls = []
    monkeypatch.setattr(P, "tune_malloc", lambda: calls.append("tune_malloc"))
    monkeypatch.setattr(app_mod, "create_app", lambda cfg: calls.append("create_app"))
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: calls.append("listen"))
    monkeypatch.setattr(reaper, "exit_on_signals", lambda: None)
    monkeypatch.setattr(reaper, "stop_descendants", lambda: None)
    serve.run_server(type("Cfg", (), {"host": "127.0.0.1", "port": 0, "header_timeout": 10.0})())
    assert calls == ["tune_malloc", "create_app", "listen"]
