"""Node history from a real Prometheus (gpulib/sources/prom_history.py) backfilled with the demo history as
kube-state-metrics and dcgm-exporter series (gpulib/demo/history.py write_history_openmetrics): the planted cases give
the same verdicts as on the demo source, the exporter gap is no data, and both notebooks run on the live source."""

from __future__ import annotations

import json
import subprocess

import pytest

import gpulib
import gpulib.reliability.report_steps as R
import gpulib.reliability.steps as S
from gpulib.demo.history_series import write_history_openmetrics
from gpulib.demo.simulator import FleetSimulator
from tests.helpers.gpuops_cli import gpuops
from tests.helpers.pinned import DEMO_END, ROOT, need_prometheus
from tests.helpers.promharness import PrometheusServer, binaries


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from tests.helpers.k8s_double import start_k8s_double

    need_prometheus()
    work = tmp_path_factory.mktemp("prom-history")
    sim = FleetSimulator(end=DEMO_END)
    om = work / "history.om"
    write_history_openmetrics(sim, om, "60d", 600.0)
    tsdb = work / "tsdb"
    subprocess.run(
        [binaries()[1], "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=1440h", str(om), str(tsdb)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    server = PrometheusServer(tsdb, work)
    double = start_k8s_double(work, nodes=sim.nodes_json()["items"], pods=sim.pods_json()["items"])
    env = {
        "GPUOPS_PROMETHEUS_URL": server.url,
        "KUBECONFIG": str(double.kubeconfig),
        "GPUOPS_END": DEMO_END.isoformat(),
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
    }
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        yield gpulib.connect("live"), env
    double.stop()
    server.stop()


@pytest.fixture
def live_src(live, monkeypatch):
    src, env = live
    for k, v in env.items():  # the session's autouse fixture clears the Prometheus/Kubernetes settings per test
        monkeypatch.setenv(k, v)
    return src, env


# a100-40-mig-0 recovers on the demo source (its reboot and passing diag are remediation/diag records); Prometheus
# holds neither, so the live verdict cannot be "recovering" and the preflight says the records are not provided
@pytest.mark.parametrize(
    "node,expected",
    [
        ("h200-infer-0", "repeat_offender"),
        ("l4-spot-0", "degrading"),
        ("a100-40-mig-0", "healthy"),
        ("a100-80-1", "healthy"),
    ],
)
def test_live_history_gives_the_planted_verdicts(live_src, node, expected):
    src, _ = live_src
    inp = S.read_history(src, node, "7d")
    assert S.verdicts(inp).verdict == expected


def test_the_preflight_names_what_this_prometheus_has(live_src):
    src, _ = live_src
    inp = S.read_history(src, "a100-80-1", "30d")
    table = S.preflight(inp).set_index("signal")
    assert table.loc["cordon", "read from"] == "kube_node_spec_unschedulable"
    assert table.loc["xid", "state"] == "read"
    assert table.loc["ecc_dbe", "state"] == "not provided by this source"
    assert table.loc["diag", "state"] == "not provided by this source"
    gaps = inp.history.events[inp.history.events["signal"] == "no_data"]
    assert len(gaps) == 1 and gaps["node"].tolist() == ["a100-80-1"]


def test_live_report_finds_only_the_planted_regression(live_src):
    src, _ = live_src
    rep = R.build(R.load(src, "30d"), "30d")
    assert [(c.kind, c.scope, c.what) for c in rep.changes if c.regression] == [
        ("driver_change", "p5.48xlarge", "application")
    ]
    assert rep.offenders.iloc[0][["node", "gpu"]].tolist() == ["h200-infer-0", "6"]


@pytest.mark.notebook
@pytest.mark.parametrize(
    "runbook,params", [("node_health", ["-p", "node", "h200-infer-0"]), ("gpu_reliability_report", [])]
)
def test_both_notebooks_run_on_the_live_source(live_src, runbook, params, tmp_path, monkeypatch, capsys):
    _, env = live_src
    args = [
        "run",
        runbook,
        "--source",
        "live",
        "--out",
        str(tmp_path),
        "-q",
        *params,
    ]
    gpuops(monkeypatch, capsys, args, env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    doc = json.loads(next(tmp_path.rglob("findings.json")).read_text())
    assert doc["errors"] == []
    verdicts = {f.get("data", {}).get("verdict") for f in doc["findings"]}
    assert "repeat_offender" in verdicts
