"""Notifications on-call uses (gpulib/serve/notify.py): PagerDuty Events API v2 and Slack Block Kit, checked against
the documented shapes, carrying the verdict, the links and the incident's dedup key, never a secret.

* PagerDuty's event (PagerDuty/developer-docs: docs/events-API-v2/02-Trigger-Events.md @d5d64571): ``EVENT`` below is
  that page's parameter table as a JSON Schema (required fields, enums, the 1024/255 character limits, ``links``).
* Slack: every block parses back with slack-sdk (``Block.parse``) and keeps the Block Kit limits
  (https://docs.slack.dev/reference/block-kit/blocks: header plain_text of 150 characters at most, at most 25
  elements in an actions block, a button's text of 75 characters at most and a url of 3000); the thread reply uses
  ``chat.postMessage``'s ``thread_ts`` (https://api.slack.com/methods/chat.postMessage).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote

import jsonschema
import pytest
from slack_sdk.models.blocks import Block

from gpulib.core.errors import InvalidParameter
from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from gpulib.serve.notify import dedup_key, silence_url
from tests.serve.test_app import AUTH, TOKEN, StubRunner, payload

ROUTING_KEY = "R0ut1ngKey" + "q" * 22  # 32 characters, as the documented integration key
SLACK_TOKEN = "xoxb-" + "7" * 30
EXTERNAL = "https://alertmanager.example.com"
RUNBOOK_URL = "https://gpuops.example.com/run/xid_ecc_triage?node=dgx-h100-1&gpu=5"

EVENT = {
    "type": "object",
    "required": ["routing_key", "event_action"],
    "properties": {
        "routing_key": {"type": "string", "minLength": 1},
        "event_action": {"enum": ["trigger", "acknowledge", "resolve"]},
        "dedup_key": {"type": "string", "maxLength": 255},
        "payload": {
            "type": "object",
            "required": ["summary", "source", "severity"],
            "properties": {
                "summary": {"type": "string", "minLength": 1, "maxLength": 1024},
                "source": {"type": "string", "minLength": 1},
                "severity": {"enum": ["critical", "error", "warning", "info"]},
                "component": {"type": "string"},
                "group": {"type": "string"},
                "class": {"type": "string"},
                "custom_details": {"type": "object"},
            },
        },
        "links": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["href"],
                "properties": {"href": {"type": "string"}, "text": {"type": "string"}},
            },
        },
    },
    "if": {"properties": {"event_action": {"const": "trigger"}}},
    "then": {"required": ["payload"]},
}


class Hook:
    """A webhook (PagerDuty's enqueue endpoint, or Slack's Web API with ``slack=True``) that records each body."""

    def __init__(self, slack=False):
        got = self.got = []

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                if "json" in (self.headers.get("Content-Type") or ""):
                    doc = json.loads(raw)
                else:
                    doc = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                got.append({"path": self.path, "auth": self.headers.get("Authorization"), **doc})
                answer = {"ok": True, "ts": f"1700000000.{len(got):06d}"} if slack else {"status": "success"}
                data = json.dumps(answer).encode()
                self.send_response(202 if not slack else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.srv.server_port}"


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.srv.shutdown()


@pytest.fixture
def slack_api():
    h = Hook(slack=True)
    yield h
    h.srv.shutdown()


def alert(gpu="5", status="firing", name="GPUXidCritical"):
    return {
        "status": status,
        "labels": {"alertname": name, "Hostname": "dgx-h100-1", "gpu": gpu, "severity": "critical"},
        "annotations": {"summary": f"XID 79 on dgx-h100-1 GPU {gpu}", "runbook_url": RUNBOOK_URL},
        "startsAt": "2026-12-01T06:00:00Z",
    }


def serve(tmp_path, url, fmt, runner=None):
    from fastapi.testclient import TestClient

    cfg = ServeConfig.build(
        out=tmp_path / "runs", token=TOKEN, notify_url=url, notify_format=fmt, public_url="https://gpuops.example.com"
    )
    app = create_app(cfg, runner or StubRunner(delay=0))
    return app, TestClient(app)


def post(c, alerts, group="g"):
    return c.post("/alertmanager", json={**payload(alerts, group=group), "externalURL": EXTERNAL}, headers=AUTH).json()


def _files_text(root) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def test_pagerduty_trigger_and_resolve_carry_verdict_links_and_dedup_key_never_the_key(tmp_path, hook, monkeypatch):
    key_file = tmp_path / "routing-key"
    key_file.write_text(ROUTING_KEY + "\n")
    monkeypatch.setenv("GPUOPS_PAGERDUTY_ROUTING_KEY_FILE", str(key_file))
    app, c = serve(tmp_path, hook.base + "/v2/enqueue", "pagerduty")
    rid = post(c, [alert()])["runs"][0]
    assert app.state.service.join(10)
    post(c, [alert(status="resolved")])
    triggers = [b for b in hook.got if b["event_action"] == "trigger"]
    resolves = [b for b in hook.got if b["event_action"] == "resolve"]
    assert triggers and len(resolves) == 1
    for b in hook.got:
        jsonschema.validate({k: v for k, v in b.items() if k not in ("path", "auth")}, EVENT)
        assert b["routing_key"] == ROUTING_KEY and b["dedup_key"] == "gpuops/xid_ecc_triage/node=dgx-h100-1"
    t = triggers[-1]
    assert t["payload"]["severity"] == "critical" and t["payload"]["component"] == "GPU"
    assert t["payload"]["source"] == "dgx-h100-1" and "stub verdict for dgx-h100-1" in t["payload"]["summary"]
    assert t["payload"]["custom_details"]["commands"] == ["kubectl cordon dgx-h100-1"]
    assert t["payload"]["custom_details"]["verdict"] == "critical" and t["payload"]["custom_details"]["run"] == rid
    hrefs = {x["text"]: x["href"] for x in t["links"]}
    assert hrefs["Verdict"] == f"https://gpuops.example.com/runs/{rid}/findings.json"
    assert hrefs["Notebook"] == f"https://gpuops.example.com/runs/{rid}" and hrefs["Runbook"] == RUNBOOK_URL
    assert ROUTING_KEY not in _files_text(tmp_path / "runs"), "the routing key was written to the run store"
    assert ROUTING_KEY not in json.dumps(c.get(f"/runs/{rid}/run.json").json())


def test_pagerduty_without_a_routing_key_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUOPS_PAGERDUTY_ROUTING_KEY", raising=False)
    monkeypatch.delenv("GPUOPS_PAGERDUTY_ROUTING_KEY_FILE", raising=False)
    with pytest.raises(InvalidParameter, match="routing key"):
        serve(tmp_path, "https://events.pagerduty.com/v2/enqueue", "pagerduty")


def test_dedup_key_is_the_incident_within_255_characters():
    assert dedup_key("xid_ecc_triage", {"node": "n1", "gpu": "3"}) == dedup_key(
        "xid_ecc_triage", {"node": "n1", "gpu": "5"}
    )
    assert len(dedup_key("fleet_health", {"selector": "x" * 400})) <= 255


def _check_blocks(blocks):
    """Every block parses back with slack-sdk and keeps the documented limits; the buttons by name."""
    buttons = {}
    for b in blocks:
        assert Block.parse(b) is not None and Block.parse(b).to_dict() == b
        if b["type"] == "header":
            assert b["text"]["type"] == "plain_text" and len(b["text"]["text"]) <= 150
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= 3000
        if b["type"] == "actions":
            assert len(b["elements"]) <= 25
            for e in b["elements"]:
                assert e["type"] == "button" and len(e["text"]["text"]) <= 75 and len(e["url"]) <= 3000
                buttons[e["text"]["text"]] = e["url"]
    return buttons


def test_slack_block_kit_verdict_cause_command_and_four_buttons(tmp_path, hook):
    app, c = serve(tmp_path, hook.base + "/hook", "slack")
    rid = post(c, [alert()])["runs"][0]
    assert app.state.service.join(10)
    msg = hook.got[-1]
    text = json.dumps(msg["blocks"])
    assert "CRITICAL" in text and "stub verdict for dgx-h100-1" in text and "kubectl cordon dgx-h100-1" in text
    buttons = _check_blocks(msg["blocks"])
    assert list(buttons) == ["Verdict", "Notebook", "Runbook", "Silence"]
    assert buttons["Verdict"].endswith(f"/runs/{rid}/findings.json") and buttons["Runbook"] == RUNBOOK_URL
    assert buttons["Silence"].startswith(EXTERNAL + "/#/silences/new?filter=")
    matchers = unquote(buttons["Silence"].split("filter=", 1)[1])
    assert matchers.startswith("{") and 'alertname="GPUXidCritical"' in matchers and 'Hostname="dgx-h100-1"' in matchers
    assert msg["text"] and TOKEN not in json.dumps(hook.got)


def test_silence_url_needs_alertmanagers_url():
    assert silence_url("", {"a": "b"}) == "" and silence_url("javascript:alert(1)", {"a": "b"}) == ""


def test_slack_bot_threads_later_alerts_of_the_incident(tmp_path, slack_api, monkeypatch):
    token_file = tmp_path / "slack-token"
    token_file.write_text(SLACK_TOKEN)
    monkeypatch.setenv("GPUOPS_SLACK_BOT_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("GPUOPS_SLACK_CHANNEL", "C0GPUOPS")
    app, c = serve(tmp_path, slack_api.base + "/api/chat.postMessage", "slack", StubRunner(delay=0.5))
    first = post(c, [alert(gpu="5")])
    assert first["runs"]
    rid = first["runs"][0]
    for _ in range(100):  # the verdict message (the thread's parent) is out before the render ends
        if app.state.service.store.get(rid).get("slack_ts"):
            break
        time.sleep(0.05)
    later = post(c, [alert(gpu="5", name="GPUXidCriticalCount")], group="count")  # another alert group, same GPU
    assert later["attached"] == [rid], later
    assert app.state.service.join(10)
    parent = slack_api.got[0]
    assert parent["path"] == "/api/chat.postMessage" and parent["auth"] == f"Bearer {SLACK_TOKEN}"
    assert parent["channel"] == "C0GPUOPS" and "thread_ts" not in parent and parent["blocks"]
    ts = app.state.service.store.get(rid)["slack_ts"]
    replies = [m for m in slack_api.got[1:] if m.get("thread_ts") == ts]
    assert replies and any("GPUXidCriticalCount" in m["text"] and "GPU 5" in m["text"] for m in replies), slack_api.got
    assert SLACK_TOKEN not in _files_text(tmp_path / "runs")
