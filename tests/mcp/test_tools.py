"""gpulib.mcp.tools in process: the catalogue with who sets each parameter, server-only parameters refused before a
run starts, run ids checked, an INCOMPLETE run said to be one, the collection planned with its diagnostic warning."""

from __future__ import annotations

import pytest

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import save_findings
from gpulib.mcp.tools import Tools
from gpulib.run.record import write_status


@pytest.fixture
def tools(tmp_path):
    return Tools(tmp_path / "runs")


def test_list_runbooks_says_who_sets_each_parameter(tools):
    books = {b["name"]: b for b in tools.list_runbooks()["runbooks"]}
    assert "xid_ecc_triage" in books and not [n for n in books if n.startswith("learn_")]
    who = {p["name"]: p["set_by"] for p in books["xid_ecc_triage"]["parameters"]}
    assert who["node"] == who["gpu"] == who["window"] == "caller"
    assert who["source"] == who["snapshot_dir"] == who["kernel_log_file"] == who["collect"] == "server"


@pytest.mark.parametrize("param", ["collect", "source", "kernel_log_file", "snapshot_dir"])
def test_a_server_only_parameter_is_refused_before_any_run(tools, param):
    with pytest.raises(InvalidParameter, match=f"parameter '{param}' is set by the server"):
        tools.run_runbook("xid_ecc_triage", {param: "true"})
    assert not tools.out.exists() or not any(tools.out.iterdir())


def test_a_lesson_is_not_run(tools):
    with pytest.raises(InvalidParameter, match="is a lesson"):
        tools.run_runbook("learn_monitoring")


@pytest.mark.parametrize("run_id", ["../etc", "20261201T064500Z-xid_ecc_triage-1a2b3c", "x/../../y"])
def test_read_run_takes_only_a_run_id_under_its_root(tools, run_id):
    tools.out.mkdir(parents=True)
    with pytest.raises(InvalidParameter, match="no run"):
        tools.read_run(run_id)


def test_an_incomplete_run_says_so(tools):
    d = tools.out / "20261201T064500Z-fleet_overview-1a2b3c"
    d.mkdir(parents=True)
    write_status(d, runbook="fleet_overview", status="incomplete", started=1.0, finished=2.0)
    save_findings([], d / "findings.json", runbook="fleet_overview", errors=["DCGM_FI_DEV_GPU_UTIL: no series"])
    ans = tools.read_run(d.name)
    assert ans["status"] == "incomplete" and ans["message"].startswith("INCOMPLETE:")
    assert "never an all-clear" in ans["message"] and "DCGM_FI_DEV_GPU_UTIL: no series" in ans["message"]
    assert ans["missing_data"] == ["DCGM_FI_DEV_GPU_UTIL: no series"] and ans["html"] is None


def test_plan_collection_is_a_dry_run_with_the_diag_warning(tools):
    plan = tools.plan_collection("gpu-node-7", 3)
    assert plan["dry_run"] is True and plan["apply_command"] == "gpuops collect gpu-node-7 --apply --diag 3"
    assert "loads every GPU of gpu-node-7" in plan["warning"]
    assert any(s["section"] == "diag" for s in plan["sections"])
    assert "warning" not in tools.plan_collection("gpu-node-7")
    with pytest.raises(InvalidParameter, match="diag level"):
        tools.plan_collection("gpu-node-7", 9)
    with pytest.raises(InvalidParameter):
        tools.plan_collection("Not A Node")


def test_xid_lookup_gives_both_buckets_sop(tools):
    x = tools.xid_lookup(79)
    assert [s["bucket"] for s in x["sop"]] == ["RESTART_BM", "CONTACT_SUPPORT"]  # NVIDIA's two buckets for XID 79
    assert x["sop"][0]["severity"] == "critical"
    assert tools.xid_lookup(9999)["known"] is False
