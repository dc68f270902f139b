"""``gpuops mcp``: its options, the tools and the transport (:mod:`gpulib.cli` registers the command)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gpulib.core.errors import GpulibError
from gpulib.core.validate import one_of
from gpulib.run.report import fail


def mcp_cmd(
    transport: str = typer.Option("stdio", help="stdio (an MCP client starts gpuops) | http (streamable HTTP)"),
    host: str = typer.Option("127.0.0.1", help="listen address (http)"),
    port: int = typer.Option(8090, help="listen port (http); the endpoint is /mcp"),
    token_file: Optional[Path] = typer.Option(
        None, help="file holding the bearer token of the http transport (else $GPUOPS_MCP_TOKEN)"
    ),
    source: str = typer.Option("demo", "--source", "-s", help="demo | live | snapshot folder, for every run"),
    out: Path = typer.Option(Path("reports/out"), "--out", "-o", help="run folders are written and read here"),
    kernels: int = typer.Option(2, help="runs executing at once (more calls wait)"),
    run_timeout: int = typer.Option(600, help="seconds before a run's kernel is killed and the run marked failed"),
):
    """Serve the runbooks to AI assistants over the Model Context Protocol (read-only tools: list, run, read a run,
    look up an XID, plan a node collection); http needs `Authorization: Bearer <token>`."""
    try:
        from gpulib.mcp import server as mcp_server
        from gpulib.mcp.tools import Tools
    except ImportError as exc:
        raise SystemExit("gpuops mcp needs the mcp extra: pip install 'gpu-runbooks[mcp]' (or '[all]')") from exc
    from gpulib.serve.config import TOKEN_ENV as SERVE_TOKEN_ENV
    from gpulib.serve.config import read_token

    try:
        one_of(transport, ("stdio", "http"), param="--transport")
        token = read_token(token_file, env=mcp_server.TOKEN_ENV) if transport == "http" else ""
        hidden = (mcp_server.TOKEN_ENV, SERVE_TOKEN_ENV)
        tools = Tools(out, source, kernels=kernels, run_timeout=run_timeout, unset_env=hidden)
    except GpulibError as exc:
        fail(exc)
    if transport == "stdio":
        mcp_server.serve_stdio(tools)
    else:
        mcp_server.serve_http(tools, token, host, port)
