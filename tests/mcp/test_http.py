"""``gpuops mcp --transport http``: the SDK's streamable HTTP client with the bearer token lists the tools and looks up
an XID; a request without the token is answered 401, one with a wrong token 403 (the rules of ``gpuops serve``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.helpers.pinned import ROOT
from tests.helpers.procs import die_with_parent
from tests.helpers.promharness import free_port

TOKEN = "mcp-test-token-" + "c" * 24
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    out = tmp_path_factory.mktemp("mcp-http")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUOPS_MCP_TOKEN": TOKEN}
    cmd = [sys.executable, "-m", "gpulib.cli", "mcp", "--transport", "http", "--port", str(port), "--out", str(out)]
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=die_with_parent
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            httpx2.post(url, json=INIT, headers=ACCEPT, timeout=2)
            break
        except httpx2.TransportError:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(10)


async def _client_calls(url: str, token: str):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                xid = await session.call_tool("xid_lookup", {"code": 48})
                return tools, xid


def test_the_sdk_client_with_the_token_lists_tools_and_looks_up_an_xid(server):
    tools, xid = anyio.run(_client_calls, server, TOKEN)
    assert "run_runbook" in tools and "xid_lookup" in tools
    assert xid.is_error is False
    assert xid.structured_content["code"] == 48 and xid.structured_content["category"] == "memory"


def test_without_the_token_401_and_with_a_wrong_one_403(server):
    none = httpx2.post(server, json=INIT, headers=ACCEPT, timeout=10)
    assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
    wrong = httpx2.post(server, json=INIT, headers={**ACCEPT, "Authorization": "Bearer " + "x" * 40}, timeout=10)
    assert wrong.status_code == 403
    right = httpx2.post(server, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert right.status_code == 200
    assert TOKEN not in none.text + wrong.text + right.text


def test_http_without_a_token_configured_is_a_usage_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GPUOPS_MCP_TOKEN"}
    p = subprocess.run(
        [sys.executable, "-m", "gpulib.cli", "mcp", "--transport", "http", "--out", str(tmp_path)],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "GPUOPS_MCP_TOKEN" in p.stderr
