"""Notebook runs shared by every test of one pytest session, across pytest-xdist workers.

Many tests read what one notebook run on the demo fleet writes (the executed notebook, its HTML, findings.json,
summary.md, a lesson's figures.json). Each such run happens once per session:

* :meth:`SharedRuns.demo` is one ``gpuops demo --out DIR -q --jobs 1`` (every notebook with its defaults, window end
  ``DEMO_END``; one at a time: the suite's workers already keep every CPU busy, and two notebooks at once beside them
  cost 60 s more CPU in a fresh-clone make test), the run ``tests/project/test_rendered_html.py`` checks page by page;
* :meth:`SharedRuns.run` returns the run of one notebook with parameters: the demo's own run folder when the
  parameters are that notebook's defaults (``source="demo"`` included), else one ``gpulib.execute.execute`` of it (the
  path ``gpuops run`` takes) on the demo source, made by the first test that asks.

Runs of one notebook made by one worker share a kernel (:class:`KeptKernels`, the ``warm=`` hand-over of
:func:`gpulib.execute.execute`, so each run's environment and folder are set in it before the first cell as for a warm
kernel): before each run its namespace is emptied (``%reset -f``), its environment set to what a kernel started now
would inherit, and :mod:`gpulib.runbook` reloaded (per-kernel display state: plotly.js sent once per kernel), so a run
sees nothing of the one before; what stays is ``sys.modules`` (the imports a cold kernel spends most of its start on)
and the pure caches of the modules. ``gpuops demo`` (every notebook at its defaults) keeps one cold kernel per run.

The first test to ask does the work under a file lock in a folder every worker of the session shares
(``tmp_path_factory.getbasetemp().parent`` under xdist, the pattern pytest-xdist documents:
https://pytest-xdist.readthedocs.io/en/stable/how-to.html#making-session-scoped-fixtures-execute-only-once);
the others wait for it and read the same files. A test must not change what it reads there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.pinned import DEMO_END, ROOT

#: environment of the developer's cluster that a demo run must not see (the autouse fixture of conftest.py
#: drops them for every test; a shared run may be started from a test that set them, e.g. live_env)
_LIVE_ENV = ("KUBECONFIG", "GPUOPS_CONFIG", "GPUOPS_KUBE_CONTEXT", "GPUOPS_FINDINGS_PATH")
#: the line ``gpuops demo`` prints per notebook: ``== <name>: <status> · worst finding: ...``
_STATUS = re.compile(r"^== (\S+): (FAILED|BAD PARAMETER|INCOMPLETE|done) ·", re.M)


@dataclass
class SharedRun:
    """What a test of a notebook run reads, named as :class:`gpulib.execute.RunResult` names it."""

    name: str
    out_dir: Path
    failed: str | None = None
    errors: list[str] = field(default_factory=list)
    usage_errors: list[str] = field(default_factory=list)

    @property
    def notebook(self) -> Path:
        return self.out_dir / f"{self.name}.ipynb"

    @property
    def html(self) -> Path | None:
        p = self.out_dir / f"{self.name}.html"
        return p if p.exists() else None

    @property
    def doc(self) -> dict[str, Any]:
        """findings.json as the notebook wrote it."""
        return json.loads((self.out_dir / "findings.json").read_text())

    @property
    def findings(self) -> list:
        from gpulib.core.findings import Finding

        path = self.out_dir / "findings.json"
        return [Finding.from_dict(d) for d in self.doc.get("findings", [])] if path.exists() else []

    def text(self) -> str:
        """The executed notebook's text (what ``run_notebook`` of conftest.py returns beside the findings)."""
        return self.notebook.read_text()


@dataclass
class DemoRun:
    out: Path
    proc: subprocess.CompletedProcess


class SharedRuns:
    def __init__(self, root: Path, kernels: KeptKernels | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        #: the worker's kept kernel (tests/conftest.py _notebook_kernels), lent as "notebook" whichever runbook runs
        self.kernels = kernels if kernels is not None else KeptKernels(keep=1)

    def close(self) -> None:
        self.kernels.close()

    @contextmanager
    def _locked(self, name: str):
        with open(self.root / f"{name}.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def demo(self) -> DemoRun:
        """``gpuops demo --out DIR -q`` at ``DEMO_END``, run once per session."""
        out, done = self.root / "demo", self.root / "demo.json"
        with self._locked("demo"):
            if not done.exists():
                env = {
                    k: v for k, v in os.environ.items() if k not in _LIVE_ENV and not k.startswith("GPUOPS_PROMETHEUS_")
                }
                env.update(PYTHONPATH=str(ROOT), GPUOPS_END=DEMO_END.isoformat())
                p = subprocess.run(
                    [sys.executable, "-m", "gpulib.cli", "demo", "--out", str(out), "-q", "--jobs", "1"],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=1500,
                    cwd=ROOT,
                )
                done.write_text(
                    json.dumps({"args": p.args, "returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
                )
        d = json.loads(done.read_text())
        return DemoRun(out, subprocess.CompletedProcess(d["args"], d["returncode"], d["stdout"], d["stderr"]))

    def run(self, name: str, **params: Any) -> SharedRun:
        """The run of notebook ``name`` with ``params`` on the demo fleet at ``DEMO_END`` (the executed notebook
        written once, when the run ends: gpulib/run/render.py turns papermill's save at every cell off)."""
        from gpulib.catalogue import find_notebook
        from gpulib.execute import execute

        info = find_notebook(name)
        defaults = {p.name: p.default for p in info.params}
        merged = {**defaults, **params}
        assert merged.get("source", "demo") == "demo", "only demo runs are shared (a live run belongs to its test)"
        if merged == defaults:
            return self._from_demo(info)
        key = hashlib.sha256(json.dumps(merged, sort_keys=True, default=str).encode()).hexdigest()[:12]
        out_dir, done = self.root / "runs" / f"{name}-{key}", self.root / "runs" / f"{name}-{key}.json"
        with self._locked(f"{name}-{key}"):
            if not done.exists():
                out_dir.mkdir(parents=True)
                with pytest.MonkeyPatch.context() as mp:
                    for k in [k for k in os.environ if k in _LIVE_ENV or k.startswith("GPUOPS_PROMETHEUS_")]:
                        mp.delenv(k)
                    mp.setenv("PYTHONPATH", str(ROOT))
                    mp.setenv("GPUOPS_END", DEMO_END.isoformat())
                    res = execute(
                        info,
                        params,
                        out_dir.parent,
                        progress=False,
                        out_dir=out_dir,
                        warm=self.kernels.lend("notebook"),
                    )
                    if res.failed:  # a kernel that failed a run (killed, or stuck) is not lent again
                        self.kernels.drop("notebook")
                done.write_text(
                    json.dumps({"failed": res.failed, "errors": res.errors, "usage_errors": res.usage_errors})
                )
        d = json.loads(done.read_text())
        return SharedRun(name, out_dir, d["failed"], d["errors"], d["usage_errors"])

    def notebook(self, name: str, **params: Any) -> tuple[dict[str, Any], str]:
        """(findings JSON, executed notebook text) of :meth:`run`, as ``run_notebook`` of conftest.py returns."""
        run = self.run(name, **params)
        assert run.failed is None, run.failed
        return run.doc, run.text()

    def _from_demo(self, info) -> SharedRun:
        demo = self.demo()
        folders = [
            p
            for p in demo.out.glob(f"*-{info.name}-*")
            if re.fullmatch(rf"\d{{8}}T\d{{6}}Z-{re.escape(info.name)}-[0-9a-f]{{6}}", p.name)
        ]
        assert len(folders) == 1, (info.name, folders, demo.proc.stdout[-2000:], demo.proc.stderr[-2000:])
        status = dict(_STATUS.findall(demo.proc.stdout)).get(info.name)
        run = SharedRun(info.name, folders[0])
        tail = demo.proc.stderr[-2000:]
        if status is None or status == "FAILED":
            run.failed = f"gpuops demo: {info.name} {status or 'not reported'}; its stderr ends: {tail}"
        if (run.out_dir / "findings.json").exists():
            run.errors += run.doc.get("errors", [])
            run.usage_errors += run.doc.get("usage_errors", [])
        elif info.kind != "learn":
            run.errors.append("the notebook wrote no findings")
        if run.html is None:
            run.errors.append("no HTML written")
        if status == "INCOMPLETE" and not run.errors:
            run.errors.append(f"gpuops demo says {info.name} is INCOMPLETE; its stderr ends: {tail}")
        if status == "BAD PARAMETER" and not run.usage_errors:
            run.usage_errors.append(f"gpuops demo says {info.name} had a bad parameter")
        return run


#: run in a kept kernel right after it started: the environment it started with (what it inherited and what the
#: kernel itself added)
_STARTED = "import os as _os; _os._gpuops_started_env = dict(_os.environ); del _os"
#: run in a kept kernel before it is lent again: an empty namespace, the environment a kernel started now would get
#: (what it added itself at its start, and this process' environment now), and gpulib.runbook's per-kernel state
#: (plotly.js sent once per kernel) as a fresh import leaves it. Then what is left (the modules, their caches) is
#: frozen out of the garbage collector's reach (https://docs.python.org/3/library/gc.html#gc.freeze): %reset collects
#: twice (ipython/ipython: IPython/core/magics/namespace.py ``reset`` and IPython/core/displayhook.py ``flush``,
#: https://github.com/ipython/ipython), and each full collection walked every object of pandas, plotly and gpulib
#: again, a fifth of a kept kernel's CPU per run; frozen, it walks what the last run left
_RESET = """get_ipython().run_line_magic("reset", "-f")
import gc as _gc, importlib as _il, os as _os, sys as _sys
_added = {{k: v for k, v in _os._gpuops_started_env.items() if k not in {inherited!r}}}
_os.environ.clear(); _os.environ.update({{**_added, **{env!r}}})
if "gpulib.runbook" in _sys.modules: _il.reload(_sys.modules["gpulib.runbook"])
_gc.freeze()
del _gc, _il, _os, _sys, _added
"""


class _Kept:
    """A kept kernel's manager as :func:`gpulib.execute.execute` gets it: stopping it after the run is left to
    :class:`KeptKernels` (``shutdown_kernel`` does nothing and there is no process to kill); the rest is the manager."""

    provisioner = None

    def __init__(self, km):
        self._km = km

    def __getattr__(self, name):
        return getattr(self._km, name)

    async def shutdown_kernel(self, *args, **kwargs) -> None:
        return None


class _Lend:
    def __init__(self, km):
        self.km = km

    def take(self, wait: float = 0):
        return _Kept(self.km)


class KeptKernels:
    """One kernel per notebook on this worker (at most ``keep`` at a time, the least recently used stopped first),
    emptied before each run (:data:`_RESET`)."""

    def __init__(self, keep: int = 2):
        self.keep = keep
        self._kms: dict[str, object] = {}
        self._inherited: dict[int, list[str]] = {}  # id(km) -> the names of the environment it started with

    def lend(self, name: str) -> _Lend:
        from gpulib.execute import KERNEL_ARGS, _kernel_manager, run_code

        env = dict(os.environ)
        km = self._kms.pop(name, None)
        if km is not None:
            try:
                run_code(km, _RESET.format(env=env, inherited=self._inherited[id(km)]))
            except Exception:  # gone or stuck: a fresh one
                self._stop(km)
                km = None
        if km is None:
            from jupyter_core.utils import run_sync

            while len(self._kms) >= self.keep:
                self._stop(self._kms.pop(next(iter(self._kms))))
            km = _kernel_manager({})
            run_sync(km.start_kernel)(extra_arguments=list(KERNEL_ARGS))
            self._inherited[id(km)] = sorted(env)
            run_code(km, _STARTED)
        self._kms[name] = km  # most recently used last
        return _Lend(km)

    def drop(self, name: str) -> None:
        km = self._kms.pop(name, None)
        if km is not None:
            self._stop(km)

    def _stop(self, km) -> None:
        from gpulib.execute import _shutdown

        self._inherited.pop(id(km), None)
        _shutdown(km)

    def close(self) -> None:
        while self._kms:
            self._stop(self._kms.popitem()[1])
