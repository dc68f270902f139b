"""Prometheus faults end in a PrometheusError with a hint (never KeyError/TypeError), within the timeout."""

from __future__ import annotations

import time

import pytest

from gpulib.core.errors import InvalidParameter, PrometheusError
from gpulib.sources.prometheus import PrometheusSettings, PrometheusSource, load_settings
from tests.helpers.faultserver import FaultServer


def _src(url, **kw):
    kw.setdefault("timeout", 2)
    kw.setdefault("retries", 1)
    return PrometheusSource(settings=PrometheusSettings(url=url, **kw), end="2026-11-29T12:00:00Z")


CALLS = {
    "summary": lambda s: s.summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max"),
    "series": lambda s: s.series("DCGM_FI_DEV_GPU_TEMP", "1h"),
    "series_agg": lambda s: s.series("DCGM_FI_DEV_XID_ERRORS", "6h", step="10m", agg="max"),
    "preflight": lambda s: s.preflight("1h"),
}


@pytest.mark.parametrize("mode", ["no_data", "bad_result", "empty", "garbage", "html_login"])
@pytest.mark.parametrize("call", list(CALLS))
def test_wrong_shaped_answer_is_a_prometheus_error(mode, call):
    with FaultServer(mode) as fs:
        with pytest.raises(PrometheusError) as e:
            CALLS[call](_src(fs.url))
    assert e.value.hint and fs.url in str(e.value)


@pytest.mark.parametrize(
    "key,value", [("RETRIES", "abc"), ("TIMEOUT", "abc"), ("TIMEOUT", "-1"), ("RETRIES", "-2"), ("TIMEOUT", "nan")]
)
def test_bad_numeric_settings_are_usage_errors(key, value):
    with pytest.raises(InvalidParameter) as e:
        load_settings(env={"GPUOPS_PROMETHEUS_URL": "http://127.0.0.1:1", f"GPUOPS_PROMETHEUS_{key}": value})
    assert f"GPUOPS_PROMETHEUS_{key}" in str(e.value)


def test_retry_after_is_capped_by_the_timeout():
    with FaultServer("retry_after", retry_after=20) as fs:
        t0 = time.monotonic()
        with pytest.raises(PrometheusError):
            _src(fs.url, timeout=3, retries=3).summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
        took = time.monotonic() - t0
    assert took < 2 * 3, f"one query took {took:.1f}s at timeout 3s"


def test_a_body_trickled_a_byte_at_a_time_ends_at_the_timeout():
    """Each read gets a byte well within the timeout; the query must still end at the timeout (the whole body's)."""
    with FaultServer("trickle", delay=0.3) as fs:
        t0 = time.monotonic()
        with pytest.raises(PrometheusError) as e:
            _src(fs.url, timeout=2, retries=0).summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
        took = time.monotonic() - t0
    assert took < 2 + 1, f"one query took {took:.1f}s at timeout 2s"
    assert "within 2s" in str(e.value) and e.value.hint


@pytest.mark.parametrize("mode", ["hang", "closed", "retry_after"])
def test_after_a_backend_failure_later_calls_fail_fast_with_the_same_cause(mode):
    with FaultServer(mode) as fs:
        src = _src(fs.url, timeout=2, retries=2)
        with pytest.raises(PrometheusError) as first:
            src.summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
        seen = fs.requests
        t0 = time.monotonic()
        for call in CALLS.values():
            with pytest.raises(PrometheusError) as later:
                call(src)
            assert type(later.value) is type(first.value)
            assert str(first.value).split(" for query")[0] in str(later.value)
        assert time.monotonic() - t0 < 0.5
        assert fs.requests == seen


EVIL_GPU = 'x"} or vector(42) or DCGM_FI_DEV_GPU_TEMP{UUID="x'


def test_gpu_and_node_values_never_reach_promql_unvalidated():
    from gpulib.core.errors import UnknownGPU

    with FaultServer("500") as fs:
        src = _src(fs.url)
        with pytest.raises(UnknownGPU):
            src.summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max", gpu=EVIL_GPU)
        with pytest.raises(InvalidParameter):
            src.series("DCGM_FI_DEV_GPU_TEMP", "1h", node='n1"} or vector(1) or up{a="')
        assert fs.requests == 0


def test_selector_escapes_label_values():
    from gpulib.sources.prometheus import _selector

    assert _selector("F", 'a"b\\', None, "hostname") == 'F{hostname="a\\"b\\\\"}'


def test_a_refused_connection_is_named_even_when_the_retries_outlast_the_timeout(monkeypatch):
    """On a loaded machine the waits between retries run long; when the time runs out while retrying a refused
    connection, the cause on-call reads is that Prometheus cannot be reached, not that it was slow."""
    import socket

    from gpulib.core.errors import PrometheusUnreachable
    from gpulib.sources import promhttp

    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    real_sleep = time.sleep
    monkeypatch.setattr(promhttp.time, "sleep", lambda w: real_sleep(w + 2.0))  # every wait overruns the timeout
    with pytest.raises(PrometheusUnreachable) as e:
        _src(f"http://127.0.0.1:{port}", timeout=1.5, retries=3).summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    assert "connection refused" in str(e.value)
