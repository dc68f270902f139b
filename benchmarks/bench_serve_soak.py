"""Soak of a real ``gpuops serve``: N bursts of alerts and page reads; its memory, open files and processes before and
after, as ratios against its own start measured in the same run.

The server is a child process (``python -m gpulib.cli serve`` on loopback, demo source, its defaults unless
``--serve-arg`` adds options; ``--dedupe-window 1`` so every burst opens new runs on the demo fleet's nodes). Burst 0
is the warm-up: what the first alert imports and starts (verdict workers, kernels) is part of the start, so the start
("base") is measured once it is over; the very first figures ("cold", before any request) are printed too. Each
burst posts ``--alerts`` alerts (one node each, the demo fleet's nodes in turn), then ``--reads`` page reads from
16 threads (the index, a seeded 3 MiB report page, the alerts' ``runbook_url`` pages, the runs' pages, /healthz), then
waits until every run of the burst is finished. Memory is the server process's ``VmRSS`` from /proc/PID/status
(``man 5 proc``, https://man7.org/linux/man-pages/man5/proc.5.html), with the total of its descendants beside it; open
files are /proc/PID/fd; threads the ``Threads`` line of its status; processes are its descendants; ``cpu_s`` its own
user + system CPU seconds so far (/proc/PID/stat).

    PYTHONPATH=$PWD python benchmarks/bench_serve_soak.py --bursts 10 --alerts 4 --reads 150
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402
import yaml  # noqa: E402

from gpulib.execute import descendants  # noqa: E402

TOKEN = "soak-token-" + "s" * 30
FINISHED = ("done", "incomplete", "failed")
SEEDED = "20261205T000000Z-xid_ecc_triage-5eed00"


def _kib(pid: int, field: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def fd_kinds(pid: int) -> dict:
    """The server's open files by kind (socket, pipe, anon_inode:[eventpoll], a path's folder)."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = t.split(":")[0] if ":" in t and not t.startswith("/") else str(Path(t).parent)
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process (fields 14 and 15 of /proc/PID/stat, in clock ticks)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(pid: int) -> dict:
    kids = descendants(pid)
    return {
        "rss_mb": _kib(pid) / 1024,
        "tree_rss_mb": (_kib(pid) + sum(_kib(k) for k in kids)) / 1024,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "threads": _kib(pid, "Threads"),
        "processes": len(kids),
        "cpu_s": round(cpu_s(pid), 1),
        "fd_kinds": fd_kinds(pid),
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seed(out: Path, mib: int = 3) -> None:
    """A finished run with a large report, the page every burst reads."""
    d = out / SEEDED
    d.mkdir(parents=True, exist_ok=True)
    now = time.time()
    rec = {"id": SEEDED, "replica": None, "runbook": "xid_ecc_triage", "params": {"node": "seed", "gpu": "0"}}
    rec.update(status="done", created=now, started=now, finished=now, severity="ok", error=None, trigger={})
    (d / "run.json").write_text(json.dumps(rec))
    line = "<p>" + "x" * 1000 + "</p>\n"
    (d / "report.html").write_text("<html><head></head><body>" + line * (mib * 1024 * 1024 // len(line)) + "</body>")


def _nodes() -> list[str]:
    fleet = yaml.safe_load((ROOT / "gpulib/data/demo/demo_fleet.yaml").read_text())
    return [n["name"] for n in fleet["nodes"]]


def _alert(node: str, gpu: int) -> dict:
    labels = {"alertname": "GPUXidCritical", "Hostname": node, "gpu": str(gpu), "severity": "critical"}
    return {"status": "firing", "labels": labels}


def soak(bursts: int, alerts: int, reads: int, serve_args: list[str], work: Path, timeout: float = 600) -> dict:
    out = work / "runs"
    _seed(out)
    (work / "token").write_text(TOKEN)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    env.pop("GPUOPS_SERVE_TOKEN", None)
    cmd = [sys.executable, "-m", "gpulib.cli", "serve", "--host", "127.0.0.1", "--port", str(port), "--out", str(out)]
    cmd += ["--token-file", str(work / "token"), "--dedupe-window", "1", *serve_args]
    log = open(work / "server.log", "wb")
    srv = subprocess.Popen(cmd, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    http = requests.Session()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    nodes = _nodes()
    rows: list[dict] = []
    try:
        end = time.monotonic() + 180
        while True:
            assert srv.poll() is None, (work / "server.log").read_text()[-3000:]
            try:
                if http.get(f"{url}/healthz", timeout=2).status_code in (200, 503):
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < end, "the server did not start"
            time.sleep(0.3)
        time.sleep(2)
        cold = measure(srv.pid)
        k = 0
        for b in range(bursts + 1):  # burst 0 is the warm-up
            t0 = time.monotonic()
            ids, pages = [], []
            time.sleep(1.1)  # past the dedupe window of the previous burst
            for _ in range(alerts):
                node, gpu = nodes[k % len(nodes)], (k // len(nodes)) % 8
                k += 1
                r = http.post(f"{url}/alertmanager", json=_payload(node, gpu, b), headers=auth, timeout=60)
                assert r.status_code == 202, (r.status_code, r.text)
                ids += r.json()["runs"] + r.json()["attached"]
                pages.append(f"/run/xid_ecc_triage?node={node}&gpu={gpu}")
            targets = ["/runs", f"/runs/{SEEDED}", "/healthz", *pages, *(f"/runs/{i}" for i in ids)]

            def read(j: int) -> int:
                with requests.Session() as s:
                    r = s.get(url + targets[j % len(targets)], timeout=120, allow_redirects=False)
                    return r.status_code

            with ThreadPoolExecutor(16) as pool:
                codes = list(pool.map(read, range(reads)))
            bad = [c for c in codes if c >= 500 or c == 404]
            assert not bad, codes
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                recs = [http.get(f"{url}/runs/{i}/run.json", timeout=30).json() for i in set(ids)]
                if all(r["status"] in FINISHED for r in recs):
                    break
                time.sleep(1)
            else:
                raise AssertionError(f"burst {b}: runs not finished within {timeout} s")
            time.sleep(1)
            rows.append({"burst": b, "s": round(time.monotonic() - t0, 1), "runs": len(set(ids)), **measure(srv.pid)})
            print(json.dumps(rows[-1]), flush=True)
        base, last = rows[0], rows[-1]
        keys = ("rss_mb", "tree_rss_mb", "fds", "threads", "processes")
        ratio = {k: (last[k] / base[k] if base[k] else None) for k in keys}
        return {"cold": cold, "base": base, "end": last, "ratio": ratio, "bursts": rows}
    finally:
        try:
            os.killpg(srv.pid, signal.SIGTERM)
            srv.wait(40)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(srv.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            srv.wait(10)
        log.close()


def _payload(node: str, gpu: int, burst: int) -> dict:
    alert = _alert(node, gpu)
    return {"version": "4", "groupKey": f"soak-{burst}-{node}-{gpu}", "status": "firing", "alerts": [alert]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bursts", type=int, default=10)
    ap.add_argument("--alerts", type=int, default=4, help="alerts per burst (one node each)")
    ap.add_argument("--reads", type=int, default=150, help="page reads per burst (16 threads)")
    ap.add_argument("--serve-arg", action="append", default=[], help="an option for gpuops serve (repeatable)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        res = soak(args.bursts, args.alerts, args.reads, args.serve_arg, Path(tmp))
    print("cold", json.dumps(res["cold"]))
    print("base (after the warm-up burst)", json.dumps(res["base"]))
    print("end", json.dumps(res["end"]))
    print("end / base", json.dumps({k: round(v, 3) if v else v for k, v in res["ratio"].items()}))


if __name__ == "__main__":
    main()
