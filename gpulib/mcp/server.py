"""``gpuops mcp``: the tools of :mod:`gpulib.mcp.tools` served over the Model Context Protocol with the official
Python SDK (``mcp``, https://github.com/modelcontextprotocol/python-sdk: ``MCPServer``), on stdio or streamable
HTTP (https://modelcontextprotocol.io/specification/2025-06-18/basic/transports).

Every tool is read-only (``readOnlyHint``): runs are the runbooks' dry runs, the collection is only planned. A
usage error answers ``isError`` with the text ``gpuops`` prints before it exits 2; every answer, errors included,
passes :func:`gpulib.core.redact.redact_obj` in one middleware, so no secret reaches a client. Over HTTP every
request needs ``Authorization: Bearer <token>`` (the token rules of ``gpuops serve``:
:func:`gpulib.serve.config.read_token`): 401 without one, 403 with a wrong one.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from gpulib.core.errors import GpulibError, InvalidParameter, usage_text
from gpulib.core.redact import redact, redact_obj
from gpulib.mcp.tools import Tools
from gpulib.serve.config import bearer_refusal

#: environment variable holding the HTTP transport's bearer token (or --token-file)
TOKEN_ENV = "GPUOPS_MCP_TOKEN"
INSTRUCTIONS = (
    "GPU runbooks for NVIDIA GPUs on Kubernetes with deterministic verdicts. Start with list_runbooks, run one with "
    "run_runbook (fleet_overview for the whole fleet, xid_ecc_triage for one GPU's XID/ECC errors), explain an XID "
    "with xid_lookup, read an earlier run with read_run. Nothing is ever applied: present next_commands to the "
    "engineer. A run whose status is 'incomplete' lacked data and is never an all-clear."
)
_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_RUNS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def _answer(call, *args: Any) -> dict[str, Any]:
    """``call(*args)``, with a usage error answered by ``gpuops``'s exit-2 text and any other failure by its message
    (redacted): the SDK turns a :class:`ToolError` into an ``isError`` result with this text."""
    try:
        return call(*args)
    except InvalidParameter as exc:
        raise ToolError(usage_text(exc)) from None
    except GpulibError as exc:
        raise ToolError(redact(f"error: {exc}")) from None
    except Exception as exc:  # a crash must still not echo a secret
        raise ToolError(redact(f"error: {type(exc).__name__}: {exc}")) from None


async def _redact_answers(ctx, call_next):
    """Server middleware: every result the server sends (tool answers, SDK error texts that quote an argument)
    with secrets masked, serialised as the SDK's runner serialises it."""
    result = await call_next(ctx)
    if hasattr(result, "model_dump"):
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return redact_obj(result) if isinstance(result, dict) else result


def build(tools: Tools) -> MCPServer:
    """The MCP server of ``tools``: five read-only tools whose descriptions say what they return and accept."""

    try:
        ver = version("gpu-runbooks")
    except PackageNotFoundError:
        ver = "0"
    srv = MCPServer("gpuops", instructions=INSTRUCTIONS, version=ver, middleware=[_redact_answers], log_level="WARNING")

    @srv.tool(
        name="list_runbooks",
        annotations=_READ_ONLY,
        description=(
            "List the GPU runbooks and reports this server runs. Returns each with its parameters: name, default, type,"
            " help and set_by ('caller' = you may pass it to run_runbook; 'server' = fixed by the server: data source, "
            "files, state changes). Also returns the data source the server runs them on. Takes no arguments."
        ),
    )
    def list_runbooks() -> dict[str, Any]:
        return _answer(tools.list_runbooks)

    @srv.tool(
        name="run_runbook",
        annotations=_RUNS,
        description=(
            "Run one runbook or report (names from list_runbooks) on the server's data source. Returns its verdict: "
            "status (done | incomplete | failed), message, verdict {severity, cause, node, gpu, sop_step}, "
            "next_commands (dry run: nothing is applied), every finding (severity, title, evidence, commands, "
            "escalation), missing_data, the parameters it ran with, and html/html_url (the report) and run_id (for "
            "read_run). A run takes 30-120 s. 'incomplete' means a step had no data: never an all-clear. A bad "
            "parameter returns an error with the gpuops usage message."
        ),
    )
    def run_runbook(
        runbook: Annotated[
            str, Field(description="runbook or report name, e.g. xid_ecc_triage, fleet_overview, nccl_check")
        ],
        parameters: Annotated[
            dict[str, Any] | None,
            Field(
                description="parameters by name, as list_runbooks gives them (only set_by='caller'), e.g. "
                '{"node": "dgx-h100-1", "gpu": "5", "window": "6h"}; values are checked as gpuops run -p checks '
                "them (node names, GPU index or UUID, Prometheus durations); omitted ones take their default"
            ),
        ] = None,
    ) -> dict[str, Any]:
        return _answer(tools.run_runbook, runbook, parameters)

    @srv.tool(
        name="read_run",
        annotations=_READ_ONLY,
        description=(
            "Read a past run from its run folder. Returns the same answer as run_runbook (status, verdict, "
            "next_commands, findings, missing_data, parameters, start and end time, html, summary_md). Without run_id: "
            "the newest runs (id, runbook, status, severity, cause, node, gpu, created as a POSIX time)."
        ),
    )
    def read_run(
        run_id: Annotated[
            str, Field(description="a run id such as 20261201T064500Z-xid_ecc_triage-1a2b3c; empty lists the runs")
        ] = "",
    ) -> dict[str, Any]:
        return _answer(tools.read_run, run_id)

    @srv.tool(
        name="xid_lookup",
        annotations=_READ_ONLY,
        description=(
            "Explain an NVIDIA XID error code. Returns, from NVIDIA's XID catalog: mnemonic, meaning, category, fatal "
            "or not, NVIDIA's immediate and investigatory resolution buckets (e.g. RESTART_BM, RESET_GPU, RESTART_APP),"
            " DCGM severity, and for each bucket the SOP: verdict, severity, step, command templates and escalation. An"
            " unknown code returns known=false with CONTACT_SUPPORT."
        ),
    )
    def xid_lookup(
        code: Annotated[int | str, Field(description="the XID number from the kernel log line 'NVRM: Xid (...): N'")],
    ) -> dict[str, Any]:
        return _answer(tools.xid_lookup, code)

    @srv.tool(
        name="plan_node_collection",
        annotations=_READ_ONLY,
        description=(
            "Plan (dry run, nothing is created) collecting a GPU node's evidence with one short-lived pod: kernel log, "
            "nvidia-smi -q reports, optionally a DCGM diagnostic. Returns the pod manifest (pod_yaml, validated against"
            " the Kubernetes schema), the commands each section runs, apply_command for an engineer to run, and the "
            "triage command that reads the snapshot it writes."
        ),
    )
    def plan_node_collection(
        node: Annotated[str, Field(description="the Kubernetes node name of the GPU node")],
        diag_level: Annotated[
            int | str,
            Field(description="0 = no diagnostic; 1-4 = also dcgmi diag -r LEVEL (it loads the GPUs for minutes)"),
        ] = 0,
    ) -> dict[str, Any]:
        return _answer(tools.plan_collection, node, diag_level)

    return srv


# ------------------------------------------------------------------------------------- transports
class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>`` (401 without, 403 wrong), as
    ``gpuops serve``'s webhook (:func:`gpulib.serve.config.bearer_refusal`); lifespan events pass through."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused = bearer_refusal(headers.get("authorization"), self.token)
        if refused is None:
            return await self.app(scope, receive, send)
        code, why = refused
        body = why.encode()
        extra = [(b"www-authenticate", b"Bearer")] if code == 401 else []
        await send(
            {
                "type": "http.response.start",
                "status": code,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(body))]
                + extra,
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_app(tools: Tools, token: str, host: str = "127.0.0.1"):
    """The streamable HTTP app (endpoint ``/mcp``) behind :class:`BearerAuth`."""
    return BearerAuth(build(tools).streamable_http_app(host=host), token)


def serve_stdio(tools: Tools) -> None:
    build(tools).run("stdio")


def serve_http(tools: Tools, token: str, host: str, port: int) -> None:

    uvicorn.run(http_app(tools, token, host), host=host, port=port, log_level="warning", access_log=False)
