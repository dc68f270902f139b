"""The fault matrix: runbooks x faults through the CLI's execute path (papermill, one kernel per cell).

Every cell must end in a rendered notebook and HTML, a finding naming the cause and what to check
(the "Runbook incomplete" finding carries each failed step's message and hint), exit code 3, a wall time
within its runbook's fastest cell plus 2 x the configured timeout, no traceback in the
HTML and no configured secret in any output file. Bad usage (unknown node, malformed window, a bad
setting) is checked through ``gpuops run`` and must exit 2 before any notebook runs.

The matrix of fields (every runbook x every input its decisions need, removed from the demo incident one at a time:
never OK, INCOMPLETE naming the input under each exporter generation's name) runs through the fast verdict, in
seconds: tests/run/test_evidence.py (xid_ecc_triage: tests/xid/test_evidence.py).

Cells run 4 at a time (each run has its own kernel environment: ``execute(env=...)``), each thread's runs in one
kept kernel (tests/helpers/shared_runs.py ``KeptKernels``: emptied, its environment reset, before each run, the
path of a warm kernel through ``execute(warm=...)``; started before the cell's clock, so a cell's time is its run's):
47 cold kernel starts with their imports were about half the matrix' CPU. Set
``GPUOPS_MATRIX_OUT=<file>`` to write the per-cell results as JSON (benchmarks/RESULTS.md lists them).
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpulib import cli
from gpulib import execute as engine
from gpulib.catalogue import find_notebook
from tests.helpers.faultserver import FaultServer
from tests.helpers.k8s_double import start_k8s_double
from tests.helpers.shared_runs import KeptKernels

TIMEOUT_S = 3  # GPUOPS_PROMETHEUS_TIMEOUT for every cell
#: extra seconds a cell may take over the fastest cell of its runbook beyond 2 x TIMEOUT_S: kernels of 4 cells
#: share the cores (CI runs on 2 cores shared with other jobs); the per-query bound itself (<= the timeout, Retry-After
#: capped, later steps fail fast) is asserted exactly in tests/sources/test_promhttp_faults.py
CONTENTION_S = float(os.environ.get("GPUOPS_MATRIX_SLACK", "30"))
SECRET = "matrix-s3cret-token-9f8e7d"

#: fault -> words one of which the incomplete finding's evidence must contain (the cause, named)
CAUSE = {
    "closed": ["cannot reach"],
    "hang": ["did not answer within"],
    "slow": ["did not answer within"],
    "500": ["HTTP 500"],
    "503": ["HTTP 503"],
    "retry_after": ["HTTP 503"],
    "empty": ["empty body"],
    "garbage": ["not JSON"],
    "html_login": ["HTML page"],
    "proxy_502": ["HTTP 502"],
    "no_data": ["no data.result"],
    "bad_result": ["data.result is a str"],
    "echo_auth": ["HTTP 401"],
    "k8s_401": ["401", "Unauthorized"],
    "k8s_403": ["403", "forbidden"],
    "k8s_500": ["500", "etcdserver"],
}
PROM_FAULTS = [
    "closed",
    "hang",
    "slow",
    "500",
    "503",
    "retry_after",
    "empty",
    "garbage",
    "html_login",
    "proxy_502",
    "no_data",
    "bad_result",
    "echo_auth",
]
K8S_FAULTS = ["k8s_401", "k8s_403", "k8s_500"]
PARAMS = {
    "fleet_overview": {"window": "1h"},
    "xid_ecc_triage": {"node": "dgx-h100-1", "gpu": "5", "window": "1h"},
    "nccl_check": {"node": "dgx-h100-0", "window": "1h"},
    "mig_sizing": {"node": "", "gpu_model": "A100-40GB", "window": "1h"},
    "operator_install": {},
    "vllm_deploy": {"window": "1h"},
    "gpu_utilization_report": {"window": "1d"},
}
ALL = list(PARAMS)
#: runbooks that read the Kubernetes API before Prometheus: their Prometheus cells get a healthy API double,
#: so the Prometheus fault is what they meet
KUBE_FIRST = ("mig_sizing", "operator_install", "gpu_utilization_report")
CELLS = [(rb, f) for rb in ("fleet_overview", "xid_ecc_triage") for f in PROM_FAULTS + K8S_FAULTS] + [
    (rb, f) for rb in ALL if rb not in ("fleet_overview", "xid_ecc_triage") for f in ("closed", "hang", "no_data")
]


_LOCAL = threading.local()


def _execute(info, params, out_root, env, warm=None):
    """``gpulib.execute.execute`` with a per-run kernel environment (in ``warm``'s kernel when given). For measuring
    the code before ``execute(env=...)`` existed (the "before" column of benchmarks/RESULTS.md), papermill is wrapped
    once so each thread's kernel manager gets that thread's environment, with the findings path next to the output
    notebook."""
    import inspect

    if "env" in inspect.signature(engine.execute).parameters:
        return engine.execute(info, params, out_root, progress=False, timeout=120, env=env, warm=warm)
    _wrap_papermill()
    _LOCAL.env = env
    return engine.execute(info, params, out_root, progress=False, timeout=120)


def _wrap_papermill():
    import papermill as pm
    from jupyter_client.manager import KernelManager

    if getattr(pm.execute_notebook, "_matrix", False):
        return
    real = pm.execute_notebook

    class KM(KernelManager):
        async def _async_pre_start_kernel(self, **kw):
            kw["env"] = {**os.environ, **self.run_env}
            return await super()._async_pre_start_kernel(**kw)

    def patched(inp, out, **kw):
        km = KM(kernel_name="python3")
        km.run_env = {**_LOCAL.env, "GPUOPS_FINDINGS_PATH": str(Path(out).parent / "findings.json")}
        return real(inp, out, km=km, **kw)

    patched._matrix = True
    pm.execute_notebook = patched


def _run_cell(root: Path, runbook: str, fault: str, kept: list) -> dict:
    servers = []
    if not hasattr(_LOCAL, "kernels"):  # this thread's kept kernel, one for every runbook it runs
        _LOCAL.kernels = KeptKernels(keep=1)
        kept.append(_LOCAL.kernels)
    env = {
        "GPUOPS_PROMETHEUS_TIMEOUT": str(TIMEOUT_S),
        "GPUOPS_PROMETHEUS_RETRIES": "2",
        "GPUOPS_PROMETHEUS_TOKEN": SECRET,
        "GPUOPS_END": "2026-11-29T12:00:00Z",
        "GPUOPS_AUDIT_LOG": str(root / f"audit-{runbook}-{fault}.jsonl"),
    }
    cell_dir = root / f"{runbook}-{fault}"
    cell_dir.mkdir()
    try:
        if fault.startswith("k8s_"):
            prom = FaultServer("slow", delay=0)  # answers, with no series
            double = start_k8s_double(cell_dir)
            double.fail("/api*", int(fault[4:]))
            servers += [prom, double]
            env.update(GPUOPS_PROMETHEUS_URL=prom.url, KUBECONFIG=str(double.kubeconfig))
        else:
            fs = FaultServer(fault, delay=TIMEOUT_S * 2, retry_after=20)
            servers.append(fs)
            env.update(GPUOPS_PROMETHEUS_URL=fs.url, KUBECONFIG=str(cell_dir / "no-kubeconfig"))
            if runbook in KUBE_FIRST:
                double = start_k8s_double(cell_dir)
                servers.append(double)
                env["KUBECONFIG"] = str(double.kubeconfig)
        info = find_notebook(runbook)
        warm = _LOCAL.kernels.lend("matrix")  # started, or emptied, before the clock
        t0 = time.monotonic()
        res = _execute(info, {"source": "live", **PARAMS[runbook]}, cell_dir / "out", env, warm)
        wall = time.monotonic() - t0
        if res.failed:  # a kernel that failed a run is not lent again
            _LOCAL.kernels.drop("matrix")
    finally:
        for s in servers:
            (s.close if hasattr(s, "close") else s.stop)()
    files = [p for p in res.out_dir.rglob("*") if p.is_file()]
    html = res.html.read_text() if res.html else ""
    top = next((f for f in res.findings if f.title.startswith("Runbook incomplete")), None)
    evidence = " ".join(top.evidence) if top else ""
    return {
        "runbook": runbook,
        "fault": fault,
        "exit": cli._exit_code([res], "critical"),
        "wall_s": round(wall, 1),
        "notebook": res.notebook.exists(),
        "html": bool(html),
        "failed": res.failed,
        "top": top.title if top else None,
        "cause_named": any(w.lower() in evidence.lower() for w in CAUSE[fault]),
        "hint": "hint:" in evidence,
        "traceback": "Traceback" in html,
        "secret_leak": [p.name for p in files if SECRET in p.read_text(errors="replace")],
        "evidence": evidence[:400],
    }


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    t0 = time.monotonic()
    kept: list[KeptKernels] = []
    try:
        with ThreadPoolExecutor(4) as pool:
            futs = {c: pool.submit(_run_cell, root, *c, kept) for c in CELLS}
            out = {c: f.result() for c, f in futs.items()}
    finally:
        for k in kept:
            k.close()
    # baseline per runbook: the fastest cell (a run whose failure costs nothing)
    base = {rb: min(r["wall_s"] for (r_rb, _), r in out.items() if r_rb == rb) for rb in PARAMS}
    for (rb, _), r in out.items():
        r["within_time"] = r["wall_s"] - base[rb] <= 2 * TIMEOUT_S + CONTENTION_S
        r["baseline_s"] = base[rb]
    total = time.monotonic() - t0
    if os.environ.get("GPUOPS_MATRIX_OUT"):
        Path(os.environ["GPUOPS_MATRIX_OUT"]).write_text(
            json.dumps({"total_s": round(total, 1), "cells": list(out.values())}, indent=1)
        )
    return out


@pytest.mark.parametrize("cell", CELLS, ids=[f"{a}-{b}" for a, b in CELLS])
def test_cell_ends_in_a_clear_finding(matrix, cell):
    r = matrix[cell]
    assert r["notebook"] and r["html"], r
    assert r["exit"] == cli.EXIT_FAILED, r
    assert r["top"] and r["top"].startswith("Runbook incomplete") and r["cause_named"] and r["hint"], r
    assert not r["traceback"] and not r["secret_leak"], r
    assert r["within_time"], r


def _main(args, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "args,env",
    [
        (["run", "xid_ecc_triage", "--source", "live", "-p", "node", "dgx h100;1"], {}),
        (["run", "xid_ecc_triage", "--source", "live", "-p", "gpu", 'x"} or vector(42)'], {}),
        (["run", "fleet_overview", "--source", "live", "-p", "window", "3000000y"], {}),
        (["run", "fleet_overview", "--source", "live", "-p", "window", "6hours"], {}),
        (["run", "fleet_overview", "--source", "live"], {"GPUOPS_PROMETHEUS_RETRIES": "abc"}),
        (["run", "fleet_overview", "--source", "live"], {"GPUOPS_PROMETHEUS_TIMEOUT": "abc"}),
        (["run", "fleet_overview", "--source", "live"], {"GPUOPS_PROMETHEUS_URL": "ftp://u:hunter22@h/"}),
        (
            ["run", "fleet_overview", "--source", "live"],
            {
                "GPUOPS_PROMETHEUS_TOKEN": "tok-hunter22",
                "GPUOPS_PROMETHEUS_USER": "u",
                "GPUOPS_PROMETHEUS_PASSWORD": "hunter22",
            },
        ),
    ],
)
def test_bad_usage_exits_2_before_running(args, env, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", "http://127.0.0.1:1")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, err = _main(args + ["-o", str(tmp_path)], capsys)
    assert code == cli.EXIT_USAGE and err.startswith("error:") and "Traceback" not in err and "hunter22" not in err
    assert not any(tmp_path.iterdir())
