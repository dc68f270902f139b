"""Every run gets a folder of its own and its own verdict, also when runs start in the same second."""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import threading
import time
from pathlib import Path

from gpulib.catalogue import find_notebook
from gpulib.core.findings import Finding, Severity, save_findings
from gpulib.run import render as engine
from gpulib.run.record import new_run_dir


def _stub_execute(input_path, output_path, parameters=None, km=None, **kw):
    """Stands in for papermill: sleeps a little, then writes the notebook and this run's findings."""
    time.sleep(random.uniform(0, 0.05))
    node = parameters["node"]
    Path(output_path).write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    save_findings(
        [Finding(Severity.CRITICAL, f"XID 79 on {node}", node=node)],
        km.run_env["GPUOPS_FINDINGS_PATH"],
        runbook="xid_ecc_triage",
    )


def _stub_html(nb, html, title):
    Path(html).write_text("<html></html>")
    return Path(html)


def _run_one(out_root: str, node: str, barrier=None, patch: bool = True) -> tuple[str, str, str]:
    if patch:  # in a forked child: patch its own copy of the modules
        import papermill

        papermill.execute_notebook = _stub_execute
        engine.export_html = _stub_html
    if barrier is not None:
        barrier.wait()
    res = engine.execute(find_notebook("xid_ecc_triage"), {"node": node}, Path(out_root))
    return node, str(res.out_dir), res.findings[0].node


def test_new_run_dirs_in_one_second_are_distinct(tmp_path):
    barrier = threading.Barrier(16)
    dirs = []

    def go():
        barrier.wait()
        dirs.append(new_run_dir(tmp_path, "xid_ecc_triage"))

    ts = [threading.Thread(target=go) for _ in range(16)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(set(dirs)) == 16 and all(d.is_dir() for d in dirs)


def test_concurrent_runs_in_threads_keep_their_own_verdict(tmp_path, monkeypatch):
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", _stub_execute)
    monkeypatch.setattr(engine, "export_html", _stub_html)
    barrier = threading.Barrier(8)
    out = []
    nodes = [f"node-{i}" for i in range(8)]
    ts = [
        threading.Thread(target=lambda n=n: out.append(_run_one(str(tmp_path), n, barrier, patch=False))) for n in nodes
    ]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert sorted(o[0] for o in out) == nodes
    assert all(asked == got for asked, _, got in out)
    assert len({d for _, d, _ in out}) == 8
    index = (tmp_path / "index.html").read_text()
    assert index.count("<tr data-runbook=") == 8


def test_concurrent_runs_in_processes_keep_their_own_verdict(tmp_path):
    nodes = [f"node-{i}" for i in range(6)]
    with mp.get_context("fork").Pool(6) as pool:
        out = pool.starmap(_run_one, [(str(tmp_path), n) for n in nodes])
    assert all(asked == got for asked, _, got in out)
    assert len({d for _, d, _ in out}) == 6
    assert (tmp_path / "index.html").read_text().count("<tr data-runbook=") == 6
    assert not list(tmp_path.glob(".index.html.*"))


def test_two_real_runs_at_once_in_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_END", "2026-11-29T12:00:00Z")
    info = find_notebook("xid_ecc_triage")
    res = {}

    def go(node, gpu):
        res[node] = engine.execute(
            info, {"node": node, "gpu": gpu, "source": "demo"}, tmp_path, progress=False, timeout=300
        )

    ts = [threading.Thread(target=go, args=a) for a in (("dgx-h100-1", "5"), ("h200-infer-0", ""))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert res["dgx-h100-1"].out_dir != res["h200-infer-0"].out_dir
    assert any("XID 79" in f.title for f in res["dgx-h100-1"].findings)
    assert not any("XID 79" in f.title for f in res["h200-infer-0"].findings), [
        f.title for f in res["h200-infer-0"].findings
    ]
    for node, r in res.items():
        assert r.failed is None and r.findings, (r.failed, r.errors)
        assert (r.out_dir / "findings.json").exists()
        assert all(f.node in (None, "", node) for f in r.findings), [(f.node, f.title) for f in r.findings]
        assert all(f.node in (None, node) for f in r.findings), [f.as_text() for f in r.findings]
