"""One run in its own process: exactly ``gpuops run NAME -p ... --run-dir DIR`` (the CLI's validation, execution
and exit codes), so a per-run timeout can kill it and the papermill kernel it started. jupyter_client starts the kernel in a new session
(https://github.com/jupyter/jupyter_client/blob/main/jupyter_client/launcher.py), so killing our process
group is not enough: every descendant is found through /proc and killed too."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def descendants(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc: subprocess.Popen) -> None:
    pids = descendants(proc.pid) if Path("/proc").is_dir() else []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()


def _word(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


def default_argv(folder: Path, runbook: str, params: dict[str, Any]) -> list[str]:
    argv = [sys.executable, "-m", "gpulib.cli", "run", runbook, "--out", str(folder.parent), "--run-dir", str(folder),
            "--quiet", "--fail-on", "never"]
    for k, v in params.items():
        argv += ["-p", f"{k}={_word(v)}"]
    return argv


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " / ".join(lines[-n:])[-400:]


class SubprocessRunner:
    """``run(folder, runbook, params, timeout)`` -> outcome dict (status done | incomplete | failed, error)."""

    def __init__(self, argv: Callable[[Path, str, dict[str, Any]], list[str]] = default_argv,
                 env: dict[str, str] | None = None):
        self.argv = argv
        self.env = env

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        env = dict(os.environ, **(self.env or {}))
        env.pop("GPUOPS_SERVE_TOKEN", None)          # a run never sees the webhook token
        log = open(folder / "run.log", "wb")
        t0 = time.monotonic()
        proc = subprocess.Popen(self.argv(folder, runbook, params), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            return {"status": "failed", "error": f"timed out after {timeout:g} s: the run and its kernel were killed"}
        finally:
            log.close()
        # gpuops run: 0 = ran (--fail-on never), 2 = usage error, 3 = failed or a step lacked its data
        fj = folder / "findings.json"
        if rc == 0 and fj.is_file():
            return {"status": "done", "error": None}
        if rc == 3 and fj.is_file():
            errors = json.loads(fj.read_text()).get("errors") or []
            if errors:
                return {"status": "incomplete", "error": "; ".join(map(str, errors))[:1000]}
        return {"status": "failed", "error": f"the runbook process exited {rc} after {time.monotonic() - t0:.0f} s: "
                                             f"{_tail(folder / 'run.log') or 'no output'}"}
