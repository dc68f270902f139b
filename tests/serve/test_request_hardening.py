"""Requests ``gpuops serve`` answers without a 5xx or a hidden run: a JSON body holding a lone
UTF-16 surrogate escape is refused with 400 (RFC 8259 section 8.2: such strings are not Unicode text,
https://www.rfc-editor.org/rfc/rfc8259#section-8.2), the API docs are closed unless ``GPUOPS_SERVE_API_DOCS`` opens
them, a client that never finishes its request headers is cut off, and a run whose run.json cannot be read is listed
and shown as such instead of disappearing."""

from __future__ import annotations

import json
import socket
import time

import pytest
from fastapi.testclient import TestClient

from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from tests.helpers.serveproc import Server
from tests.serve.test_app import AUTH, TOKEN, StubRunner, payload, xid

SURROGATES = [
    '{"version":"4","groupKey":"g","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"\\ud800"}}]}',
    '{"version":"4","groupKey":"\\ud800","status":"firing","alerts":[{"status":"firing","labels":{"alertname":'
    '"GPUXidCritical","Hostname":"n1","gpu":"\\udfff"}}]}',
    '{"version":"\\ud800","groupKey":"g","status":"firing","alerts":[]}',
    '{"\\udbff":1}',
    '["\\ud800\\u0041"]',
]


def _client(tmp_path, **kw):
    app = create_app(ServeConfig.build(out=tmp_path / "runs", token=TOKEN, **kw), StubRunner(delay=0))
    return app, TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize("body", SURROGATES)
def test_a_lone_surrogate_in_the_body_is_a_400_not_a_500(tmp_path, body):
    app, c = _client(tmp_path)
    r = c.post("/alertmanager", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 400, (r.status_code, r.text)
    assert "surrogate" in r.json()["detail"]
    assert app.state.service.store.list() == []


def test_a_surrogate_pair_and_an_escaped_backslash_are_still_text(tmp_path):
    app, c = _client(tmp_path)
    alert = xid("dgx-h100-1", "5")
    alert["annotations"] = {"summary": "\U0001f525 hot", "path": "C:\\ud800"}  # a pair; a backslash then "ud800"
    body = json.dumps(payload([alert]), ensure_ascii=True)
    assert "\\ud83d\\udd25" in body and "\\\\ud800" in body
    r = c.post("/alertmanager", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 202 and len(r.json()["runs"]) == 1


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"])
def test_the_api_docs_are_closed_unless_a_setting_opens_them(tmp_path, monkeypatch, path):
    monkeypatch.delenv("GPUOPS_SERVE_API_DOCS", raising=False)
    _app, c = _client(tmp_path)
    assert c.get(path).status_code == 404
    monkeypatch.setenv("GPUOPS_SERVE_API_DOCS", "1")
    _app, c = _client(tmp_path / "open")
    assert c.get(path).status_code == 200


def test_a_run_with_a_corrupt_run_json_is_listed_and_shown_as_such(tmp_path):
    app, c = _client(tmp_path)
    r = c.post("/alertmanager", json=payload([xid("dgx-h100-1", "5")]), headers=AUTH)
    (rid,) = r.json()["runs"]
    assert app.state.service.join(30)
    (tmp_path / "runs" / rid / "run.json").write_text('{"id": "' + rid + '", "status": ')  # cut short
    _app, c2 = _client(tmp_path)  # the restarted server
    listed = {x["id"]: x for x in c2.get("/runs", params={"format": "json"}).json()}
    assert listed[rid]["status"] == "unreadable" and "run.json" in listed[rid]["error"]
    page = c2.get("/runs").text
    assert rid in page and "unreadable" in page
    p = c2.get(f"/runs/{rid}")
    assert p.status_code == 200 and "cannot be read" in p.text and rid in p.text
    assert c2.get(f"/runs/{rid}/run.json").status_code == 409
    assert c2.get("/healthz").json()["unreadable_runs"] == [rid]


#: the server's --header-timeout here: a short one (the option is per server, as nginx's client_header_timeout)
HEADER_TIMEOUT = 2


def _wait_closed(sock: socket.socket, t0: float) -> tuple[bytes | None, float]:
    """What ``sock`` receives before the server closes it (None: nothing within its 60 s timeout) and when."""
    try:
        got = sock.recv(1024)
    except TimeoutError:
        got = None
    took = time.monotonic() - t0
    sock.close()
    return got, took


def test_a_client_that_never_finishes_its_headers_is_cut_off(tmp_path):
    srv = Server(
        tmp_path,
        tmp_path / "runs",
        "--warm-kernels",
        "0",
        "--verdict",
        "notebook",
        "--header-timeout",
        str(HEADER_TIMEOUT),
    )
    try:
        srv.wait_up()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        t0 = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and nothing more
        silent = socket.create_connection(("127.0.0.1", srv.port), timeout=60)  # connects, sends nothing
        t1 = time.monotonic()
        # both wait out the same deadline at once: the silent one's is read after the first closes
        got, took = _wait_closed(s, t0)
        got2, took2 = _wait_closed(silent, t1)
        bound = HEADER_TIMEOUT + 5  # under the default 10 s: the option, not the default, closed them
        assert got is not None and HEADER_TIMEOUT - 0.5 <= took < bound, (got, took)
        assert got2 is not None and HEADER_TIMEOUT - 0.5 <= took2 < bound, (got2, took2)
    finally:
        srv.kill()


def test_the_header_timeout_is_a_serve_option_of_at_least_a_second(tmp_path):
    """--header-timeout comes from gpulib/data/serve/serve_options.csv (10 s unless set) and is refused below 1."""
    from gpulib.core.errors import InvalidParameter
    from gpulib.core.settings import serve_options

    assert ServeConfig.build(out=tmp_path, token=TOKEN).header_timeout == serve_options()["header_timeout"].default
    assert ServeConfig.build(out=tmp_path, token=TOKEN, header_timeout=3).header_timeout == 3
    with pytest.raises(InvalidParameter, match="--header-timeout"):
        ServeConfig.build(out=tmp_path, token=TOKEN, header_timeout=0)
