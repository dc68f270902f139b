"""``gpuops mcp`` over stdio, driven by the MCP SDK's own client (``mcp.client.stdio``): the handshake, the tool list,
a real xid_ecc_triage run on the demo fleet that returns the critical XID 79 verdict, bad parameters answered with
the text ``gpuops run`` prints before it exits 2, and a planted secret that no answer shows.

One server process serves every call of this module (a module fixture), so the notebook runs once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.helpers.pinned import DEMO_END, ROOT

#: planted in the server's environment as the Prometheus token (gpulib.core.redact masks it) and passed in arguments
SECRET = "planted-prom-token-5f1c2a9e"
#: a credential in a URL: masked wherever it appears, configured or not
URL_SECRET = "urlpass-77d2c0b4"
TOOLS = {"list_runbooks", "run_runbook", "read_run", "xid_lookup", "plan_node_collection"}
#: bad parameters, each also given to `gpuops run xid_ecc_triage` to compare the texts
BAD = {
    "unknown name": {"nod": "dgx-h100-1"},
    "bad node name": {"node": "Bad_Node!"},
    "bad window": {"window": "six hours"},
}


def _answer(result) -> dict:
    """What a client reads of a tools/call result: the error flag, the text, the structured content."""
    text = "\n".join(c.text for c in result.content if getattr(c, "text", None))
    return {"error": bool(result.is_error), "text": text, "data": result.structured_content}


async def _session(out, calls):
    env = {
        "PYTHONPATH": str(ROOT),
        "GPUOPS_END": DEMO_END.isoformat(),
        "GPUOPS_PROMETHEUS_TOKEN": SECRET,
        "HOME": os.environ.get("HOME", "/root"),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gpulib.cli", "mcp", "--out", str(out)], env=env, cwd=str(ROOT)
    )
    seen = {}
    with open(out.parent / "server-stderr.txt", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=600) as session:
                seen["init"] = await session.initialize()
                seen["tools"] = (await session.list_tools()).tools
                for key, (tool, args) in calls.items():
                    seen[key] = _answer(await session.call_tool(tool, args))
    return seen


def _calls():
    calls = {
        "run": ("run_runbook", {"runbook": "xid_ecc_triage", "parameters": {"node": "dgx-h100-1", "gpu": "5"}}),
        "xid79": ("xid_lookup", {"code": 79}),
        "plan": ("plan_node_collection", {"node": "dgx-h100-1"}),
        "runs": ("read_run", {}),
        "server_only": ("run_runbook", {"runbook": "xid_ecc_triage", "parameters": {"source": "live"}}),
        # the secrets, given where an argument is echoed back
        "secret_xid": ("xid_lookup", {"code": SECRET}),
        "secret_node": ("run_runbook", {"runbook": "xid_ecc_triage", "parameters": {"node": SECRET}}),
        "secret_url": (
            "run_runbook",
            {"runbook": "xid_ecc_triage", "parameters": {"node": f"https://admin:{URL_SECRET}@prom.example"}},
        ),
        "secret_run_id": ("read_run", {"run_id": SECRET}),
        "secret_plan": ("plan_node_collection", {"node": SECRET, "diag_level": SECRET}),
        "secret_runbook": ("run_runbook", {"runbook": SECRET}),
        "secret_type": ("run_runbook", {"runbook": "xid_ecc_triage", "parameters": SECRET}),
    }
    calls.update({f"bad:{k}": ("run_runbook", {"runbook": "xid_ecc_triage", "parameters": v}) for k, v in BAD.items()})
    return calls


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    out = tmp_path_factory.mktemp("mcp") / "runs"
    seen = anyio.run(_session, out, _calls())
    seen["out"] = out
    return seen


def test_handshake_names_the_server_and_its_tools(session):
    init = session["init"]
    assert init.server_info.name == "gpuops"
    assert init.capabilities.tools is not None
    assert "never an all-clear" in (init.instructions or "")
    tools = {t.name: t for t in session["tools"]}
    assert set(tools) == TOOLS
    for t in tools.values():  # read-only, and each says what it returns
        assert t.annotations.read_only_hint is True and t.annotations.destructive_hint is False
        assert "Returns" in t.description
    run = tools["run_runbook"].input_schema
    assert run["required"] == ["runbook"] and "description" in run["properties"]["parameters"]


def test_a_real_xid_run_returns_the_critical_xid_79_verdict(session):
    ans = session["run"]
    assert ans["error"] is False, ans["text"]
    data = ans["data"]
    assert data["status"] == "done" and data["runbook"] == "xid_ecc_triage"
    v = data["verdict"]
    assert v["severity"] == "critical" and v["node"] == "dgx-h100-1" and v["gpu"] == "5"
    assert v["cause"] == "XID 79 on dgx-h100-1 GPU 5: hardware (RESTART_BM)"
    assert data["next_commands"][0] == "kubectl cordon dgx-h100-1"
    assert data["findings"][0]["title"] == v["cause"]
    assert data["missing_data"] == [] and "nothing was applied" in data["note"]
    html = session["out"] / data["run_id"] / "xid_ecc_triage.html"
    assert data["html"] == str(html) and html.is_file() and data["html_url"] == html.as_uri()
    assert data["parameters"]["node"] == "dgx-h100-1" and data["parameters"]["gpu"] == "5"
    assert data["started"] < data["finished"]


def test_read_run_lists_and_reads_back_the_run(session):
    runs = session["runs"]["data"]["runs"]
    assert [r["id"] for r in runs] == [session["run"]["data"]["run_id"]]
    assert runs[0]["severity"] == "critical" and runs[0]["cause"].startswith("XID 79 on dgx-h100-1")


def test_xid_lookup_and_collection_plan(session):
    x = session["xid79"]["data"]
    assert (x["mnemonic"], x["immediate_action"], x["fatal"]) == (
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        "RESTART_BM",
        True,
    )
    assert x["sop"][0]["bucket"] == "RESTART_BM" and "kubectl cordon {node}" in x["sop"][0]["commands"]
    plan = session["plan"]["data"]
    assert plan["dry_run"] is True and "nodeName: dgx-h100-1" in plan["pod_yaml"]
    assert plan["apply_command"] == "gpuops collect dgx-h100-1 --apply"


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_parameter_returns_the_cli_usage_message(session, case):
    cli = subprocess.run(
        [sys.executable, "-m", "gpulib.cli", "run", "xid_ecc_triage", "-q", "-o", "/nonexistent"]
        + [a for k, v in BAD[case].items() for a in ("-p", k, v)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert cli.returncode == 2
    usage = cli.stderr.strip()
    assert usage.startswith("error: ")
    ans = session[f"bad:{case}"]
    assert ans["error"] is True and usage in ans["text"]


def test_a_server_only_parameter_is_refused(session):
    ans = session["server_only"]
    assert ans["error"] is True and "error: parameter 'source' is set by the server" in ans["text"]


def test_no_answer_shows_the_planted_secret(session):
    texts = [json.dumps(session[k]) for k in _calls()]
    texts += [t.model_dump_json() for t in session["tools"]] + [session["init"].model_dump_json()]
    assert not [t for t in texts if SECRET in t or URL_SECRET in t]
    # the calls did answer, with the secret masked where it was echoed
    assert session["secret_node"]["error"] is True and "***" in session["secret_node"]["text"]
    assert "***" in session["secret_url"]["text"]
    # the negative control: the secret reached the server, which masks it (not a call that never happened)
    assert session["secret_xid"]["data"]["known"] is False and "'***'" in session["secret_xid"]["data"]["description"]
