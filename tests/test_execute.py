"""gpulib.execute, the one run engine: parameters resolved once (source included), findings.json read once and
summary.md written once per run (``gpuops run`` and ``gpuops serve``), the index row taken from the run, and runs
in threads of one process each in their own kernel, in the notebook's folder, without moving this process."""

from __future__ import annotations

import builtins
import io
import json
import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from gpulib import cli
from gpulib.catalogue import find_notebook
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.run import render as engine
from gpulib.run.params import prepare

TOKEN = "test-token-" + "e" * 24


def _stub_papermill(input_path, output_path, parameters=None, km=None, **kw):
    """Stands in for papermill.execute_notebook: writes the executed notebook and this run's findings."""
    Path(output_path).write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    save_findings(
        [
            Finding(
                Severity.CRITICAL,
                f"XID 79 on {parameters.get('node')}",
                node=parameters.get("node"),
                sop_step="Drain the node.",
                commands=[f"kubectl cordon {parameters.get('node')}"],
            ),
            Finding(Severity.INFO, "note"),
        ],
        km.run_env["GPUOPS_FINDINGS_PATH"],
        runbook="xid_ecc_triage",
        parameters=parameters,
    )


def _stub_html(nb, html, title):
    Path(html).write_text("<html><body>report</body></html>")
    return Path(html)


@pytest.fixture
def opened(monkeypatch):
    """Every file this process opens from now on, as (file name, 'r' | 'w') -> count."""
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", _stub_papermill)
    monkeypatch.setattr(engine, "export_html", _stub_html)
    seen: Counter = Counter()
    real = io.open

    def counting(file, mode="r", *a, **kw):
        if isinstance(file, (str, os.PathLike)):
            seen[(Path(file).name, "w" if any(c in mode for c in "wax+") else "r")] += 1
        return real(file, mode, *a, **kw)

    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    return seen


def test_a_cli_run_reads_findings_once_and_writes_summary_once(tmp_path, opened, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "xid_ecc_triage", "-p", "node", "dgx-h100-1", "-q", "-o", str(tmp_path)])
    assert e.value.code == cli.EXIT_FINDING
    assert opened[("findings.json", "r")] == 1
    assert opened[("summary.md", "w")] == 1
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    summary = (run / "summary.md").read_text()
    assert summary.startswith("# xid_ecc_triage: DONE") and "**Cause:** XID 79 on dgx-h100-1" in summary
    assert "**Next step:** Drain the node." in summary and "Report: xid_ecc_triage.html" in summary
    # the index row comes from the run itself (worst severity, cause, where), not from findings.json read again
    index = (tmp_path / "index.html").read_text()
    assert "data-runbook='xid_ecc_triage' data-node='dgx-h100-1' data-severity='critical'" in index
    assert (
        "<td class='cause'>XID 79 on dgx-h100-1</td>" in index and f"<a href='{run.name}/xid_ecc_triage.html'>" in index
    )
    assert "XID 79 on dgx-h100-1" in capsys.readouterr().out


def test_a_serve_run_goes_through_the_engine_in_process_reading_findings_once(tmp_path, opened, monkeypatch):
    from fastapi.testclient import TestClient

    from gpulib.serve import ServeConfig
    from gpulib.serve.app import create_app

    # the notebook's verdict (--verdict notebook): the fast verdict, which writes summary.md at once and again when
    # the notebook is rendered, has its own tests (tests/serve/test_app_verdict_first.py)
    app = create_app(ServeConfig.build(out=tmp_path / "runs", token=TOKEN, verdict="notebook"))
    c = TestClient(app)
    r = c.get("/run/xid_ecc_triage", params={"node": "n1", "gpu": "3"}, follow_redirects=False)
    rid = r.headers["location"].rsplit("/", 1)[1]
    assert app.state.service.pool.join(30)
    assert opened[("findings.json", "r")] == 1
    assert opened[("summary.md", "w")] == 1
    rec = c.get(f"/runs/{rid}/run.json").json()
    assert (rec["status"], rec["severity"], rec["cause"], rec["command"]) == (
        "done",
        "critical",
        "XID 79 on n1",
        "kubectl cordon n1",
    )
    summary = c.get(f"/runs/{rid}/summary.md").text
    assert summary.startswith("# xid_ecc_triage: DONE") and "Parameters: `node=n1`, `gpu=3`" in summary
    assert f"Report: {app.state.service.link(rid)}" in summary
    doc = c.get(f"/runs/{rid}/findings.json").json()
    assert doc["parameters"] == {"source": "demo", "node": "n1", "gpu": "3"}


# ------------------------------------------------------------------------------------- parameters
def test_prepare_maps_the_source_once_and_checks_the_source_the_run_will_use(tmp_path):
    info = find_notebook("xid_ecc_triage")
    assert prepare(info, [("node", "n1")]) == {"node": "n1"}
    snap = prepare(info, [("node", "n1")], source=str(tmp_path))
    assert snap == {"source": "snapshot", "snapshot_dir": str(tmp_path.resolve()), "node": "n1", "gpu": ""}
    # -p source=... is the same rule as --source, checked before a kernel starts
    with pytest.raises(InvalidParameter, match="--source 'prod'"):
        prepare(info, [("source", "prod")])
    with pytest.raises(InvalidParameter, match="needs --snapshot DIR"):
        prepare(info, [("source", "snapshot"), ("node", "n1")])
    # a non-demo source never falls back to the demo fleet's node name
    with pytest.raises(InvalidParameter, match="-p node"):
        prepare(info, source="live")
    # values checked when a request came in (gpuops serve) are taken as they are, with the server's source
    assert prepare(info, given={"node": "n2", "gpu": "5"}, source="demo") == {
        "source": "demo",
        "node": "n2",
        "gpu": "5",
    }


def test_serve_passes_its_source_through_the_same_rules(tmp_path):
    from fastapi.testclient import TestClient

    from gpulib.serve import ServeConfig
    from gpulib.serve.app import create_app

    seen = []

    def runner(folder, runbook, params, timeout):
        seen.append(params)
        return {"status": "done", "error": None, "verdict": {}}

    snap = tmp_path / "incident"
    snap.mkdir()
    app = create_app(ServeConfig.build(out=tmp_path / "runs", token=TOKEN, source=str(snap)), runner)
    TestClient(app).get("/run/xid_ecc_triage", params={"node": "n1"}, follow_redirects=False)
    assert app.state.service.pool.join(10)
    assert seen == [{"source": "snapshot", "snapshot_dir": str(snap.resolve()), "node": "n1", "gpu": ""}]
    with pytest.raises(InvalidParameter, match="--source 'prod'"):
        ServeConfig.build(out=tmp_path / "runs", token=TOKEN, source="prod")


# ---------------------------------------------------------------------------------- real kernels
CWD_CELL = """import os
from pathlib import Path
Path(os.environ["GPUOPS_FINDINGS_PATH"]).with_name("kernel.txt").write_text(\
os.getcwd() + "\\n" + os.environ.get("GPUOPS_SERVE_TOKEN", "absent"))
"""


@pytest.mark.notebook
def test_runs_in_threads_each_run_in_the_notebooks_folder_without_moving_this_process(tmp_path, monkeypatch):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from gpulib.catalogue import notebook_info

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        nb = new_notebook(
            cells=[new_markdown_cell(f"# {name}"), new_code_cell(CWD_CELL)],
            metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        )
        nbformat.write(nb, str(tmp_path / name / f"nb_{name}.ipynb"))
    monkeypatch.setenv("GPUOPS_SERVE_TOKEN", TOKEN)
    here = os.getcwd()
    out, res = tmp_path / "out", {}

    def go(name):
        info = notebook_info(tmp_path / name / f"nb_{name}.ipynb")
        unset = ("GPUOPS_SERVE_TOKEN",) if name == "a" else ()
        res[name] = engine.execute(info, {}, out, progress=False, timeout=120, unset_env=unset)

    ts = [threading.Thread(target=go, args=(n,)) for n in ("a", "b")]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert os.getcwd() == here
    seen = {n: (r.out_dir / "kernel.txt").read_text().splitlines() for n, r in res.items()}
    assert seen["a"] == [str(tmp_path / "a"), "absent"]  # the token named in unset_env is not there
    assert seen["b"] == [str(tmp_path / "b"), TOKEN]  # (an ordinary run inherits the environment)


def _kernel_children() -> list[int]:
    """Running ipykernel processes whose parent is this test process."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"ipykernel" in cmd:
            out.append(int(d.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_a_run_leaves_no_kernel_behind(tmp_path):
    """papermill given ``km=`` leaves the kernel running; every in-process run (gpuops demo runs 17, gpuops serve one
    per alert) would keep an idle kernel, ~170 MiB each. After each run no kernel of this process is left."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from gpulib.catalogue import notebook_info

    nb = new_notebook(
        cells=[new_code_cell("x = 1")],
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
    )
    nbformat.write(nb, str(tmp_path / "nb_k.ipynb"))
    before = set(_kernel_children())
    for _ in range(2):
        res = engine.execute(notebook_info(tmp_path / "nb_k.ipynb"), {}, tmp_path / "out", progress=False, timeout=120)
        assert res.failed is None
        assert set(_kernel_children()) - before == set()


@pytest.mark.notebook
def test_a_foreign_python3_kernelspec_first_on_the_path_does_not_take_the_run(tmp_path, monkeypatch, capsys):
    """JupyterHub or a conda env often install a kernelspec named python3 for another interpreter (one without
    gpulib). A run uses the interpreter gpuops runs in, whatever kernelspecs exist."""
    import sys

    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    foreign = [sys.executable, "-c", "raise SystemExit('a foreign kernel without gpulib')"]
    (spec / "kernel.json").write_text(json.dumps({"argv": foreign, "display_name": "Other", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("GPUOPS_END", "2026-12-01T06:45:00Z")
    from jupyter_client.kernelspec import KernelSpecManager

    assert KernelSpecManager().get_kernel_spec("python3").argv == foreign  # the trap is set
    info = find_notebook("xid_ecc_triage")
    res = engine.execute(info, {"node": "dgx-h100-1", "gpu": "5"}, tmp_path / "out", progress=False)
    assert res.failed is None, res.failed
    assert res.worst == "critical"
