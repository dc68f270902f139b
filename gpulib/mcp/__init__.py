"""``gpuops mcp``: the runbooks as tools of a Model Context Protocol server, for AI on-call assistants.

Modules: tools (what each tool does, over the catalogue, the run engine, run folders, the XID catalog and the
collection pod), server (the MCP server on the official SDK, its stdio and streamable HTTP transports, the bearer
token). Needs the ``mcp`` extra (``pip install 'gpu-runbooks[mcp]'``).
"""
