"""The same scenario through the demo source and through a real, backfilled Prometheus."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpulib.core.errors import EmptyResult, InvalidQuery, PrometheusUnreachable
from gpulib.sources.prometheus import PrometheusSource

KEYS = ["node", "gpu", "gpu_i_id"]


@pytest.fixture(scope="module")
def demo(demo_pinned):
    return demo_pinned


def _prom(url, end, **kw):
    return PrometheusSource(url, end=end, **kw)


@pytest.mark.prometheus
@pytest.mark.parametrize("stat", ["avg", "max", "min", "p95", "last"])
@pytest.mark.parametrize(
    "field", ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_XID_ERRORS"]
)
def test_summary_same_through_demo_and_prometheus(prometheus, demo, demo_end, field, stat):
    a = demo.summary(field, "6h", stat).set_index(KEYS)["value"].sort_index()
    b = _prom(prometheus.url, demo_end).summary(field, "6h", stat).set_index(KEYS)["value"].sort_index()
    assert len(a) > 10
    assert list(a.index) == list(b.index)
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.prometheus
def test_increase_of_counter_matches(prometheus, demo, demo_end):
    field = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
    a = demo.summary(field, "6h", "increase").set_index(KEYS)["value"].sort_index()
    b = _prom(prometheus.url, demo_end).summary(field, "6h", "increase").set_index(KEYS)["value"].sort_index()
    # the demo's rising-SBE GPU gains 2,500 errors an hour (scenario), so ~15,000 in 6 h
    assert a.max() == pytest.approx(15000, rel=0.01)
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=0.01)


@pytest.mark.prometheus
def test_series_same_points(prometheus, demo, demo_end):
    a = demo.series("DCGM_FI_DEV_GPU_TEMP", "2h", node="h200-infer-0", step="60s")
    b = _prom(prometheus.url, demo_end).series("DCGM_FI_DEV_GPU_TEMP", "2h", node="h200-infer-0", step="60s")
    cols = ["timestamp", "node", "gpu", "uuid", "pod", "value"]
    a = a[cols].sort_values(["gpu", "timestamp"]).reset_index(drop=True)
    b = b[cols].sort_values(["gpu", "timestamp"]).reset_index(drop=True)
    assert len(a) == 8 * 121
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


@pytest.mark.prometheus
def test_long_range_is_split_below_11000_points(prometheus, demo_end, monkeypatch):
    src = _prom(prometheus.url, demo_end)
    calls = []
    real = src._get_range  # the one HTTP call per range chunk (start/end in epoch seconds)

    def spy(q, start, end, step, *a, **k):
        calls.append((end - start) / float(step.rstrip("s")) + 1)
        return real(q, start, end, step, *a, **k)

    monkeypatch.setattr(src, "_get_range", spy)
    df = src.series("DCGM_FI_DEV_POWER_USAGE", "6h", node="dgx-h100-0", gpu="0", step="1s")
    assert len(calls) >= 2 and max(calls) <= 11000
    assert df["timestamp"].is_unique and len(df) == 6 * 3600 + 1 - 0  # one point per second, no overlap


@pytest.mark.prometheus
def test_old_label_style_normalised(prometheus_scenarios, demo, demo_end):
    old = prometheus_scenarios("old", "full")
    b = _prom(old.url, demo_end).summary("DCGM_FI_DEV_FB_USED", "1h", "max", node="a100-80-0")
    a = demo.summary("DCGM_FI_DEV_FB_USED", "1h", "max", node="a100-80-0")
    assert set(b["node"]) == {"a100-80-0"}
    assert sorted(zip(b["gpu"], b["pod"])) == sorted(zip(a["gpu"], a["pod"]))
    assert "jupyter-alice-0" in set(b["pod"])  # exported_pod became pod


@pytest.mark.prometheus
def test_preflight_sees_default_counters(prometheus_scenarios, demo_end):
    srv = prometheus_scenarios("old", "default")
    caps = _prom(srv.url, demo_end).preflight("1h")
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in caps.metrics and "DCGM_FI_PROF_SM_ACTIVE" not in caps.metrics
    assert caps.host_label == "Hostname" and caps.pod_label == "exported_pod" and caps.mig_present
    assert any("not exported" in f.title for f in caps.findings)


@pytest.mark.prometheus
def test_invalid_promql_and_empty_result(prometheus, demo_end):
    src = _prom(prometheus.url, demo_end)
    with pytest.raises(InvalidQuery) as e:
        src.query("sum(")
    assert "sum(" in str(e.value)
    with pytest.raises(EmptyResult) as e2:
        src.summary("DCGM_FI_DEV_NOT_A_FIELD", "1h", "avg")
    assert "DCGM_FI_DEV_NOT_A_FIELD" in str(e2.value)


def test_unreachable_prometheus_names_url(demo_end):
    from tests.helpers.promharness import free_port

    url = f"http://127.0.0.1:{free_port()}"
    src = PrometheusSource(url, end=demo_end, settings=None) if False else None
    from gpulib.sources.prometheus import PrometheusSettings

    src = PrometheusSource(settings=PrometheusSettings(url=url, retries=1, timeout=2), end=demo_end)
    with pytest.raises(PrometheusUnreachable) as e:
        src.summary("DCGM_FI_DEV_GPU_UTIL", "1h", "avg")
    assert url in str(e.value) and "hint" in str(e.value)


@pytest.mark.prometheus
@pytest.mark.parametrize("agg", ["max", "avg"])
def test_step_aggregation_same_through_demo_and_prometheus(prometheus, demo, demo_end, agg):
    """max_over_time(x[5m]) every 5m on the server equals the demo's client-side aggregation."""
    kw = dict(node="a100-80-0", step="5m", agg=agg)
    a = (
        demo.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "2h", **kw)
        .sort_values(["gpu", "timestamp"])
        .reset_index(drop=True)
    )
    b = (
        _prom(prometheus.url, demo_end)
        .series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "2h", **kw)
        .sort_values(["gpu", "timestamp"])
        .reset_index(drop=True)
    )
    assert len(a) == 8 * 25 and a["timestamp"].tolist() == b["timestamp"].tolist()
    np.testing.assert_allclose(a["value"].to_numpy(), b["value"].to_numpy(), rtol=1e-9, atol=1e-9)
    plain = (
        demo.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "2h", node="a100-80-0", step="5m")
        .sort_values(["gpu", "timestamp"])
        .reset_index(drop=True)
    )
    if agg == "max":  # a max over the step can never be below the single sample at its end
        assert (a["value"].to_numpy() >= plain["value"].to_numpy() - 1e-12).all()
        assert (a["value"].to_numpy() > plain["value"].to_numpy() + 1e-9).any()


def test_agg_needs_a_step_and_a_known_function(demo):
    from gpulib.core.errors import InvalidParameter

    with pytest.raises(InvalidParameter):
        demo.series("DCGM_FI_DEV_GPU_TEMP", "1h", agg="max")
    with pytest.raises(InvalidParameter):
        demo.series("DCGM_FI_DEV_GPU_TEMP", "1h", step="5m", agg="p99")


def test_threads_asking_at_once_share_one_http_client(monkeypatch):
    """The report sends its queries from several threads as its first contact: one client, one circuit breaker."""
    import threading
    import time

    import gpulib.sources.prometheus as prom

    made = []

    class SlowHTTP:
        def __init__(self, settings):
            time.sleep(0.05)
            made.append(self)

    monkeypatch.setattr(prom, "PromHTTP", SlowHTTP)
    src = PrometheusSource("http://127.0.0.1:9")
    got = []
    threads = [threading.Thread(target=lambda: got.append(src.http)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and all(h is made[0] for h in got)


def test_the_http_client_is_made_with_the_source():
    """requests and prometheus-api-client are imported by the thread that makes the source, not by the first query
    thread: a first import of requests in a query thread while the main thread imported kubernetes failed with
    "partially initialized module 'requests.utils'" (the report's first run in a fresh process)."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys; from gpulib.sources.prometheus import PrometheusSource; "
        "print('requests' in sys.modules, 'prometheus_api_client' in sys.modules); "
        "src = PrometheusSource('http://127.0.0.1:9'); "
        "print('requests' in sys.modules, 'prometheus_api_client' in sys.modules, src._http is not None)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True).stdout
    assert out == "False False\nTrue True True\n"
