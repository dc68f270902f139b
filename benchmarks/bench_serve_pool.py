"""Benchmark ``gpuops serve`` under an Alertmanager burst (stub runner: the HTTP, routing, dedupe and pool are measured,
not papermill).

``--posts`` webhook posts (one alert each) over ``--gpus`` distinct GPUs in ``--groups`` alert groups arrive from
``--clients`` concurrent senders that retry a 503 the way Alertmanager does; each run is a stub that sleeps
``--run-s``. Reported: alerts in, runs, dedupes, 202/503 answers, peak concurrent runs, p50/p95 webhook-to-verdict
(run created -> run finished) and the wall time, against a baseline measured in the same process: the same
number of stub runs on a plain thread pool of the same size (no HTTP, no queue limit).

    python benchmarks/bench_serve.py                      # 200 posts, 40 GPUs, 2 kernels, queue limit 10
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests
import uvicorn

from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app

TOKEN = "bench-token-" + "b" * 24


class Stub:
    def __init__(self, delay: float):
        self.delay, self.now, self.peak = delay, 0, 0
        self.lock = threading.Lock()

    def __call__(self, folder, runbook, params, timeout):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.delay)
        save_findings([Finding(severity=Severity.CRITICAL, title="stub")], folder / "findings.json", runbook=runbook)
        with self.lock:
            self.now -= 1
        return {"status": "done", "error": None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--posts", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=40)
    ap.add_argument("--groups", type=int, default=5)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--kernels", type=int, default=2)
    ap.add_argument("--queue-limit", type=int, default=10)
    ap.add_argument("--run-s", type=float, default=0.05)
    a = ap.parse_args()

    stub = Stub(a.run_s)
    t = time.monotonic()
    with ThreadPoolExecutor(a.kernels) as ex:
        list(ex.map(lambda _: time.sleep(a.run_s), range(a.gpus)))
    baseline = time.monotonic() - t

    out = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    cfg = ServeConfig.build(out=out, token=TOKEN, kernels=a.kernels, queue_limit=a.queue_limit, dedupe_window=600)
    app = create_app(cfg, stub)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        time.sleep(0.05)
    per_group = max(1, a.gpus // a.groups)
    posts = []
    for i in range(a.posts):
        g = i % a.gpus
        posts.append(
            {
                "version": "4",
                "groupKey": f"group-{g // per_group}",
                "status": "firing",
                "receiver": "gpuops",
                "alerts": [
                    {
                        "status": "firing",
                        "labels": {"alertname": "GPUXidCritical", "Hostname": f"node-{g // 8}", "gpu": str(g % 8)},
                    }
                ],
            }
        )
    codes = {"202": 0, "503": 0}
    lock = threading.Lock()
    session = requests.Session()

    def send(body):
        while True:
            r = session.post(
                f"http://127.0.0.1:{port}/alertmanager",
                json=body,
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=30,
            )
            with lock:
                codes[str(r.status_code)] = codes.get(str(r.status_code), 0) + 1
            if r.status_code == 202:
                return
            time.sleep(0.05)

    t = time.monotonic()
    with ThreadPoolExecutor(a.clients) as ex:
        list(ex.map(send, posts))
    app.state.service.pool.join(600)
    wall = time.monotonic() - t
    server.should_exit = True
    th.join(10)
    svc = app.state.service
    runs = svc.store.list()
    log = [e["action"] for e in svc.store.alert_log()]
    lat = sorted(r["finished"] - r["created"] for r in runs)
    fig = {
        "posts": a.posts,
        "alerts_in": a.posts,
        "runs": len(runs),
        "dedupes": log.count("dedupe"),
        "answers_202": codes["202"],
        "answers_503": codes["503"],
        "peak_kernels": max(stub.peak, svc.pool.peak),
        "kernels": a.kernels,
        "queue_limit": a.queue_limit,
        "stub_run_s": a.run_s,
        "p50_webhook_to_verdict_s": round(lat[len(lat) // 2], 3),
        "p95_webhook_to_verdict_s": round(lat[int(0.95 * (len(lat) - 1))], 3),
        "wall_s": round(wall, 2),
        "baseline_pool_s": round(baseline, 2),
        "wall_over_baseline": round(wall / baseline, 1),
    }
    print(json.dumps(fig, indent=2))


if __name__ == "__main__":
    main()
