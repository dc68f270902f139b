"""The soak of benchmarks/bench_serve_soak.py with a small N: a real ``gpuops serve`` through bursts of alerts and
page reads ends with its memory within 20 % of its start (after the warm-up burst), no open file and no process
more."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_serve_soak", ROOT / "benchmarks" / "bench_serve_soak.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.xfail(
    strict=True,
    reason="open: every notebook render (gpulib.execute.execute, cold or warm kernel) leaves about 10 anon_inode "
    "descriptors (epoll/eventfd) and 2 sockets open in the server, not freed by gc.collect(); with warm kernels its "
    "RSS grows 7-30 % a burst (benchmarks/RESULTS.md, soak)",
)
def test_a_short_soak_ends_with_rss_within_20_percent_of_its_start(tmp_path):
    res = _bench().soak(bursts=3, alerts=2, reads=150, serve_args=["--warm-kernels", "1"], work=tmp_path)
    base, end = res["base"], res["end"]
    assert end["rss_mb"] <= 1.2 * base["rss_mb"], res
    assert end["processes"] <= base["processes"], res
    assert end["fds"] <= base["fds"] + 4, res
