"""Small loopback servers that fail the way a real Prometheus, proxy or login page does.

``FaultServer(mode)`` answers every request according to ``mode``; ``closed_url()`` is a port nobody
listens on. Used by the fault tests and the fault matrix (tests/project/test_fault_matrix.py).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: the faults a Prometheus URL can have (see :meth:`FaultServer._answer`)
MODES = (
    "closed",
    "hang",
    "slow",
    "500",
    "503",
    "retry_after",
    "empty",
    "garbage",
    "html_login",
    "proxy_502",
    "no_data",
    "bad_result",
    "echo_auth",
    "trickle",
)


def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class FaultServer:
    """An HTTP server on 127.0.0.1 answering every path with one fault.

    ``delay`` is how long ``slow`` waits before a valid empty answer; ``hang`` never answers (until close);
    ``trickle`` sends a valid answer's headers at once, then its body one byte every ``delay`` seconds (each read of
    the client gets a byte within its timeout, so only a deadline on the whole body ends it).
    ``requests`` counts requests; ``auth`` records the Authorization headers seen.
    """

    def __init__(self, mode: str, *, delay: float = 0.0, retry_after: int = 20):
        assert mode in MODES, mode
        self.mode, self.delay, self.retry_after = mode, delay, retry_after
        self.requests = 0
        self.auth: list[str] = []
        self._stop = threading.Event()
        fs = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                fs.requests += 1
                fs.auth.append(self.headers.get("Authorization", ""))
                try:
                    fs._answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_POST = do_GET

            def log_message(self, *a):
                pass

        if mode == "closed":
            self.url = closed_url()
            self.srv = None
            return
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def _send(self, h, status: int, body: bytes, ctype: str = "application/json", headers: dict | None = None):
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _answer(self, h) -> None:
        m = self.mode
        empty_vector = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        if m == "hang":
            self._stop.wait(600)
            return
        if m == "trickle":
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}, indent=8).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.flush()
            for i in range(len(body)):
                if self._stop.wait(self.delay):
                    return
                h.wfile.write(body[i : i + 1])
                h.wfile.flush()
            return
        if m == "slow":
            time.sleep(self.delay)
            self._send(h, 200, empty_vector)
        elif m == "500":
            self._send(h, 500, b'{"status":"error","errorType":"internal","error":"boom"}')
        elif m == "503":
            self._send(h, 503, b"service unavailable", "text/plain")
        elif m == "retry_after":
            self._send(h, 503, b"busy", "text/plain", {"Retry-After": str(self.retry_after)})
        elif m == "empty":
            self._send(h, 200, b"")
        elif m == "garbage":
            self._send(h, 200, b'{"status": "succ\x00\xff not json')
        elif m == "html_login":
            self._send(
                h, 200, b"<!doctype html><html><body><form action='/login'>Sign in</form></body></html>", "text/html"
            )
        elif m == "proxy_502":
            self._send(h, 502, b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>", "text/html")
        elif m == "no_data":
            self._send(h, 200, b'{"status":"success"}')
        elif m == "bad_result":
            self._send(h, 200, b'{"status":"success","data":{"resultType":"vector","result":"oops"}}')
        elif m == "echo_auth":
            body = json.dumps(
                {
                    "status": "error",
                    "errorType": "unauthorized",
                    "error": f"denied for {h.headers.get('Authorization', '')}",
                }
            ).encode()
            self._send(h, 401, body)

    def close(self) -> None:
        self._stop.set()
        if self.srv is not None:
            self.srv.shutdown()
            self.srv.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
