"""The limits on a request to ``gpuops serve``: the body limit (``--max-body``, :class:`BodyLimit`: 413 before a body
over the limit is read, 400 for a Content-Length that is not a number), JSON text that is Unicode
(:class:`UnicodeJson`: 400 for a lone surrogate escape), and a deadline on the request headers
(:class:`HeaderDeadline`)."""

from __future__ import annotations

import json

from fastapi.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol


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


def _lone_surrogate(doc) -> bool:
    """Whether a string (or key) anywhere in ``doc`` holds a lone UTF-16 surrogate (it cannot be encoded as UTF-8)."""
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(x, dict):
            stack += list(x.keys()) + list(x.values())
        elif isinstance(x, list):
            stack += x
    return False


class UnicodeJson:
    """ASGI middleware: 400 for a JSON body with an escape of a lone UTF-16 surrogate (``"\\ud800"``). Python's json
    module decodes it into a string no response or file can encode (a 500 later); RFC 8259 section 8.2 calls such
    strings' behaviour unpredictable (https://www.rfc-editor.org/rfc/rfc8259#section-8.2). Runs inside
    :class:`BodyLimit`, so the body it reads is bounded; a body that is not JSON is left to the app (422)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if scope["type"] != "http" or b"json" not in headers.get(b"content-type", b"") or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        body, done = b"".join(chunks), False
        if b"\\u" in body:  # only an escape can make a surrogate: valid UTF-8 holds none
            try:
                bad = _lone_surrogate(json.loads(body))
            except ValueError:
                bad = False
            if bad:
                why = "the JSON body holds a lone UTF-16 surrogate escape (\\ud800-\\udfff unpaired): not Unicode text"
                return await JSONResponse({"detail": why}, status_code=400)(scope, receive, send)

        async def replay():
            nonlocal done
            if not done:
                done = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline on a request's headers: a connection whose request line and headers are
    not all in within ``timeout_s`` of its opening (or of the previous response) is closed. uvicorn has none of its own:
    its ``timeout_keep_alive`` starts only after a response and stops at the first byte received
    (Kludex/uvicorn: uvicorn/protocols/http/h11_impl.py @72d0fa4de2200fa3de95c847440fb15232906290, ``data_received``
    and ``on_response_complete``; a connection that sends nothing stays open, https://github.com/Kludex/uvicorn/pull/1192),
    so a client that trickles its headers (slowloris) held a connection for ever. ``h11_max_incomplete_event_size``
    bounds their size, not their time."""

    timeout_s = 10.0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._awaiting = self.cycle  # the request a new one must replace before the deadline
        self._header_timer = self.loop.call_later(self.timeout_s, self._expired)

    def _expired(self) -> None:
        if self.cycle is self._awaiting and not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
        self._arm()
        super().on_response_complete()

    def connection_lost(self, exc) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
        super().connection_lost(exc)
