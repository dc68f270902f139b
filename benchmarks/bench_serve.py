"""Benchmark ``gpuops serve`` with the real runbooks on the demo source: the verdict first (``--verdict fast``,
verdicts in worker processes) side by side, in one run, with the notebook-first path of the previous release
(``--verdict notebook``: every alert waits for its notebook).

Scenarios (each on a fresh server in this process, uvicorn on loopback, window end pinned; the alerts are posted from
a separate process, as Alertmanager is one):

* ``single``: ``--single`` XID alerts one after the other (each sent once its predecessor's verdict is out), each on
  another GPU of the demo fleet; webhook -> verdict per alert; the renders' times apart.
* ``storm``: every GPU of the demo fleet alerted within ``--storm-s`` seconds, each alert posted ``--repeat`` times,
  from 8 senders; runs + attached + deduped = posts is checked.
* ``storm150``: the same on a generated fleet of ``--nodes`` nodes (the demo's nodes repeated under new names,
  written to a scenario file that ``$GPUOPS_DEMO_FLEET`` hands to every verdict process and render kernel); every
  run's notebook is rendered (``--no-render150`` skips the renders).

webhook -> verdict of an alert = (the later of its run's ``verdict_at`` and the answer to its post) - the time its post
was sent. Server RSS: this process, verdict processes and kernels excluded (given apart).

    PYTHONPATH=$PWD python benchmarks/bench_serve.py --out benchmarks/serve.json
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import multiprocessing
import os
import random
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests
import uvicorn
import yaml

from gpulib.demo.source import FLEET_ENV

TOKEN = "bench-token-" + "b" * 24
AUTH = {"Authorization": f"Bearer {TOKEN}"}
END = "2026-12-01T06:45:00Z"
FLEET = Path(__file__).resolve().parents[1] / "gpulib" / "data" / "demo" / "demo_fleet.yaml"
SENDERS = 8


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def cpu_s(pid: int | str = "self") -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat fields 14 and 15, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))], 2)


def generated_fleet(n: int) -> dict:
    d = yaml.safe_load(FLEET.read_text())
    base, nodes = d["nodes"], []
    for i in range(n):
        node = copy.deepcopy(base[i % len(base)])
        node["name"] = f"{node['name']}-g{i}"
        for w in node.get("workloads", []):
            w["pod"] = f"{w['pod']}-g{i}"
        nodes.append(node)
    d["nodes"] = nodes
    return d


class Server:
    def __init__(self, **cfg):
        from gpulib.serve import ServeConfig
        from gpulib.serve.app import create_app

        runner, verdicter = cfg.pop("runner", None), cfg.pop("verdicter", None)
        self.out = Path(tempfile.mkdtemp(prefix="bench-verdict-"))
        cfg = ServeConfig.build(out=self.out, token=TOKEN, dedupe_window=3600, **cfg)
        self.app = create_app(cfg, runner, verdicter)
        self.svc = self.app.state.service
        if hasattr(self.svc.verdicter, "warm"):  # the verdict processes up and their imports done
            self.workers = self.svc.verdicter.warm() or []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error", access_log=False)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        self.base = f"http://127.0.0.1:{self.port}"

    def post(self, alerts: list[dict], group: str) -> tuple[float, float, dict]:
        return post(self.base, alerts, group)

    def workers_rss_mb(self) -> float | None:
        pids = getattr(self, "workers", None)
        return round(sum(rss_mb(p) for p in pids), 1) if pids else None

    def workers_cpu_s(self) -> float | None:
        pids = getattr(self, "workers", None)
        return sum(cpu_s(p) for p in pids) if pids else None

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)
        self.svc.close()


def post(base: str, alerts: list[dict], group: str, session=None) -> tuple[float, float, dict]:
    body = {"version": "4", "groupKey": group, "status": "firing", "receiver": "gpuops", "alerts": alerts}
    while True:
        t = time.time()
        r = (session or requests).post(f"{base}/alertmanager", json=body, headers=AUTH, timeout=120)
        if r.status_code == 202:
            return t, time.time(), r.json()
        time.sleep(0.2)  # 503: retry as Alertmanager does


def send_storm(base: str, posts: list[tuple[str, int]], at: list[float], t_start: float) -> list:
    """The storm's posts, each at ``t_start + at[i]``, from SENDERS threads (run in a process of its own)."""
    local = threading.local()

    def send(i):
        delay = t_start + at[i] - time.time()
        if delay > 0:
            time.sleep(delay)
        if not hasattr(local, "s"):
            local.s = requests.Session()
        node, gpu = posts[i]
        return post(base, [alert(node, gpu)], group=f"storm-{node}", session=local.s)

    with ThreadPoolExecutor(SENDERS) as ex:
        sent = list(ex.map(send, range(len(posts))))
    return sent, cpu_s()


def alert(node: str, gpu: int) -> dict:
    return {
        "status": "firing",
        "labels": {"alertname": "GPUXidCritical", "Hostname": node, "gpu": str(gpu), "severity": "critical"},
        "annotations": {"summary": f"XID 79 on {node} GPU {gpu}"},
        "startsAt": "2026-12-01T06:40:00Z",
    }


def wait_verdicts(svc, ids, timeout=1800):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        recs = [svc.store.get(i) for i in ids]
        if all(r and r.get("verdict_at") for r in recs):
            return recs
        time.sleep(0.1)
    raise TimeoutError("verdicts not all out")


def latencies(svc, sent: list[tuple[float, float, dict]]) -> list[float]:
    out = []
    for t0, t1, ans in sent:
        for rid in ans["runs"] + ans["attached"] + ans["deduped"]:
            rec = svc.store.get(rid)
            out.append(max(rec["verdict_at"], t1) - t0)
    return out


def render_times(recs) -> list[float]:
    return [
        r["render_finished"] - r["render_started"] for r in recs if r.get("render_finished") and r.get("render_started")
    ]


def single(mode: str, n: int, warm: int) -> dict:
    nodes = yaml.safe_load(FLEET.read_text())["nodes"]
    targets = [(nd["name"], g) for nd in nodes for g in range(nd["gpus"])]
    random.Random(1).shuffle(targets)
    srv = Server(verdict=mode, warm_kernels=warm, kernels=2)
    time.sleep(5 if warm else 0.5)  # let the warm kernels and the verdict imports come up
    sent, ids = [], []
    for node, gpu in targets[:n]:
        t0, t1, ans = srv.post([alert(node, gpu)], group=f"single-{node}-{gpu}")
        rid = (ans["runs"] + ans["attached"] + ans["deduped"])[0]
        wait_verdicts(srv.svc, [rid])
        sent.append((t0, t1, ans))
        ids.append(rid)
    lat = latencies(srv.svc, sent)
    srv.svc.join(1800)
    recs = [srv.svc.store.get(i) for i in set(ids)]
    fig = {
        "mode": mode,
        "alerts": n,
        "p50_webhook_to_verdict_s": pct(lat, 0.5),
        "p95_webhook_to_verdict_s": pct(lat, 0.95),
        "render_p50_s": pct(render_times(recs), 0.5),
        "render_p95_s": pct(render_times(recs), 0.95),
        "renders_done": sum(r.get("render") == "done" for r in recs),
        "warm_renders": sum(bool(r.get("render_warm")) for r in recs),
        "verdict_changed": sum(bool(r.get("verdict_changed")) for r in recs),
        "server_rss_mb": rss_mb(),
    }
    srv.stop()
    return fig


def storm(mode: str, nodes: list[dict], repeat: int, spread_s: float, warm: int, render: bool = True) -> dict:
    cfg = {"verdict": mode, "warm_kernels": warm, "kernels": 2, "queue_limit": 5000}
    runner = None
    if not render:  # verdicts only

        def runner(folder, runbook, params, timeout):
            return {"status": "failed", "error": "not rendered in this benchmark (--no-render150)"}

        cfg["runner"] = runner
        from gpulib.serve.runner import ProcessVerdicter

        cfg["verdicter"] = ProcessVerdicter(2)
    srv = Server(**cfg)
    time.sleep(5 if warm else 0.5)
    posts = [(nd["name"], g) for nd in nodes for g in range(nd["gpus"])] * repeat
    rng = random.Random(2)
    rng.shuffle(posts)
    at = sorted(rng.uniform(0, spread_s) for _ in posts)
    t_start = time.time() + 1.0  # the sender process is up by then
    cpu0, wcpu0 = cpu_s(), srv.workers_cpu_s()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
        sent, sender_cpu = ex.submit(send_storm, srv.base, posts, at, t_start).result()
    last_post = max(t1 for _, t1, _ in sent)
    ids = {rid for _, _, a in sent for rid in a["runs"]}
    recs = wait_verdicts(srv.svc, ids)
    # where the machine's CPU went until the last verdict: the server (this process: HTTP, routing, store), the
    # verdict processes, the sender process (a process of its own started for the storm, so all of its CPU)
    cpu = {"server": round(cpu_s() - cpu0, 1), "sender": round(sender_cpu, 1)}
    if wcpu0 is not None:
        cpu["verdict_processes"] = round(srv.workers_cpu_s() - wcpu0, 1)
    lat = latencies(srv.svc, sent)
    n_runs = sum(len(a["runs"]) for _, _, a in sent)
    n_att = sum(len(a["attached"]) for _, _, a in sent)
    n_dup = sum(len(a["deduped"]) for _, _, a in sent)
    last_verdict = max(r["verdict_at"] for r in recs) - t_start
    fig = {
        "mode": mode,
        "nodes": len(nodes),
        "gpus": sum(nd["gpus"] for nd in nodes),
        "posts": len(posts),
        "runs": n_runs,
        "attached": n_att,
        "deduped": n_dup,
        "held": sum(a["held"] for _, _, a in sent),
        "runs_plus_attached_plus_deduped_equals_posts": n_runs + n_att + n_dup == len(posts),
        "posting_s": round(last_post - t_start, 2),
        "p50_webhook_to_verdict_s": pct(lat, 0.5),
        "p95_webhook_to_verdict_s": pct(lat, 0.95),
        "last_verdict_after_s": round(last_verdict, 2),
        # what the verdicts said (status/severity -> runs): a storm of wrong-parameter verdicts would be fast too
        "verdicts": dict(collections.Counter(f"{r.get('status')}/{r.get('severity')}" for r in recs)),
        "cpu_s_until_last_verdict": cpu,
        "server_rss_mb": rss_mb(),
        "verdict_processes_rss_mb": srv.workers_rss_mb(),
    }
    print(json.dumps(fig), flush=True)
    if render:
        srv.svc.join(7200)
        recs = [srv.svc.store.get(i) for i in ids]
        fig.update(
            render_p50_s=pct(render_times(recs), 0.5),
            render_p95_s=pct(render_times(recs), 0.95),
            renders_done=sum(r.get("render") == "done" for r in recs),
            last_render_after_s=round(max(r["render_finished"] for r in recs) - t_start, 2),
            verdict_changed=sum(bool(r.get("verdict_changed")) for r in recs),
            server_rss_mb_after_renders=rss_mb(),
        )
    srv.stop()
    return fig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--single", type=int, default=20)
    ap.add_argument("--single-old", type=int, default=5, help="single alerts on the notebook-first path")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--storm-s", type=float, default=2.0)
    ap.add_argument("--nodes", type=int, default=150)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--only", default="single,storm,storm150")
    ap.add_argument("--no-render150", dest="render150", action="store_false", help="150-node storm: verdicts only")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    os.environ["GPUOPS_END"] = END
    os.environ.pop("GPUOPS_SERVE_TOKEN", None)
    only = set(a.only.split(","))
    res: dict = {"cpus": os.cpu_count(), "end": END}

    def save():
        if a.out:
            a.out.write_text(json.dumps(res, indent=2))
        print(json.dumps(res, indent=2), flush=True)

    if "single" in only:
        res["single_fast"] = single("fast", a.single, a.warm)
        save()
        res["single_notebook"] = single("notebook", a.single_old, a.warm)
        save()
    if "storm" in only:
        nodes = yaml.safe_load(FLEET.read_text())["nodes"]
        res["storm_fast"] = storm("fast", nodes, a.repeat, a.storm_s, a.warm)
        save()
        res["storm_notebook"] = storm("notebook", nodes, a.repeat, a.storm_s, a.warm)
        save()
    if "storm150" in only:
        fleet = generated_fleet(a.nodes)
        path = Path(tempfile.mkdtemp(prefix="bench-fleet-")) / "fleet.yaml"
        path.write_text(yaml.safe_dump(fleet))
        os.environ[FLEET_ENV] = str(path)  # every verdict process and render kernel reads this fleet
        res["storm150_fast"] = storm("fast", fleet["nodes"], a.repeat, a.storm_s, a.warm, render=a.render150)
        save()


if __name__ == "__main__":
    main()
