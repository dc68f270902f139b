"""One run in its own process (``python -m gpulib.serve.runner``), so a per-run timeout can kill it and the
papermill kernel it started. jupyter_client starts the kernel in a new session
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

RESULT_FILE = "result.json"


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


def default_argv(folder: Path, runbook: str, params: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "gpulib.serve.runner", str(folder), runbook, json.dumps(params)]


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
        res = folder / RESULT_FILE
        if not res.is_file():
            return {"status": "failed", "error": f"runner exited {rc} after {time.monotonic() - t0:.0f} s without a "
                                                 "result (see run.log)"}
        out = json.loads(res.read_text())
        if out.get("failed"):
            return {"status": "failed", "error": out["failed"]}
        if out.get("errors"):
            return {"status": "incomplete", "error": "; ".join(out["errors"])}
        return {"status": "done", "error": None}


def main(argv: list[str]) -> int:
    """Child side: execute the notebook into ``folder`` (dry run: the server passes no remediation switch)."""
    from gpulib.catalogue import find_notebook
    from gpulib.cli import execute

    folder, runbook, params = Path(argv[0]), argv[1], json.loads(argv[2])
    info = find_notebook(runbook)
    res = execute(info, params, folder.parent, progress=False, out_dir=folder)
    (folder / RESULT_FILE).write_text(json.dumps({"failed": res.failed, "errors": res.errors, "worst": res.worst,
                                                  "html": res.html.name if res.html else None}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
