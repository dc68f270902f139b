"""fleet_overview on the demo fleet: one finding per root cause per GPU/pod, the evidence keeps every signal,
zombies ordered by the memory they hold, and the CLI names every critical and warning finding."""

from __future__ import annotations

import pytest

import gpulib
from tests.helpers.pinned import DEMO_END, ROOT


@pytest.fixture(scope="module")
def overview():
    import os

    from tests.project.test_printed_commands import run_inprocess

    old = os.environ.get("GPUOPS_END")
    os.environ["GPUOPS_END"] = DEMO_END.isoformat()
    try:
        return list(run_inprocess("runbooks/fleet_overview", {})["findings"])
    finally:
        os.environ.pop("GPUOPS_END") if old is None else os.environ.__setitem__("GPUOPS_END", old)


def _about(findings, node, gpu):
    return [f for f in findings if f.node == node and str(f.gpu) == str(gpu)]


def test_xid79_and_telemetry_stopped_are_one_finding(overview):
    fs = _about(overview, "dgx-h100-1", 5)
    assert len(fs) == 1, [f.title for f in fs]
    assert "XID 79" in fs[0].title and any("Telemetry stopped" in e for e in fs[0].evidence)


def test_row_remap_failure_and_xid64_are_one_finding(overview):
    fs = _about(overview, "a100-80-0", 1)
    assert len(fs) == 1, [f.title for f in fs]
    assert "Row-remap failure" in fs[0].title and any("XID 64" in e for e in fs[0].evidence)


def test_legacy_pod_reported_once(overview):
    fs = [f for f in overview if "legacy-transcoder-0" in f.title + " ".join(f.evidence)]
    assert len(fs) == 1, [f.title for f in fs]
    assert "never requested" in fs[0].title
    # one idle/zombie rule (gpulib.cost.usage.classify_idle): a pod that requested no GPU holds no allocated time,
    # so it is not also a zombie; its one finding carries the request evidence
    assert any("without a GPU request" in e for e in fs[0].evidence), fs[0].evidence


def test_zombies_ordered_by_memory_held(overview):
    zombies = [f for f in overview if f.title.startswith("Zombie")]
    assert zombies[0].title.endswith("notebooks/jupyter-alice-0"), [f.title for f in zombies]
    held = [float(f.evidence[1].split()[3]) for f in zombies]
    assert held == sorted(held, reverse=True)


def test_other_problems_are_kept(overview):
    titles = " | ".join(f.title for f in overview)
    for want in ("GPU running hot on h200-infer-0 GPU 2", "NVLink traffic far below peers on dgx-h100-0 GPU 3"):
        assert want in titles


def test_cli_names_every_critical_and_warning(tmp_path, capsys):
    from gpulib.cli import _print_result
    from gpulib.core.findings import Finding, Severity
    from gpulib.execute import RunResult

    fs = (
        [Finding(Severity.CRITICAL, f"crit {i}") for i in range(4)]
        + [Finding(Severity.WARNING, f"warn {i}") for i in range(6)]
        + [Finding(Severity.INFO, f"info {i}") for i in range(3)]
    )
    res = RunResult(
        name="fleet_overview", notebook=tmp_path / "x.ipynb", html=tmp_path / "x.html", out_dir=tmp_path, findings=fs
    )
    _print_result(res)
    out = capsys.readouterr().out
    for f in fs[:10]:
        assert f.title in out
    assert "info 2" not in out and "3 informational finding(s) more" in out


@pytest.mark.parametrize("window", ["1h", "6h"])
def test_a_lightly_used_serving_replica_is_not_told_to_scale_to_zero(window):
    """A replica that served work in the window (activity peaks at or above the idle threshold), or whose sibling
    replicas are busy, is below the idle mean only because load is low (the demo's infer_small persona is diurnal,
    gpulib/demo/metrics.py): scaling its owner to zero takes the service down. It gets the right-size SOP
    (cost_sop.csv rightsize: a read-only look, then the report, which weighs serving metrics), never
    '--replicas=0'. A pod reserved and unused (persona idle in demo_fleet.yaml) keeps the scale-to-zero SOP."""
    import yaml

    from gpulib.core.knowledge import load_table
    from gpulib.fleet.findings import idle_findings
    from gpulib.fleet.steps import idle_inputs

    scen = yaml.safe_load((ROOT / "gpulib" / "data" / "demo" / "demo_fleet.yaml").read_text())
    persona = {f"{w['namespace']}/{w['pod']}": w["persona"] for n in scen["nodes"] for w in n.get("workloads", [])}
    sop = {r["key"]: r["sop_step"] for r in load_table("cost/cost_sop.csv").to_dict("records")}
    fs = idle_findings(idle_inputs(gpulib.connect("demo", end="2026-12-01T06:45:00Z"), window))
    serving = [f for f in fs if persona.get(f.data["pod"]) in ("infer", "infer_small")]
    assert serving, "the window should show a low-load serving replica (the test's premise)"
    for f in serving:
        assert not any("--replicas=0" in c for c in f.commands), (f.title, f.commands)
        assert f.sop_step == sop["rightsize"] and f.data["sop_kind"] == "rightsize", f.title
    for f in fs:
        if persona.get(f.data["pod"]) == "idle":
            assert f.data["sop_kind"] == "idle_allocated" and any("--replicas=0" in c for c in f.commands), f.title
