"""A real ``gpuops serve`` for a test: a child process in a session of its own on 127.0.0.1 that dies with the test
(:func:`tests.helpers.procs.die_with_parent`), and what it weighs as Linux's /proc reads it (``man 5 proc``,
https://man7.org/linux/man-pages/man5/proc.5.html: ``VmRSS`` and ``VmHWM`` of /proc/PID/status, /proc/PID/fd)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from gpulib.execute import descendants
from tests.helpers.k8s_double import free_port
from tests.helpers.procs import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s" * 40


def kib(pid: int, field: str) -> int:
    """``field`` (VmRSS, VmHWM) of /proc/PID/status in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Server:
    """``gpuops serve --out OUT`` with ``args`` (default: no warm kernels) on a free port."""

    def __init__(self, tmp: Path, out: Path, *args: str, cmd: list[str] | None = None, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        token = tmp / "token"
        token.write_text(TOKEN)
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        full_env.pop("GPUOPS_SERVE_TOKEN", None)
        full_env.update(env or {})
        base = cmd or [sys.executable, "-m", "gpulib.cli", "serve"]
        base = base + ["--host", "127.0.0.1", "--port", str(self.port), "--out", str(out)]
        base += ["--token-file", str(token), *(args or ("--warm-kernels", "0"))]
        self.log = open(tmp / f"server-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            base,
            env=full_env,
            cwd=tmp,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.logfile = tmp / f"server-{self.port}.log"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_up(self, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.logfile.read_text()[-3000:]
            try:
                if requests.get(f"{self.url}/healthz", timeout=2).status_code in (200, 503):
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise AssertionError(f"the server did not answer within {timeout} s: {self.logfile.read_text()[-3000:]}")

    def post(self, body: dict, timeout: float = 30) -> requests.Response:
        return requests.post(
            f"{self.url}/alertmanager",
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            timeout=timeout,
        )

    def processes(self) -> list[int]:
        return descendants(self.pid)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """``sig`` to the server's whole session (its process group) and every descendant."""
        pids = [self.pid, *self.processes()]
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in pids:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()
