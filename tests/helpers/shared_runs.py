"""Notebook runs shared by every test of one pytest session, across pytest-xdist workers.

Many tests read what one notebook run on the demo fleet writes (the executed notebook, its HTML, findings.json,
summary.md, a lesson's figures.json). Each such run happens once per session:

* :meth:`SharedRuns.demo` is one ``gpuops demo --out DIR -q`` (every notebook with its defaults, window end
  ``DEMO_END``), the run ``tests/project/test_rendered_html.py`` checks page by page;
* :meth:`SharedRuns.run` returns the run of one notebook with parameters: the demo's own run folder when the
  parameters are that notebook's defaults (``source="demo"`` included), else one ``gpulib.execute.execute`` of it (the
  path ``gpuops run`` takes) on the demo source, made by the first test that asks.

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
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

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
                    [sys.executable, "-m", "gpulib.cli", "demo", "--out", str(out), "-q"],
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
        """The run of notebook ``name`` with ``params`` on the demo fleet at ``DEMO_END``."""
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
                    res = execute(info, params, out_dir.parent, progress=False, out_dir=out_dir)
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
