"""Prometheus settings and failure modes, against a loopback HTTP server that misbehaves on purpose."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpulib.core.errors import InvalidParameter, PrometheusHTTPError, PrometheusTimeout, PrometheusUnreachable
from gpulib.sources.prometheus import PrometheusSettings, PrometheusSource, load_settings
from tests.helpers.procs import die_with_parent

OK_BODY = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [
            {
                "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1", "gpu": "0", "UUID": "GPU-1"},
                "value": [1, "55"],
            }
        ],
    },
}


class FakeProm:
    """Answers /api/v1/query with a scripted list of (status, body, delay) and records headers."""

    def __init__(self, script, answer=None):
        """``script``: (status, body, delay) answers in order, the last one repeated; ``answer(path)``, when
        given, picks the answer from the request path instead (for concurrent requests)."""
        self.script = list(script)
        self.headers = []
        self.paths = []
        fake = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                fake.headers.append(dict(self.headers))
                fake.paths.append(self.path)
                status, body, delay = (
                    answer(self.path) if answer else fake.script.pop(0) if len(fake.script) > 1 else fake.script[0]
                )
                time.sleep(delay)
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/prom"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()


@pytest.fixture
def fake(request):
    f = FakeProm(request.param)
    yield f
    f.close()


def _src(url, **kw):
    return PrometheusSource(settings=PrometheusSettings(url=url, **kw), end="2026-11-29T12:00:00Z")


@pytest.mark.parametrize("fake", [[(200, OK_BODY, 0)]], indirect=True)
def test_bearer_token_sent_and_hostname_normalised(fake):
    df = _src(fake.url, token="tok-123").summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    assert fake.headers[0]["Authorization"] == "Bearer tok-123"
    assert df["node"].tolist() == ["n1"] and df["value"].tolist() == [55.0]


MATRIX_BODY = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1", "gpu": "0", "UUID": "GPU-1"},
                "values": [[1795953540, "54"], [1795953600, "55"]],
            }
        ],
    },
}


@pytest.mark.parametrize("fake", [[(200, OK_BODY, 0)]], indirect=True)
@pytest.mark.parametrize(
    "call,method",
    [
        (lambda src: src.summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max"), "custom_query"),
        (lambda src: src.series("DCGM_FI_DEV_GPU_TEMP", "1h", step="60s"), "custom_query_range"),
    ],
    ids=["instant", "range"],
)
def test_queries_go_through_prometheus_api_client(fake, monkeypatch, call, method):
    """Instant and range queries are PrometheusConnect.custom_query / custom_query_range calls, not requests
    of our own: a marker raised there reaches the caller, and nothing reaches the server around it."""
    from prometheus_api_client import PrometheusConnect

    class Marker(Exception):
        pass

    def marker(self, *a, **k):
        raise Marker(method)

    monkeypatch.setattr(PrometheusConnect, method, marker)
    with pytest.raises(Marker, match=method):
        call(_src(fake.url, retries=3))
    assert fake.paths == []


@pytest.mark.parametrize("fake", [[(200, MATRIX_BODY, 0)]], indirect=True)
def test_range_query_times_and_step_reach_prometheus_unchanged(fake):
    """The window end (12:00:00Z), the start it gives (1 h before) and the step arrive as the source computed them,
    although PrometheusConnect.custom_query_range takes datetimes."""
    from datetime import datetime, timezone
    from urllib.parse import parse_qs, urlsplit

    end = int(datetime(2026, 11, 29, 12, tzinfo=timezone.utc).timestamp())
    df = _src(fake.url).series("DCGM_FI_DEV_GPU_TEMP", "1h", step="60s")
    (path,) = fake.paths
    q = parse_qs(urlsplit(path).query)
    assert urlsplit(path).path == "/prom/api/v1/query_range"
    assert (q["start"], q["end"], q["step"]) == ([str(end - 3600)], [str(end)], ["60s"])
    assert df["value"].tolist() == [54.0, 55.0]


@pytest.mark.parametrize(
    "fake", [[(503, {"status": "error"}, 0), (503, {"status": "error"}, 0), (200, OK_BODY, 0)]], indirect=True
)
def test_transient_503_is_retried_with_backoff(fake):
    df = _src(fake.url, retries=3).summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    assert len(fake.headers) == 3 and len(df) == 1


@pytest.mark.parametrize(
    "fake", [[(500, {"status": "error", "errorType": "internal", "error": "boom"}, 0)]], indirect=True
)
def test_http_500_names_url_query_and_status(fake):
    with pytest.raises(PrometheusHTTPError) as e:
        _src(fake.url, retries=1).summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    msg = str(e.value)
    assert e.value.status == 500 and fake.url in msg and "max_over_time(DCGM_FI_DEV_GPU_TEMP" in msg and "boom" in msg


@pytest.mark.parametrize("fake", [[(403, {"status": "error", "error": "forbidden"}, 0)]], indirect=True)
def test_http_403_hints_at_credentials(fake):
    with pytest.raises(PrometheusHTTPError) as e:
        _src(fake.url).summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    assert e.value.status == 403 and "GPUOPS_PROMETHEUS_TOKEN" in str(e.value)


@pytest.mark.parametrize("fake", [[(200, OK_BODY, 3)]], indirect=True)
def test_slow_prometheus_times_out_with_specific_error(fake):
    with pytest.raises(PrometheusTimeout) as e:
        _src(fake.url, timeout=0.5, retries=0).summary("DCGM_FI_DEV_GPU_TEMP", "1h", "max")
    assert "0.5s" in str(e.value) and fake.url in str(e.value)


def test_settings_from_env_file_and_config(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("abc\n")
    s = load_settings(
        env={
            "GPUOPS_PROMETHEUS_URL": "https://prom.example/",
            "GPUOPS_PROMETHEUS_TOKEN_FILE": str(tok),
            "GPUOPS_PROMETHEUS_VERIFY": "false",
            "GPUOPS_PROMETHEUS_TIMEOUT": "7",
        }
    )
    assert (s.url, s.token, s.verify, s.timeout) == ("https://prom.example", "abc", False, 7.0)
    assert "abc" not in repr(s)
    cfg = tmp_path / "gpuops.yaml"
    cfg.write_text("prometheus:\n  url: http://thanos:10902\n  user: ro\n  password: pw\n")
    s2 = load_settings(env={"GPUOPS_CONFIG": str(cfg)})
    assert (s2.url, s2.user, s2.password) == ("http://thanos:10902", "ro", "pw") and "pw" not in repr(s2)


@pytest.mark.parametrize(
    "env,needle",
    [
        ({}, "GPUOPS_PROMETHEUS_URL"),
        ({"GPUOPS_PROMETHEUS_URL": "prom:9090"}, "not an http(s) URL"),
        ({"GPUOPS_PROMETHEUS_URL": "http://u:p@prom:9090"}, "must not carry credentials"),
        ({"GPUOPS_PROMETHEUS_URL": "http://prom", "GPUOPS_PROMETHEUS_TOKEN_FILE": "/no/such/token"}, "/no/such/token"),
    ],
)
def test_bad_settings_are_specific(env, needle):
    with pytest.raises(InvalidParameter) as e:
        load_settings(env=env)
    assert needle in str(e.value)


def test_demo_exporter_serves_metrics(tmp_path):
    import socket
    import subprocess
    import sys

    import requests

    from gpulib.sources.dcgm import parse_scrape

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(
        [sys.executable, "-m", "gpulib.cli", "exporter", "--port", str(port), "--node", "l4-spot-0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=die_with_parent,
    )
    try:
        for _ in range(100):
            try:
                r = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        df = parse_scrape(r.text)
        assert r.headers["Content-Type"].startswith("text/plain") and set(df["node"]) == {"l4-spot-0"}
        assert sorted(set(df["gpu"])) == ["0", "1", "2", "3"]
        assert requests.get(f"http://127.0.0.1:{port}/other", timeout=2).status_code == 404
    finally:
        p.terminate()
        p.wait(timeout=10)


@pytest.mark.parametrize(
    "kw,want",
    [({"verify": False}, False), ({"ca_bundle": "/etc/ssl/prom-ca.pem"}, "/etc/ssl/prom-ca.pem")],
    ids=["verify_false", "ca_bundle"],
)
def test_tls_settings_reach_the_request_sent_through_the_library(kw, want):
    """PrometheusConnect ignores disable_ssl= when handed a session (it sends the session's verify): the
    GPUOPS_PROMETHEUS_VERIFY / _CA_BUNDLE settings must still be what each request is sent with."""
    import requests

    seen = []

    class Capture(requests.adapters.BaseAdapter):
        def send(self, request, **kwargs):
            seen.append(kwargs["verify"])
            raise requests.ConnectionError("captured, not sent")

        def close(self):
            pass

    src = _src("https://prom.example:9090", retries=0, **kw)
    src.http.session.mount("https://prom.example:9090", Capture())
    with pytest.raises(PrometheusUnreachable):
        src.query("up")
    assert seen == [want]


def test_concurrent_queries_each_read_their_own_answer(monkeypatch):
    """gpulib/cost/steps.py queries one source from two threads: each query's status and body come from its
    own Response, even when both answers arrive before either is read (a barrier after the library call)."""
    from urllib.parse import parse_qs, urlsplit

    from prometheus_api_client import PrometheusConnect

    def by_query(path):
        bad = parse_qs(urlsplit(path).query)["query"] == ["bad"]
        return (500, {"status": "error", "error": "boom"}, 0) if bad else (200, OK_BODY, 0)

    srv = FakeProm([], answer=by_query)
    real, barrier = PrometheusConnect.custom_query, threading.Barrier(2, timeout=10)

    def both_answered_first(self, *a, **k):
        try:
            return real(self, *a, **k)
        finally:
            barrier.wait()

    monkeypatch.setattr(PrometheusConnect, "custom_query", both_answered_first)
    src = _src(srv.url, retries=0)
    out = {}

    def run(q):
        try:
            out[q] = src.query(q)
        except PrometheusHTTPError as exc:
            out[q] = exc

    try:
        threads = [threading.Thread(target=run, args=(q,)) for q in ("ok", "bad")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
    finally:
        srv.close()
    assert isinstance(out["ok"], list) and out["ok"][0]["value"] == [1, "55"]
    assert isinstance(out["bad"], PrometheusHTTPError) and out["bad"].status == 500 and "boom" in str(out["bad"])
