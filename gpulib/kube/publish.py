"""The verdict written back to the cluster (opt-in, ``--publish events``): a Kubernetes Event on the Node, and with
``--publish condition`` the node condition ``GpuRunbooksVerdict``.

NVIDIA's guidance for NVSentinel puts a node's state where Kubernetes users already look: "is a node bad? check
taints; why? check node conditions", and findings that are not fatal as Events
(https://docs.nvidia.com/nvsentinel/ , the Integration Guide). The Event is ``events.k8s.io/v1``
(https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/event-v1/): ``reason`` (the verdict's
severity, ``GpuRunbooksCritical``...), ``note`` (the cause, the next step and the link to the run, at most 1 kB),
``type`` Warning for a critical or warning verdict, else Normal, ``regarding`` the Node. A re-run with the same verdict
is the same Event (its name is the node, the runbook and the cause) whose ``series.count`` and
``series.lastObservedTime`` go up, as an event recorder's series does, rather than a new Event per run. The Event sits
in namespace ``default`` with ``regarding.uid`` = the node's name: kubelet's convention, and what ``kubectl describe
node`` searches for (kubernetes/kubectl: pkg/describe/describe.go @eb836333, ``ref.UID = types.UID(ref.Name)``).

RBAC (``deploy/components/publish-events``): ``create,get,update`` on ``events`` in ``events.k8s.io`` and, for the
condition only, ``patch`` on ``nodes/status``. Every value comes from a findings document whose node names were
validated by the run (:func:`gpulib.core.validate.node_name` again here).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import socket
from pathlib import Path
from typing import Any

from gpulib.core import validate
from gpulib.core.errors import InvalidParameter, KubernetesError
from gpulib.core.verdict_doc import upgrade
from gpulib.kube.client import KubeCluster, _Call

EVENT_NAMESPACE = "default"
CONDITION = "GpuRunbooksVerdict"
CONTROLLER = "gpu-runbooks.io/gpuops"
ACTION = "Diagnose"
#: the ``note`` of an events.k8s.io/v1 Event is at most 1 kB (event-v1 reference above)
NOTE_MAX = 1024
WARNING = ("CRITICAL", "WARNING")
PUBLISH = ("events", "condition")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reason(severity: str) -> str:
    """``GpuRunbooksCritical`` / ``Warning`` / ``Info`` / ``Pass`` / ``Unknown`` (UpperCamelCase, as reasons are)."""
    return "GpuRunbooks" + severity.capitalize()


def event_name(node: str, runbook: str, cause: str) -> str:
    """One Event per node, runbook and cause: the name re-runs find again."""
    digest = hashlib.sha256(f"{runbook}\0{cause}".encode()).hexdigest()[:16]
    return f"{node}.gpuops-{digest}"


def note(doc: dict[str, Any], link: str) -> str:
    v = doc["verdict"]
    step = v.get("sop_step") or (v.get("commands") or [""])[0] or "no action needed"
    text = f"{doc.get('runbook')}: {v['severity']}: {v['cause']}. Next: {step}"
    tail = f" Run: {link}" if link else ""
    return text[: NOTE_MAX - len(tail)] + tail


def event_body(node: str, doc: dict[str, Any], link: str, *, instance: str | None = None) -> dict[str, Any]:
    """The events.k8s.io/v1 Event of a verdict (``doc``: a findings document, version 1 or 2) on ``node``."""
    node = validate.node_name(node)
    doc = upgrade(doc)
    v = doc["verdict"]
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(node, str(doc.get("runbook")), v["cause"]),
            "namespace": EVENT_NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "gpuops"},
        },
        "eventTime": _now(),
        "reportingController": CONTROLLER,
        "reportingInstance": (instance or socket.gethostname() or "gpuops")[:128],
        "action": ACTION,
        "reason": reason(v["severity"]),
        "note": note(doc, link),
        "type": "Warning" if v["severity"] in WARNING else "Normal",
        "regarding": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
    }


def nodes_of(doc: dict[str, Any]) -> list[str]:
    """The nodes a verdict names (its ``node`` entities), in order."""
    v = upgrade(doc)["verdict"]
    return list(dict.fromkeys(e["value"] for e in v["entities"] if e["type"] == "node"))


def _events_api(cluster):
    from kubernetes import client

    return client.EventsV1Api(cluster.api_client)


def publish_event(cluster, node: str, doc: dict[str, Any], link: str) -> dict[str, Any]:
    """Create the verdict's Event on ``node``, or bump the series of the one a run with the same verdict left:
    ``{"action": "created" | "series", "name", "count"}``."""
    body = event_body(node, doc, link)
    api, name, ns = _events_api(cluster), body["metadata"]["name"], EVENT_NAMESPACE
    base = f"/apis/events.k8s.io/v1/namespaces/{ns}/events"
    try:
        cur = cluster._request(
            api.read_namespaced_event,
            _Call("get", "events", f"{base}/{name}", "events.k8s.io", ns),
            name=name,
            namespace=ns,
        )
    except KubernetesError as exc:
        if exc.status != 404:
            raise
        cluster._request(
            api.create_namespaced_event, _Call("create", "events", base, "events.k8s.io", ns), namespace=ns, body=body
        )
        return {"action": "created", "name": name, "count": 1}
    count = int(((cur.get("series") or {}).get("count")) or 1) + 1
    cur["series"] = {"count": count, "lastObservedTime": _now()}
    cur["note"] = body["note"]
    cluster._request(
        api.replace_namespaced_event,
        _Call("update", "events", f"{base}/{name}", "events.k8s.io", ns),
        name=name,
        namespace=ns,
        body=cur,
    )
    return {"action": "series", "name": name, "count": count}


def condition(doc: dict[str, Any], link: str) -> dict[str, Any]:
    """The node condition ``GpuRunbooksVerdict``: True while the verdict is critical or warning."""
    v = upgrade(doc)["verdict"]
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": CONDITION,
        "status": "True" if v["severity"] in WARNING else "False",
        "reason": reason(v["severity"]),
        "message": note(upgrade(doc), link),
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def publish_condition(cluster, node: str, doc: dict[str, Any], link: str) -> dict[str, Any]:
    """Set the condition on ``node`` with a strategic merge patch of ``nodes/status`` (conditions merge by type, so
    kubelet's conditions stay)."""
    from kubernetes import client

    node = validate.node_name(node)
    api = client.CoreV1Api(cluster.api_client)
    cond = condition(doc, link)
    cluster._request(
        api.patch_node_status,
        _Call("patch", "nodes/status", f"/api/v1/nodes/{node}/status"),
        name=node,
        body={"status": {"conditions": [cond]}},
        _content_type="application/strategic-merge-patch+json",
    )
    return cond


def publish(
    cluster, doc: dict[str, Any], link: str, what: tuple[str, ...] = ("events",), nodes: list[str] | None = None
) -> list[str]:
    """Publish ``what`` (events, condition) for every node of the verdict (``nodes`` when it names none); one line
    per thing done or failed."""
    lines = []
    for node in nodes_of(doc) or list(nodes or []):
        try:
            if "events" in what:
                r = publish_event(cluster, node, doc, link)
                lines.append(f"Event {EVENT_NAMESPACE}/{r['name']} on node {node}: {r['action']} (count {r['count']})")
            if "condition" in what:
                c = publish_condition(cluster, node, doc, link)
                lines.append(f"condition {CONDITION}={c['status']} on node {node}")
        except KubernetesError as exc:
            lines.append(f"could not publish on node {node}: {exc}")
    return lines


def parse_what(value: str | None) -> tuple[str, ...]:
    """``--publish events[,condition]`` as a tuple; InvalidParameter for anything else."""
    what = tuple(dict.fromkeys(w.strip() for w in str(value or "").split(",") if w.strip()))
    bad = [w for w in what if w not in PUBLISH]
    if bad:
        raise InvalidParameter(f"--publish {bad[0]!r}: use events, condition or both (events,condition)")
    return what


def publish_run(
    path: Path | None, what: tuple[str, ...], link: str = "", cluster=None, nodes: list[str] | None = None
) -> list[str]:
    """Publish the verdict in ``path`` (the run's findings: :func:`gpulib.run.record.findings_file`, None when it
    wrote none) and say what a reader runs to see it; ``nodes``: the run's own node parameter, for a verdict that
    names none."""
    if path is None:
        return ["nothing published: the run wrote no findings.json"]
    doc = json.loads(Path(path).read_text())
    nodes = nodes_of(doc) or [validate.node_name(n) for n in nodes or [] if n]
    if not nodes:
        return ["nothing published: the verdict names no node"]
    if cluster is None:
        cluster = KubeCluster.from_environment()
    lines = publish(cluster, doc, link or Path(path).parent.resolve().as_uri(), what, nodes)
    return lines + [f"see it: {c}" for n in nodes for c in kubectl_commands(n)]


def kubectl_commands(node: str) -> list[str]:
    """What a reader runs to see what was published on ``node``."""
    node = validate.node_name(node)
    return [
        f"kubectl describe node {node}",
        f"kubectl get events -n {EVENT_NAMESPACE} --field-selector involvedObject.kind=Node,involvedObject.name={node}",
    ]
