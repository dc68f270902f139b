"""The soak of benchmarks/bench_serve_soak.py with a small N: a real ``gpuops serve`` through bursts of alerts and
page reads ends with its memory within 20 % of its start (after the warm-up burst), no open file and no process
more."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_serve_soak", ROOT / "benchmarks" / "bench_serve_soak.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(
    os.environ.get("GPUOPS_SOAK") != "1",
    reason="the soak runs with GPUOPS_SOAK=1 (about 45 s of a real server and its renders; CONTRIBUTING.md)",
)
def test_a_short_soak_ends_with_rss_within_20_percent_of_its_start(tmp_path):
    res = _bench().soak(bursts=3, alerts=2, reads=150, serve_args=["--warm-kernels", "1"], work=tmp_path)
    base, end = res["base"], res["end"]
    assert end["rss_mb"] <= 1.2 * base["rss_mb"], res
    assert end["processes"] <= base["processes"], res
    assert end["fds"] <= base["fds"] + 4, res


def test_a_render_leaves_no_zeromq_context_open_in_the_server(tmp_path):
    """What the soak found: a render through the run engine (the server's EngineRunner) with a kernel manager it was
    handed leaves its kernel client's channels and ZeroMQ context open (nbclient closes the client only of a kernel it
    started itself), a few descriptors per run for the server's life."""
    import gc
    import threading

    import zmq

    from gpulib.catalogue import find_notebook
    from gpulib.execute import execute

    def open_contexts() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, zmq.Context) and not o.closed)

    before = open_contexts()
    errors = []

    def render():
        try:
            res = execute(
                find_notebook("xid_ecc_triage"),
                {"node": "dgx-h100-1", "gpu": "1", "source": "demo"},
                tmp_path,
                progress=False,
                summary=False,
            )
            errors.extend([res.failed] if res.failed else [])
        except Exception as exc:
            errors.append(exc)

    t = threading.Thread(target=render, name="gpuops-run-0")
    t.start()
    t.join(600)
    assert errors == []
    assert open_contexts() == before
