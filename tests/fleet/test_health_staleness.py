"""Telemetry staleness is judged from the last sample (an instant query), not from a coarse range grid."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pandas as pd

import gpulib.fleet as fleet
from gpulib.sources.prometheus import PrometheusSettings, PrometheusSource

END = pd.Timestamp("2026-11-29T12:00:00Z")


def _act(last_ts):
    rows = [
        {"timestamp": last_ts - pd.Timedelta(minutes=14 * k), "node": n, "gpu": g, "pct": 50.0}
        for n in ("a", "b")
        for g in ("0", "1")
        for k in range(3)
    ]
    return pd.DataFrame(rows)


def test_coarse_grid_is_not_stale_when_the_last_sample_is_fresh():
    act = _act(END - pd.Timedelta(minutes=14))  # a 7d range: one point every 14 min
    last = pd.DataFrame(
        {"node": ["a", "a", "b"], "gpu": ["0", "1", "0"], "timestamp": [END - pd.Timedelta(seconds=30)] * 3}
    )
    out = fleet.stale_telemetry(act, END, last_seen=last)
    assert [(f.node, f.gpu) for f in out] == [("b", "1")]


def test_prometheus_last_seen_is_an_instant_timestamp_query():
    seen = []

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            q = parse_qs(urlsplit(self.path).query)
            seen.append(q["query"][0])
            body = json.dumps(
                {
                    "status": "success",
                    "data": {
                        "resultType": "vector",
                        "result": [
                            {
                                "metric": {"Hostname": "a", "gpu": "0", "UUID": "GPU-1"},
                                "value": [END.timestamp(), str(END.timestamp() - 20)],
                            }
                        ],
                    },
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        src = PrometheusSource(
            settings=PrometheusSettings(url=f"http://127.0.0.1:{srv.server_address[1]}", timeout=2),
            end=END.to_pydatetime(),
        )
        df = src.last_seen("DCGM_FI_DEV_GPU_UTIL")
    finally:
        srv.shutdown()
    assert seen and seen[0].startswith("timestamp(")
    assert df[["node", "gpu"]].values.tolist() == [["a", "0"]]
    assert df["timestamp"].iloc[0] == END - pd.Timedelta(seconds=20)


def test_demo_source_last_seen_matches_its_raw_series(monkeypatch):
    from gpulib import connect

    monkeypatch.setenv("GPUOPS_END", "2026-11-29T12:00:00Z")
    src = connect("demo")
    df = src.last_seen("DCGM_FI_DEV_GPU_UTIL")
    assert len(df) and (df["timestamp"] <= pd.Timestamp(src.end)).all()
    assert (pd.Timestamp(src.end) - df["timestamp"]).max() < pd.Timedelta(minutes=5)
