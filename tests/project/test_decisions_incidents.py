"""The incident decision table (tests/decisions/incidents.csv): every demo incident and healthy control that
fleet_overview, nccl_check, operator_install and vllm_deploy decide, through the domain code on the demo source,
through papermill (one notebook run per runbook and parameters, shared by its rows) and through a real
Prometheus. Expected values come from the scenario (demo_fleet.yaml, gpulib/demo/operator_objects.py SCENARIOS,
gpulib/demo/vllm_series.py) and the documents cited in the table's ``scenario`` column, written there by hand.

A row is checked only against the findings about its target (node, GPU, pod, workload, category): a finding
about another GPU, pod or deployment can neither satisfy a row nor be excused by it (:func:`check_row`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

import gpulib
from gpulib.core.errors import GpulibError, InvalidParameter
from gpulib.core.findings import Finding, Severity
from tests.helpers.pinned import DEMO_END, ROOT

TABLE = pd.read_csv(Path(__file__).parents[1] / "decisions" / "incidents.csv", dtype=str).fillna("")
ROWS = TABLE.to_dict("records")
SCENARIO = yaml.safe_load((ROOT / "gpulib" / "data" / "demo" / "demo_fleet.yaml").read_text())
#: "namespace/pod" -> {(node, gpu index)} of the demo fleet's workloads
POD_GPUS = {
    f"{w['namespace']}/{w['pod']}": {(n["name"], str(g)) for g in w["gpus"]}
    for n in SCENARIO["nodes"]
    for w in n.get("workloads", [])
}


def _split(cell: str) -> list[str]:
    return [c.strip() for c in cell.split(";;") if c.strip()]


def params_of(row: dict) -> dict:
    """``key=value ;; key=value`` -> notebook parameters (values typed as YAML: 64 -> int, 10.0 -> float)."""
    out = {}
    for kv in _split(row["params"]):
        k, _, v = kv.partition("=")
        out[k.strip()] = yaml.safe_load(v.strip())
    return out


def key_of(f: Finding) -> str:
    """The decision key of a finding: its category, plus the code's decision name where it has one
    (``data.check`` of the operator checks, ``data.verdict`` of the vLLM live check, ``data.state`` idle/zombie)."""
    d = f.data or {}
    k = d.get("check") or d.get("verdict") or d.get("state")
    return f"{f.category}:{k}" if k else f.category


def _pods(f: Finding) -> list[str]:
    d = f.data or {}
    return [p for p in [d.get("pod"), *(d.get("pods") or [])] if p]


def about(f: Finding, row: dict) -> bool:
    """Whether ``f`` is about the row's target: every non-empty target column must match. A GPU target also
    owns the findings about pods on it (demo_fleet.yaml) and node-level findings of its node without a pod."""
    if row["category"] and f.category != row["category"]:
        return False
    if row["node"] == "cluster":
        if f.node:
            return False
    elif row["node"] and f.node != row["node"]:
        return False
    if row["pod"] and row["pod"] not in _pods(f):
        return False
    if row["workload"] and (f.data or {}).get("workload") != row["workload"]:
        return False
    if row["gpu"]:
        if f.gpu not in (None, ""):
            return str(f.gpu) == row["gpu"]
        pods = _pods(f)
        if pods:
            return any((row["node"], row["gpu"]) in POD_GPUS.get(p, set()) for p in pods)
    return True


def _show(fs) -> list[str]:
    return [f"{f.severity.value} {key_of(f)} node={f.node} gpu={f.gpu} pods={_pods(f)}: {f.title}" for f in fs]


def check_row(row: dict, findings: list[Finding], expected: str | None = None, root: str | None = None) -> None:
    """The row's decision, from the findings about its target only (AssertionError otherwise)."""
    expected = expected or row["expected"]
    root = row["root_cause"] if root is None else root
    mine = [f for f in findings if about(f, row)]
    if expected == "none":
        bad = [f for f in mine if f.severity is not Severity.OK]
        assert not bad, (row["id"], "a healthy control is named by a finding", _show(bad))
        return
    elsewhere = [f for f in findings if not about(f, row) and key_of(f) == root]
    assert mine, (row["id"], "no finding about the target", "same root cause reported elsewhere:", _show(elsewhere))
    top = sorted(mine, key=lambda f: f.severity.rank)[0]  # stable: the runbook's own order breaks ties
    assert top.severity is Severity(expected), (
        row["id"],
        top.severity.value,
        _show(mine),
        "elsewhere:",
        _show(elsewhere),
    )
    assert key_of(top) == root, (row["id"], key_of(top), _show(mine), "elsewhere:", _show(elsewhere))
    nxt = None if top.runbook == row["runbook"] else top.runbook  # finish() drops a self-reference
    if row["next_runbook"]:
        assert nxt == row["next_runbook"], (row["id"], nxt)
    for c in _split(row["must_commands"]):
        assert any(c in x for x in top.commands), (row["id"], c, top.commands)
    for c in _split(row["must_not_commands"]):
        assert not any(c in x for x in top.commands), (row["id"], c, top.commands)
    text = " ".join([top.title, top.summary, *top.evidence])
    for t in _split(row["must_text"]):
        assert t in text, (row["id"], t, text)


# ----------------------------------------------------------------------------------------- the domain code
def _fleet(src, p):
    """The fleet_overview steps' inputs gathered as the notebook gathers them, then the one findings call."""
    import gpulib.fleet as fleet
    import gpulib.fleet.steps as fleet_steps

    w = p.get("window", "6h")
    inp = fleet_steps.FleetInputs(w)
    inp.caps = src.preflight(w)
    inp.pods = src.pods()
    inp.scheduling = fleet_steps.scheduling_inputs(src, inp.pods)
    act = fleet.activity(src, w, inp.caps.activity_metric)
    inp.activity = fleet_steps.activity_inputs(src, act, inp.caps.activity_metric)
    inp.health = fleet.health_frames(src, w)
    inp.idle = fleet_steps.idle_inputs(src, w)
    return fleet_steps.findings(inp)


def _nccl(src, p):
    import gpulib.nccl.steps as ns

    if p.get("nccl_log_file"):  # a failed job's logs: the log step and the findings the notebook gives for them
        return ns.job_log_findings(src, p["nccl_log_file"])
    w = p.get("window", "6h")
    ns.nvlink_series(src, p["node"], w)  # the notebook's chart: raises UnknownNode for a node the source lacks
    return ns.findings(ns.NcclInputs(nvlink=ns.nvlink_frames(src, p["node"], w)))


def _operator(src, p):
    import gpulib.gpu_operator as operator

    ns = p.get("namespace", "gpu-operator")
    nodes = src.nodes()
    plan = operator.install_plan(
        "driver,toolkit,device_plugin,gfd,dcgm_exporter,mig_manager,nfd",
        driver_preinstalled=False,
        mig_strategy="none",
        sharing="none",
        replicas=4,
        nodes=nodes,
        namespace=ns,
    )
    state = operator.operator_state(src, ns)
    fs = list(
        operator.preflight(
            nodes,
            namespace_labels=state.get("namespace_labels"),
            runtimes=state.get("runtimes"),
            plan=plan,
            namespace=ns,
        )
    )
    last, up = operator.dcgm_presence(src)
    return fs + list(operator.verify(state, nodes, dcgm_last=last, dcgm_up=up, namespace=ns))


def _vllm(src, p):
    import gpulib.vllm as inference

    ns, dep, w = p.get("namespace", "inference"), p["deployment"], p.get("window", "1h")
    m = inference.vllm_metrics(src, ns, dep, w)
    return inference.assess(
        m,
        max_num_seqs=p.get("deployed_max_num_seqs", 64),
        latency_p99_s=p.get("latency_p99_s", 10.0),
        dcgm=inference.dcgm_for_pods(src, ns, dep, w),
        workload=dep,
        namespace=ns,
    )


RUNNERS = {"fleet_overview": _fleet, "nccl_check": _nccl, "operator_install": _operator, "vllm_deploy": _vllm}
_RESULTS: dict[tuple, tuple] = {}  # (source, runbook, params) -> ("findings", list) | ("error", exc): one run each


def run_domain(source: str, row: dict):
    key = (source, row["runbook"], row["params"])
    if key not in _RESULTS:
        p = params_of(row)
        try:
            if source == "demo":
                kw = {"operator_scenario": p["demo_operator_state"]} if "demo_operator_state" in p else {}
                src = gpulib.connect("demo", end=DEMO_END, **kw)
            else:
                src = gpulib.connect("live")
            _RESULTS[key] = ("findings", list(RUNNERS[row["runbook"]](src, p)))
        except GpulibError as exc:
            _RESULTS[key] = ("error", exc)
    return _RESULTS[key]


def check_domain(row: dict, source: str, expected: str, root: str) -> None:
    kind, out = run_domain(source, row)
    if expected in ("usage", "incomplete"):  # a bad parameter (exit 2) / data the verdict needs is missing (exit 3)
        assert kind == "error", (row["id"], f"no {expected} error", _show(out) if kind == "findings" else out)
        assert type(out).__name__ == root, (row["id"], type(out).__name__, out)
        assert isinstance(out, InvalidParameter) == (expected == "usage"), (row["id"], type(out).__mro__)
        return
    assert kind == "findings", (row["id"], out)
    check_row(row, out, expected, root)


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_decision_on_demo_source(row):
    check_domain(row, "demo", row["expected"], row["root_cause"])


# ------------------------------------------------------------------------------------------- papermill
PAPERMILL = [r for r in ROWS if r["papermill"] == "yes"]


@pytest.mark.notebook
@pytest.mark.parametrize("row", PAPERMILL, ids=[r["id"] for r in PAPERMILL])
def test_decision_through_the_notebook(row, shared_runs):
    # one notebook run per (runbook, parameters) in the session, shared with the other tests of that run
    doc, _ = shared_runs.notebook(row["runbook"], source="demo", **params_of(row))
    fs = [Finding.from_dict(d) for d in doc["findings"]]
    if row["expected"] == "incomplete":
        assert doc.get("errors") and not doc.get("usage_errors"), (row["id"], doc.get("usage_errors"))
        assert fs[0].category == "data" and not [f for f in fs if about(f, row) and f.severity is Severity.OK]
        return
    if row["expected"] == "usage":
        assert doc.get("usage_errors"), (row["id"], doc.get("errors"))
        assert fs[0].category == "usage" and fs[0].severity is Severity.CRITICAL
        assert not [f for f in fs if f.category == row["category"] and f.severity is Severity.OK]
        return
    assert not doc.get("usage_errors") and not doc.get("errors"), (
        row["id"],
        doc.get("usage_errors"),
        doc.get("errors"),
    )
    check_row(row, fs)


def test_papermill_runs_stay_few():
    """CI has 2 cores: the table may add at most 6 notebook runs (one per runbook and parameters)."""
    assert len({(r["runbook"], r["params"]) for r in PAPERMILL}) <= 6


# ------------------------------------------------------------------------------------- real Prometheus
PROM = [r for r in ROWS if r["prometheus"] == "yes"]


@pytest.mark.prometheus
@pytest.mark.parametrize("row", PROM, ids=[r["id"] for r in PROM])
def test_decision_through_real_prometheus(row, live_env):
    check_domain(row, "live", row["prom_expected"] or row["expected"], row["prom_root_cause"] or row["root_cause"])


# ----------------------------------------------------------------------------------------- the table itself
def test_table_covers_every_demo_incident_and_gpu_reference_kind():
    from gpulib.demo.operator_objects import SCENARIOS

    by = {rb: [r for r in ROWS if r["runbook"] == rb] for rb in RUNNERS}
    assert set(TABLE["runbook"]) == set(RUNNERS)
    # every incident GPU has a fleet_overview row; the NVLink one an nccl_check row with its verdict
    for n in SCENARIO["nodes"]:
        for inc in n.get("incidents", []):
            target = (n["name"], str(inc["gpu"]))
            assert [r for r in by["fleet_overview"] if (r["node"], r["gpu"]) == target], (inc, target)
            if inc["type"] == "nvlink_degraded":
                assert [r for r in by["nccl_check"] if (r["node"], r["gpu"]) == target and r["expected"] == "warning"]
    # every zombie / idle / no-GPU-limit pod has a row expecting a finding about that pod
    for n in SCENARIO["nodes"]:
        for w in n.get("workloads", []):
            if w.get("persona") in ("zombie", "idle") or w.get("no_gpu_limit"):
                pod = f"{w['namespace']}/{w['pod']}"
                assert [r for r in by["fleet_overview"] if r["pod"] == pod and r["expected"] in ("warning", "info")], (
                    pod
                )
    # every operator scenario has a row; the healthy one gives OK; a wrong scenario name is a usage error
    states = {params_of(r).get("demo_operator_state") for r in by["operator_install"]}
    assert set(SCENARIOS) <= states, set(SCENARIOS) - states
    assert any(
        params_of(r)["demo_operator_state"] == "healthy" and r["expected"] == "ok" for r in by["operator_install"]
    )
    # every vLLM deployment of the fleet has a row; the overloaded one is critical, a well-loaded one is not
    vllm = {
        f"{w['namespace']}/{w['owner']}"
        for n in SCENARIO["nodes"]
        for w in n.get("workloads", [])
        if w["owner"].startswith("vllm-")
    }
    assert vllm <= {r["workload"] for r in by["vllm_deploy"]}
    assert {r["expected"] for r in by["vllm_deploy"] if r["workload"]} >= {"critical", "info"}
    # each runbook has a healthy control (a target no finding may name, or an OK verdict) ...
    for rb, rows in by.items():
        assert any(r["expected"] in ("none", "ok") for r in rows), rb
    # ... and a parameter matching nothing where the runbook takes one
    for rb in ("nccl_check", "operator_install", "vllm_deploy"):
        assert any(r["expected"] == "usage" for r in by[rb]), rb
    # target kinds: a GPU, a pod, a MIG pod, a node, the cluster, a workload
    kinds = {
        "gpu"
        if r["gpu"]
        else "pod"
        if r["pod"]
        else "workload"
        if r["workload"]
        else "cluster"
        if r["node"] == "cluster"
        else "node"
        if r["node"]
        else "none"
        for r in ROWS
    }
    assert kinds >= {"gpu", "pod", "workload", "cluster", "node"}, kinds
    assert any(r["pod"] == "notebooks/dev-bob-0" for r in ROWS)  # the MIG-instance pod
    for r in ROWS:  # every row says why, and only known severities
        assert r["scenario"] and r["expected"] in (
            "critical",
            "warning",
            "info",
            "ok",
            "none",
            "usage",
            "incomplete",
        ), r["id"]
        assert (r["expected"] == "none") == (r["root_cause"] == ""), r["id"]


# ------------------------------------------------------------------------------------ a row can fail
ROW = {r["id"]: r for r in ROWS}


def _xid(gpu: str) -> Finding:
    return Finding(
        Severity.CRITICAL,
        f"XID 79 on dgx-h100-1 GPU {gpu}",
        node="dgx-h100-1",
        gpu=gpu,
        category="xid",
        runbook="xid_ecc_triage",
        evidence=["also: Telemetry stopped"],
        commands=[
            f"gpuops run xid_ecc_triage -p node dgx-h100-1 -p gpu {gpu}",
            "kubectl debug node/dgx-h100-1 -- dmesg | grep 'NVRM: Xid'",
        ],
    )


def test_an_incident_reported_for_the_neighbouring_gpu_fails_the_row():
    check_row(
        ROW["fleet_xid79"],
        [
            Finding(
                Severity.CRITICAL,
                "x",
                node="dgx-h100-1",
                gpu="5",
                category="xid",
                runbook="xid_ecc_triage",
                evidence=["also: Telemetry stopped"],
                commands=["gpuops run xid_ecc_triage -p node dgx-h100-1 -p gpu 5 NVRM: Xid"],
            )
        ],
    )
    with pytest.raises(AssertionError, match="reported elsewhere"):
        check_row(ROW["fleet_xid79"], [_xid("4")])  # GPU 4 instead of 5
    with pytest.raises(AssertionError):
        check_row(ROW["fleet_healthy_xid79_pod_peer"], [_xid("4")])  # and GPU 4's control row catches it


def test_a_finding_about_another_pod_or_deployment_fails_the_row():
    other = Finding(
        Severity.INFO,
        "Idle GPU workload ads/ab-test-scorer-84c6d7f5b9-m2xw8",
        node="a100-80-0",
        category="cost",
        runbook="gpu_utilization_report",
        commands=["kubectl -n ads scale deployment/ab-test-scorer --replicas=0"],
        data={"pod": "ads/ab-test-scorer-84c6d7f5b9-m2xw8", "state": "idle"},
    )
    with pytest.raises(
        AssertionError, match="reported elsewhere.*Idle GPU workload ads/ab-test-scorer-84c6d7f5b9-m2xw8"
    ):
        check_row(ROW["fleet_idle_abtest_zt5nk"], [other])
    with pytest.raises(AssertionError):  # the idle pod's GPU (a100-80-0 GPU 7) is not GPU 5's control
        check_row({**ROW["fleet_healthy_free_a100"], "gpu": "7"}, [other])
    check_row(ROW["fleet_healthy_free_a100"], [other])
    qwen = Finding(
        Severity.CRITICAL,
        "vllm-qwen7b: scale up",
        category="vllm",
        data={"verdict": "scale_up", "workload": "inference/vllm-qwen7b"},
        commands=["kubectl -n inference scale deployment vllm-qwen7b"],
    )
    with pytest.raises(AssertionError, match="reported elsewhere"):
        check_row(ROW["vllm_overloaded"], [qwen])


def test_a_node_level_finding_fails_the_healthy_controls_of_that_node_only():
    node_wide = Finding(
        Severity.WARNING,
        "a100-80-0: no DCGM series",
        node="a100-80-0",
        category="gpu-operator",
        data={"check": "dcgm_missing"},
    )
    with pytest.raises(AssertionError, match="healthy control"):
        check_row(ROW["op_healthy_node"], [node_wide])
    check_row(ROW["op_driver_crashloop_other_node"] | {"node": "dgx-h100-1"}, [node_wide])
