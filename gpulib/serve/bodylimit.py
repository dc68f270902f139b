"""The request body limit of ``gpuops serve`` (``--max-body``): an ASGI middleware that answers 413 before a body over
the limit is read, and 400 for a Content-Length that is not a number."""

from __future__ import annotations

from fastapi.responses import JSONResponse


class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, by Content-Length or while it streams."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        cl = headers.get(b"content-length")
        too_big = JSONResponse({"detail": f"request body over {self.limit} bytes"}, status_code=413)
        if cl is not None:
            try:
                if int(cl) > self.limit:
                    return await too_big(scope, receive, send)
            except ValueError:
                return await JSONResponse({"detail": "bad Content-Length"}, status_code=400)(scope, receive, send)
        if cl is not None or scope.get("method") in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        # no Content-Length (chunked): read up to the limit here, then hand the body on
        chunks, seen = [], 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            chunks.append(msg.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                return await too_big(scope, receive, send)
            if not msg.get("more_body"):
                break
        body, done = b"".join(chunks), False

        async def replay():
            nonlocal done
            if not done:
                done = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


# ------------------------------------------------------------------------------------- the app
