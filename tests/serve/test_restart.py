"""Runs accepted but not started are run after a crash: a real ``gpuops serve`` whose one
verdict thread is blocked (tests/helpers/blocked_serve.py) accepts three alerts (202: one run is running, two are
queued), is killed with SIGKILL, and a new ``gpuops serve`` on the same run store gives the two queued runs their
verdict; the run that was running when it died is shown interrupted, as it was cut short."""

from __future__ import annotations

import json
import sys
import time

import requests

from tests.helpers.serveproc import Server
from tests.serve.test_app import payload, xid

NODES = ("dgx-h100-0", "dgx-h100-1", "h200-infer-0")


def _runs(out) -> dict[str, dict]:
    return {d.name: json.loads((d / "run.json").read_text()) for d in out.iterdir() if (d / "run.json").is_file()}


def test_runs_accepted_but_not_started_are_run_after_a_kill_9(tmp_path):
    out = tmp_path / "runs"
    args = ("--warm-kernels", "0", "--verdict-workers", "1")
    blocked = Server(tmp_path, out, *args, cmd=[sys.executable, "-m", "tests.helpers.blocked_serve"])
    again = None
    try:
        blocked.wait_up()
        ids = []
        for node in NODES:
            r = blocked.post(payload([xid(node, "1")], group=node))
            assert r.status_code == 202, r.text
            ids += r.json()["runs"]
        assert len(ids) == 3
        end = time.monotonic() + 30
        while time.monotonic() < end and sorted(r["status"] for r in _runs(out).values()) != [
            "queued",
            "queued",
            "running",
        ]:
            time.sleep(0.2)
        before = _runs(out)
        queued = sorted(i for i in ids if before[i]["status"] == "queued")
        running = [i for i in ids if before[i]["status"] == "running"]
        assert len(queued) == 2 and len(running) == 1, before
        blocked.kill()  # SIGKILL: no shutdown code runs

        again = Server(tmp_path, out, *args, "--verdict-in", "threads")
        again.wait_up()
        end = time.monotonic() + 240
        got = {}
        while time.monotonic() < end:
            got = {i: requests.get(f"{again.url}/runs/{i}/run.json", timeout=10).json() for i in ids}
            if all(got[i].get("verdict_at") for i in queued):
                break
            time.sleep(1)
        for i in queued:
            assert got[i].get("verdict_at"), got[i]
            assert got[i]["status"] in ("rendering", "done", "incomplete"), got[i]
            assert got[i]["requeued"] and "interrupted" not in str(got[i].get("error"))
        assert got[running[0]]["status"] == "failed" and "interrupted" in got[running[0]]["error"]
    finally:
        blocked.kill()
        if again is not None:
            again.kill()
