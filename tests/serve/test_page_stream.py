"""A finished run's page is streamed from its file, not read whole: 150 clients that open a large
run page at once cost the server a bounded amount of memory, not the page's size 150 times, and its memory is back
near where it started once they are done.

The server is a real ``gpuops serve`` child process (tests/helpers/serveproc.py); its memory is read from /proc
(``VmRSS`` now, ``VmHWM`` the peak). The clients are raw sockets that send the request and read only the first bytes
until every one has been answered, as slow readers do: what the server holds for them then is what it buffered."""

from __future__ import annotations

import json
import socket
import time

import requests

from tests.helpers.serveproc import Server, kib

RUN = "20261205T010000Z-xid_ecc_triage-abc123"
PAGE_MB = 3
CLIENTS = 150


def seed(out, run_id=RUN, mb=PAGE_MB, status="done"):
    """A finished run in the store (as gpulib/serve/store.py writes it) whose report is ``mb`` MiB."""
    d = out / run_id
    d.mkdir(parents=True)
    now = time.time() - 60
    rec = {
        "id": run_id,
        "replica": None,
        "runbook": "xid_ecc_triage",
        "params": {"node": "n1", "gpu": "1"},
        "status": status,
        "created": now,
        "started": now,
        "finished": now + 1,
        "verdict": None,
        "severity": "ok",
        "cause": "no finding",
        "command": None,
        "error": None,
        "trigger": {"url": "/run/xid_ecc_triage"},
    }
    (d / "run.json").write_text(json.dumps(rec))
    line = "<p>" + "x" * 1000 + "</p>\n"
    head = "<!doctype html><html><head><title>report</title></head><body class='report'>\n"
    body = line * (mb * 1024 * 1024 // len(line))
    (d / "report.html").write_text(head + body + "</body></html>\n")
    return d


def test_a_run_page_keeps_the_report_whole_with_the_banner_after_the_body_tag(tmp_path):
    out = tmp_path / "runs"
    d = seed(out, mb=1)
    srv = Server(tmp_path, out, "--warm-kernels", "0", "--verdict", "notebook")
    try:
        srv.wait_up()
        r = requests.get(f"{srv.url}/runs/{RUN}", timeout=30)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        page = (d / "report.html").read_text()
        cut = page.index("<body class='report'>") + len("<body class='report'>")
        assert r.text.startswith(page[:cut] + "<div id='gpuops-verdict'")
        assert r.text.endswith(page[cut:])
        assert r.text.count("id='gpuops-verdict'") == 1
    finally:
        srv.kill()


def test_150_clients_of_a_large_run_page_do_not_cost_the_page_150_times(tmp_path):
    out = tmp_path / "runs"
    seed(out)
    srv = Server(tmp_path, out, "--warm-kernels", "0", "--verdict", "notebook")
    socks = []
    try:
        srv.wait_up()
        for _ in range(3):  # what the first requests import and allocate is the baseline, not the burst
            assert requests.get(f"{srv.url}/runs/{RUN}", timeout=30).status_code == 200
        time.sleep(0.5)
        before = kib(srv.pid, "VmRSS")
        request = f"GET /runs/{RUN} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        for _ in range(CLIENTS):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=120)
            s.sendall(request)
            socks.append(s)
        for s in socks:  # every request answered (its first bytes here), none read further yet
            assert s.recv(1024).startswith(b"HTTP/1.1 200")
        time.sleep(1.0)
        during = kib(srv.pid, "VmRSS")
        for s in socks:  # then every client reads its page to the end
            got = 1024
            while chunk := s.recv(1 << 20):
                got += len(chunk)
            assert got > PAGE_MB * 1000 * 1000
            s.close()
        socks.clear()
        time.sleep(2.0)
        after, peak = kib(srv.pid, "VmRSS"), kib(srv.pid, "VmHWM")
        whole = CLIENTS * PAGE_MB * 1024  # KiB: the page once per client
        print(f"RSS KiB before {before}, during {during}, peak {peak}, after {after}; pages {whole}")
        # reading each page whole holds most of it per client (450 MB here); streamed, a chunk or two per client
        assert peak - before < whole / 4, (before, during, peak, after)
        assert during - before < whole / 4, (before, during, peak, after)
        # and the memory is given back: near its baseline once the burst is over
        assert after - before < whole / 8, (before, during, peak, after)
        assert requests.get(f"{srv.url}/healthz", timeout=10).status_code == 200
    finally:
        for s in socks:
            s.close()
        srv.kill()
