"""``POST /cloudevents``: NVSentinel health events, as its Event Exporter sends them, routed like alerts.

The Event Exporter posts one CloudEvent per health event (https://docs.nvidia.com/nvsentinel/components/event-exporter.md):
type ``com.nvidia.nvsentinel.health.v1``, ``data`` = ``{"metadata": {...}, "healthEvent": {...}}`` where the health
event carries ``nodeName``, ``entitiesImpacted`` (``entityType``/``entityValue``: GPU, GPU_UUID, PCI), ``errorCode``
(the XID as a string for XID checks), ``recommendedAction`` (its number), ``isFatal``, ``isHealthy``, ``message``
and ``generatedTimestamp`` (NVIDIA/NVSentinel: event-exporter/pkg/transformer/cloudevents.go @24adf22a; the fields of
NVIDIA/NVSentinel: data-models/protobufs/health_event.proto @264bfab8). The body is read with the ``cloudevents``
SDK (https://github.com/cloudevents/sdk-python), structured (``application/cloudevents+json``) or binary (``ce-*``
headers) mode alike.

A health event becomes the Alertmanager alert our own rules raise for the same GPU (``GPUXidCritical`` when fatal,
else ``GPUXidError``; the labels ``Hostname`` and ``gpu``; the summary ``XID <code> on <node> GPU <gpu>``;
``startsAt`` the event's time; the event id as fingerprint), so it goes through the one path every alert takes
(:meth:`gpulib.serve.service.Service.handle`: routes, storms and repeat rules, claims, dedupe): the health event and
the alert of one GPU open one incident. A healthy event (``isHealthy``) is a resolved alert. Every value is checked
by the routes (:func:`gpulib.serve.routing.check_params`) before it reaches a run.
"""

from __future__ import annotations

import re
from typing import Any

from cloudevents.core.bindings.http import HTTPMessage, from_http_event

from gpulib.core.errors import InvalidParameter
from gpulib.core.verdict_doc import nvsentinel_name
from gpulib.serve.payload import Alert, WebhookPayload

#: the CloudEvent type the Event Exporter writes
HEALTH_TYPE = "com.nvidia.nvsentinel.health.v1"
#: the alert names of deploy/prometheus/gpu-alerts.yaml a health event stands for
FATAL_ALERT, OTHER_ALERT = "GPUXidCritical", "GPUXidError"
_XID = re.compile(r"^\d{1,4}$")
_INDEX = re.compile(r"^\d{1,3}$")


def parse(headers: dict[str, str], body: bytes):
    """The CloudEvent of a request, structured or binary mode; InvalidParameter when it is not one."""
    try:
        return from_http_event(HTTPMessage(headers={k.lower(): v for k, v in headers.items()}, body=body))
    except Exception as exc:  # the SDK raises its own errors and ValueError/KeyError for a body that is not an event
        raise InvalidParameter(f"not a CloudEvent: {type(exc).__name__}: {str(exc)[:200]}") from None


def health_event(event) -> dict[str, Any]:
    """The ``healthEvent`` of an NVSentinel CloudEvent (``data.healthEvent``, or ``data`` itself when it is one)."""
    if event.get_type() != HEALTH_TYPE:
        raise InvalidParameter(f"CloudEvent type {str(event.get_type())[:100]!r} is not {HEALTH_TYPE}")
    data = event.get_data()
    if not isinstance(data, dict):
        raise InvalidParameter("the CloudEvent has no JSON object as data")
    he = data.get("healthEvent", data)
    if not isinstance(he, dict) or not he.get("nodeName"):
        raise InvalidParameter("the health event names no nodeName")
    return he


def entities(he: dict[str, Any]) -> dict[str, str]:
    """entityType -> entityValue of ``entitiesImpacted`` (the first of each type)."""
    out: dict[str, str] = {}
    for e in he.get("entitiesImpacted") or []:
        if isinstance(e, dict) and e.get("entityType") and e.get("entityValue") not in (None, ""):
            out.setdefault(str(e["entityType"]).upper(), str(e["entityValue"]))
    return out


def to_alert(event) -> Alert:
    """The Alertmanager alert a health event stands for (see the module's docstring)."""
    he = health_event(event)
    ents = entities(he)
    node = str(he["nodeName"])
    gpu = ents.get("GPU", "") if _INDEX.match(ents.get("GPU", "")) else ents.get("GPU_UUID", "")
    codes = [str(c) for c in he.get("errorCode") or [] if _XID.match(str(c))]
    fatal = bool(he.get("isFatal"))
    labels = {
        "alertname": FATAL_ALERT if fatal else OTHER_ALERT,
        "severity": "critical" if fatal else "warning",
        "Hostname": node,
        "source": "nvsentinel",
    }
    if gpu:
        labels["gpu"] = gpu
    if ents.get("GPU_UUID"):
        labels["UUID"] = ents["GPU_UUID"]
    if ents.get("PCI"):
        labels["pci_bus_id"] = ents["PCI"]
    summary = f"XID {codes[0]} on {node} GPU {gpu}" if codes else f"{he.get('checkName') or 'health event'} on {node}"
    time = he.get("generatedTimestamp") or (event.get_time().isoformat() if event.get_time() else "")
    return Alert(
        status="resolved" if he.get("isHealthy") else "firing",
        labels=labels,
        annotations={
            "summary": summary,
            "description": str(he.get("message") or "")[:1000],
            "nvsentinel_action": nvsentinel_name(he.get("recommendedAction")),
            "error_codes": ",".join(str(c) for c in he.get("errorCode") or [])[:200],
        },
        startsAt=str(time),
        fingerprint=str(event.get_id())[:200],
    )


def to_payload(event) -> WebhookPayload:
    """One health event as an Alertmanager webhook body of one alert; its group is the event's source (an NVSentinel
    cluster), so re-posts of one event dedupe as Alertmanager's re-sends do."""
    alert = to_alert(event)
    return WebhookPayload(
        version="4",
        groupKey=f"cloudevents:{str(event.get_source())[:300]}",
        status=alert.status,
        receiver="cloudevents",
        alerts=[alert],
    )
