"""The render pool hands a run's freed memory back to the system after each run (gpulib/serve/pool.py): without it
glibc keeps the pages a render freed in its thread's arena and ``gpuops serve`` grows a burst at a time
(tests/serve/test_soak.py measures the server; here the mechanism, without wall time)."""

from __future__ import annotations

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
