"""Tell on-call each verdict where it works: Slack, PagerDuty or any webhook. Failures are logged into the run, never
raised; a secret (PagerDuty routing key, Slack bot token) is read from a file or a variable, masked in every message
(:func:`gpulib.core.redact.register`) and never written to a run.

* ``json``: the verdict's facts as one object.
* ``slack``: a Block Kit message (https://docs.slack.dev/reference/block-kit/blocks) built with slack-sdk's model
  classes (``slack_sdk.models.blocks``, which check Slack's limits): the verdict and cause, the next command, and the
  buttons Verdict (the run's findings.json), Notebook (the run's page), Runbook (the alert's ``runbook_url``) and
  Silence (Alertmanager's new-silence form for the alert's labels, the URL its UI builds:
  prometheus/alertmanager: ui/app/src/Views/SilenceForm/Parsing.elm @298f2b03), with ``text`` as the notification
  fallback. To an incoming webhook (https://api.slack.com/messaging/webhooks) every message is a new one; with a bot
  token (``GPUOPS_SLACK_BOT_TOKEN[_FILE]``, ``GPUOPS_SLACK_CHANNEL``) the message goes through ``chat.postMessage``
  (https://api.slack.com/methods/chat.postMessage, slack-sdk's WebClient at the ``--notify-url`` base), its ``ts``
  is kept on the run, and later alerts of the incident and a changed verdict are replies in its thread
  (``thread_ts``).
* ``pagerduty``: Events API v2 (PagerDuty/developer-docs: docs/events-API-v2/02-Trigger-Events.md @d5d64571):
  ``trigger`` with ``dedup_key`` = the incident (runbook and parameters less the GPU: one PagerDuty alert per
  incident, as one run per incident), ``payload`` summary / severity / source (the node) / component ``GPU`` /
  group (the runbook) / ``custom_details`` (verdict, cause, commands, run), ``links`` to the verdict and the
  notebook; ``resolve`` with the same key when Alertmanager resolves the alert. The routing key comes from
  ``GPUOPS_PAGERDUTY_ROUTING_KEY_FILE`` or ``GPUOPS_PAGERDUTY_ROUTING_KEY``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from gpulib.core.errors import InvalidParameter
from gpulib.core.redact import redact, register
from gpulib.core.settings import env

FORMATS = ("slack", "json", "pagerduty")
PD_KEY_ENV, PD_KEY_FILE_ENV = "GPUOPS_PAGERDUTY_ROUTING_KEY", "GPUOPS_PAGERDUTY_ROUTING_KEY_FILE"
SLACK_TOKEN_ENV, SLACK_TOKEN_FILE_ENV = "GPUOPS_SLACK_BOT_TOKEN", "GPUOPS_SLACK_BOT_TOKEN_FILE"
SLACK_CHANNEL_ENV = "GPUOPS_SLACK_CHANNEL"
#: our severities as PagerDuty's (critical, error, warning, info); a run without a verdict is an error
PD_SEVERITY = {"critical": "critical", "warning": "warning", "info": "info", "ok": "info"}
#: Events API v2 limits (02-Trigger-Events.md): summary 1024, dedup_key 255 characters
PD_SUMMARY_MAX, PD_DEDUP_MAX = 1024, 255
#: Block Kit limits (https://docs.slack.dev/reference/block-kit/blocks): header 150, section text 3000
HEADER_MAX, SECTION_MAX = 150, 3000


def secret(value_env: str, file_env: str) -> str:
    """A secret from the file ``$file_env`` names, else ``$value_env``; registered for masking; "" when unset."""
    path = env(file_env)
    if path:
        try:
            value = Path(path).read_text().strip()
        except OSError as exc:
            raise InvalidParameter(f"{file_env}={path}: {exc.strerror}") from None
    else:
        value = env(value_env).strip()
    if value:
        register(value)
    return value


def dedup_key(runbook: str, params: dict[str, Any]) -> str:
    """The incident as PagerDuty's ``dedup_key``: ``gpuops/<runbook>/<k=v,...>`` less the GPU (hashed past 255)."""
    where = ",".join(f"{k}={v}" for k, v in sorted(params.items()) if k != "gpu" and k != "source")
    key = f"gpuops/{runbook}/{where}"
    return key if len(key) <= PD_DEDUP_MAX else f"gpuops/{runbook}/" + hashlib.sha256(where.encode()).hexdigest()


def silence_url(external_url: str, labels: dict[str, str]) -> str:
    """Alertmanager's new-silence form filled with ``labels`` (``{k="v", ...}``), or "" without its URL."""
    if not external_url.startswith(("http://", "https://")) or not labels:
        return ""
    matchers = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{external_url.rstrip('/')}/#/silences/new?filter={quote('{' + matchers + '}', safe='')}"


def links(rec: dict[str, Any], link: str) -> dict[str, str]:
    """The links of a verdict message: Verdict, Notebook, Runbook, Silence (those that are known)."""
    trig = rec.get("trigger") or {}
    out = {"Verdict": f"{link}/findings.json", "Notebook": link}
    if str(trig.get("runbook_url", "")).startswith(("http://", "https://")):
        out["Runbook"] = trig["runbook_url"]
    if trig.get("silence_url"):
        out["Silence"] = trig["silence_url"]
    return out


def _facts(rec: dict[str, Any], link: str) -> dict[str, Any]:
    return {
        "run": rec["id"],
        "runbook": rec["runbook"],
        "params": rec["params"],
        "status": rec["status"],
        "verdict": rec.get("severity"),
        "cause": rec.get("cause"),
        "command": rec.get("command"),
        "link": link,
    }


def _headline(rec: dict[str, Any]) -> str:
    where = " ".join(f"{k}={v}" for k, v in rec["params"].items() if k != "source")
    return f"{rec['runbook']} {where}: {str(rec.get('severity') or rec['status']).upper()}"


def slack_blocks(rec: dict[str, Any], link: str) -> list[dict[str, Any]]:
    """The Block Kit blocks of a verdict (slack-sdk raises on a block past Slack's limits)."""
    cause = str(rec.get("cause") or rec.get("error") or "")
    blocks = [
        HeaderBlock(text=_headline(rec)[:HEADER_MAX]),
        SectionBlock(text=MarkdownTextObject(text=f"*Cause:* {cause}"[:SECTION_MAX])),
    ]
    if rec.get("command"):
        blocks.append(SectionBlock(text=MarkdownTextObject(text=f"*Next:* ```{rec['command']}```"[:SECTION_MAX])))
    buttons = [ButtonElement(text=name, url=url, action_id=name.lower()) for name, url in links(rec, link).items()]
    blocks.append(ActionsBlock(block_id="links", elements=buttons))
    return [b.to_dict() for b in blocks]


def slack_text(rec: dict[str, Any], link: str) -> str:
    """The plain fallback Slack shows in notifications."""
    text = (
        f"*{rec['runbook']}* {' '.join(f'{k}={v}' for k, v in rec['params'].items())}: "
        f"*{rec.get('severity') or rec['status']}* - {rec.get('cause') or rec.get('error') or ''}"
    )
    if rec.get("command"):
        text += f"\nnext: `{rec['command']}`"
    return text + f"\n<{link}|open the report>"


def pagerduty_trigger(rec: dict[str, Any], link: str, routing_key: str) -> dict[str, Any]:
    verdict = rec.get("verdict") or {}
    node = str(rec["params"].get("node") or rec.get("node") or "gpuops")
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": dedup_key(rec["runbook"], rec["params"]),
        "payload": {
            "summary": f"{_headline(rec)} - {rec.get('cause') or rec.get('error') or ''}"[:PD_SUMMARY_MAX],
            "severity": PD_SEVERITY.get(str(rec.get("severity")), "error"),
            "source": node,
            "component": "GPU",
            "group": rec["runbook"],
            "class": str(rec.get("status")),
            "custom_details": {
                "verdict": rec.get("severity") or rec["status"],
                "cause": rec.get("cause") or rec.get("error"),
                "sop_step": verdict.get("sop_step", ""),
                "commands": list(verdict.get("commands") or ([rec["command"]] if rec.get("command") else [])),
                "run": rec["id"],
                "params": rec["params"],
                "gpus": rec.get("gpus") or [],
            },
        },
        "links": [{"href": url, "text": name} for name, url in links(rec, link).items()],
        "client": "gpuops serve",
        "client_url": link,
    }


def pagerduty_resolve(key: str, routing_key: str) -> dict[str, Any]:
    return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": key}


def body(rec: dict[str, Any], link: str, fmt: str, *, routing_key: str = "") -> dict[str, Any]:
    """The body of a verdict notification in format ``fmt``."""
    if fmt == "json":
        return _facts(rec, link)
    if fmt == "pagerduty":
        return pagerduty_trigger(rec, link, routing_key)
    return {"text": slack_text(rec, link), "blocks": slack_blocks(rec, link)}


def _post(url: str, doc: dict[str, Any], timeout: float) -> str | None:
    try:
        r = requests.post(url, data=json.dumps(doc), headers={"Content-Type": "application/json"}, timeout=timeout)
        return None if r.status_code < 300 else f"notify webhook answered {r.status_code}"
    except requests.RequestException as exc:
        return f"notify webhook failed: {type(exc).__name__}"


def send(url: str, rec: dict[str, Any], link: str, fmt: str, timeout: float = 10) -> str | None:
    """POST the body to a webhook; None on success, else the reason."""
    return _post(url, body(rec, link, fmt), timeout)


class Notifier:
    """The notifications of one server: verdicts, alerts attached to an incident, resolutions."""

    def __init__(self, url: str | None, fmt: str, timeout: float = 10):
        self.url, self.fmt, self.timeout = url, fmt, timeout
        self.routing_key = secret(PD_KEY_ENV, PD_KEY_FILE_ENV) if url and fmt == "pagerduty" else ""
        if url and fmt == "pagerduty" and not self.routing_key:
            raise InvalidParameter(
                f"--notify-format pagerduty needs a routing key: set {PD_KEY_FILE_ENV} or {PD_KEY_ENV}"
            )
        token = secret(SLACK_TOKEN_ENV, SLACK_TOKEN_FILE_ENV) if url and fmt == "slack" else ""
        self.slack = None
        if token:
            self.channel = env(SLACK_CHANNEL_ENV)
            if not self.channel:
                raise InvalidParameter(f"a Slack bot token needs {SLACK_CHANNEL_ENV} (the channel to post to)")
            self.slack = WebClient(token=token, base_url=str(url).rsplit("/", 1)[0] + "/", timeout=int(timeout))

    def _slack_post(self, text: str, blocks: list | None, thread_ts: str | None) -> tuple[str | None, str | None]:
        try:
            r = self.slack.chat_postMessage(channel=self.channel, text=text, blocks=blocks, thread_ts=thread_ts)
            return None, str(r.get("ts") or "") or None
        except SlackApiError as exc:
            return redact(f"slack chat.postMessage: {exc.response.get('error')}"), None
        except Exception as exc:  # the network: logged into the run, never raised
            return f"slack chat.postMessage failed: {type(exc).__name__}", None

    def verdict(self, rec: dict[str, Any], link: str) -> tuple[str | None, dict[str, Any]]:
        """(error, fields for the run record) of a verdict notification."""
        if not self.url:
            return None, {}
        if self.slack is not None:
            err, ts = self._slack_post(slack_text(rec, link), slack_blocks(rec, link), rec.get("slack_ts"))
            return err, ({"slack_ts": ts} if ts and not rec.get("slack_ts") else {})
        return _post(self.url, body(rec, link, self.fmt, routing_key=self.routing_key), self.timeout), {}

    def attached(self, rec: dict[str, Any], link: str, alert: dict[str, Any]) -> str | None:
        """A later alert of a running incident: a reply in the incident's Slack thread; PagerDuty deduplicates it
        into the incident's alert by ``dedup_key`` without a new event; a plain webhook is not told again."""
        if self.slack is None or not rec.get("slack_ts"):
            return None
        gpu = alert.get("params", {}).get("gpu", "")
        text = f"also: {alert.get('alertname', 'alert')} ({alert.get('severity') or 'no severity'}) GPU {gpu} -> {link}"
        return self._slack_post(text, None, rec["slack_ts"])[0]

    def resolved(self, runbook: str, params: dict[str, Any]) -> str | None:
        """Alertmanager resolved an alert of the incident: PagerDuty's ``resolve`` for its key."""
        if not self.url or self.fmt != "pagerduty":
            return None
        return _post(self.url, pagerduty_resolve(dedup_key(runbook, params), self.routing_key), self.timeout)
