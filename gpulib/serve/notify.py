"""Tell a webhook each verdict: Slack's incoming-webhook body (``text``: https://api.slack.com/messaging/webhooks)
or a generic JSON object. Failures are logged into the run, never raised."""

from __future__ import annotations

import json
from typing import Any

import requests


def body(rec: dict[str, Any], link: str, fmt: str) -> dict[str, Any]:
    facts = {
        "run": rec["id"],
        "runbook": rec["runbook"],
        "params": rec["params"],
        "status": rec["status"],
        "verdict": rec.get("severity"),
        "cause": rec.get("cause"),
        "command": rec.get("command"),
        "link": link,
    }
    if fmt == "json":
        return facts
    where = " ".join(f"{k}={v}" for k, v in rec["params"].items())
    text = f"*{rec['runbook']}* {where}: *{rec.get('severity') or rec['status']}* - {rec.get('cause') or rec.get('error') or ''}"
    if rec.get("command"):
        text += f"\nnext: `{rec['command']}`"
    return {"text": text + f"\n<{link}|open the report>"}


def send(url: str, rec: dict[str, Any], link: str, fmt: str, timeout: float = 10) -> str | None:
    """POST the body; None on success, else the reason."""
    try:
        r = requests.post(
            url, data=json.dumps(body(rec, link, fmt)), headers={"Content-Type": "application/json"}, timeout=timeout
        )
        return None if r.status_code < 300 else f"notify webhook answered {r.status_code}"
    except requests.RequestException as exc:
        return f"notify webhook failed: {type(exc).__name__}"
