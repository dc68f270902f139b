"""``gpuops serve`` stops clean: after SIGTERM (Kubernetes' stop) or SIGINT (Ctrl-C) no process it started survives
(the forkserver, the verdict workers, the resource tracker, kernels), within a bound.

The server runs as a child in a session (and process group) of its own on 127.0.0.1; its descendants are read from
/proc while it serves, so one that a dying parent left to init is still found."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from gpulib.execute import descendants
from tests.helpers.k8s_double import free_port
from tests.helpers.procs import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
#: seconds the server may take to stop after the signal (its shutdown grace, serve_limits.csv, plus the interpreter)
STOP_BOUND = 30


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its exit status is left


def _session(sid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and _alive(int(d.name)):
                out.append(int(d.name))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_server_leaves_no_process(tmp_path, sig):
    token = tmp_path / "token"
    token.write_text("t" * 40)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    env.pop("GPUOPS_SERVE_TOKEN", None)
    cmd = [sys.executable, "-m", "gpulib.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--out", str(tmp_path / "runs"), "--token-file", str(token), "--warm-kernels", "0"]
    server = subprocess.Popen(
        cmd,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    seen: set[int] = set()
    try:
        end = time.monotonic() + 90
        while time.monotonic() < end:  # serving, and its verdict workers started (forkserver, 2 workers, tracker)
            assert server.poll() is None, server.stderr.read().decode()[-3000:]
            seen |= set(descendants(server.pid))
            try:
                up = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
            except requests.RequestException:
                up = False
            if up and len(seen) >= 4:
                break
            time.sleep(0.3)
        assert len(seen) >= 4, f"the server started {len(seen)} processes"
        seen |= set(descendants(server.pid))
        t0 = time.monotonic()
        server.send_signal(sig)
        server.wait(STOP_BOUND)
        took = time.monotonic() - t0
        end = time.monotonic() + 5  # what was signalled may take a moment to be reaped by init
        while time.monotonic() < end and ([p for p in seen if _alive(p)] or _session(server.pid)):
            time.sleep(0.1)
        left = sorted({p for p in seen if _alive(p)} | set(_session(server.pid)))
        assert left == [], [Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in left if _alive(p)]
        assert took < STOP_BOUND
    finally:
        for p in [server.pid, *seen]:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        server.wait(10)
        server.stderr.close()
