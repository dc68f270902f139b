"""``POST /cloudevents`` (gpulib/serve/cloudevents_in.py): NVSentinel health events as its Event Exporter posts
them (NVIDIA/NVSentinel: event-exporter/pkg/transformer/cloudevents.go @24adf22a: type com.nvidia.nvsentinel.health.v1,
data.healthEvent with the fields of NVIDIA/NVSentinel: data-models/protobufs/health_event.proto @264bfab8), in the
CloudEvents HTTP binding's structured and binary modes (https://github.com/cloudevents/spec/blob/main/cloudevents/bindings/http-protocol-binding.md),
encoded here with the ``cloudevents`` SDK's own writers; routed like alerts: the same bearer token, dedupe, storms,
and one incident with the Alertmanager alert of the same GPU."""

from __future__ import annotations

import json

from cloudevents.core.bindings.http import to_binary_event, to_structured_event
from cloudevents.core.v1.event import CloudEvent

from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from gpulib.serve.runner import FastVerdicter
from tests.serve.test_app import AUTH, StubRunner, make, payload, xid
from tests.serve.test_app_verdict_first import HeldRunner, pinned, wait_for  # noqa: F401 (pinned: a fixture)

NODE, GPU = "dgx-h100-1", "5"  # XID 79 on GPU 5 in gpulib/data/demo/demo_fleet.yaml


def health_event(code="79", fatal=True, healthy=False, node=NODE, gpu=GPU, event_id="e-1"):
    """An NVSentinel CloudEvent as the exporter builds it (the exporter sends recommendedAction as its number)."""
    he = {
        "version": 1,
        "agent": "syslog-health-monitor",
        "componentClass": "GPU",
        "checkName": "SysLogsXIDError",
        "isFatal": fatal,
        "isHealthy": healthy,
        "message": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        "recommendedAction": 2,
        "errorCode": [code],
        "entitiesImpacted": [
            {"entityType": "GPU", "entityValue": gpu},
            {"entityType": "GPU_UUID", "entityValue": "GPU-1f6c1e64-58b5-4f2a-9f41-1c9e2f0b7d11"},
            {"entityType": "PCI", "entityValue": "0000:19:00.0"},
        ],
        "generatedTimestamp": "2026-12-01T06:00:00Z",
        "nodeName": node,
    }
    return CloudEvent(
        attributes={
            "type": "com.nvidia.nvsentinel.health.v1",
            "source": "nvsentinel://prod-east/healthevents",
            "id": event_id,
            "datacontenttype": "application/json",
        },
        data={"metadata": {"cluster": "prod-east"}, "healthEvent": he},
    )


def post(c, event, mode="structured", headers=AUTH):
    msg = (to_structured_event if mode == "structured" else to_binary_event)(event)
    return c.post("/cloudevents", content=msg.body, headers={**msg.headers, **headers})


def test_structured_and_binary_modes_open_the_run_of_the_gpu(tmp_path):
    stub = StubRunner(delay=0)
    for mode in ("structured", "binary"):
        app, c = make(tmp_path / mode, stub)
        r = post(c, health_event(event_id=f"id-{mode}"), mode)
        assert r.status_code == 202 and len(r.json()["runs"]) == 1, (mode, r.text)
        assert app.state.service.join(10)
    assert [(rb, p["node"], p["gpu"]) for rb, p in stub.calls] == [("xid_ecc_triage", NODE, GPU)] * 2
    log = app.state.service.store.alert_log()
    assert log[-1]["labels"]["alertname"] == "GPUXidCritical" and log[-1]["labels"]["source"] == "nvsentinel"


def test_the_same_bearer_token_and_bad_bodies(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    assert post(c, health_event(), headers={}).status_code == 401
    assert post(c, health_event(), headers={"Authorization": "Bearer " + "z" * 30}).status_code == 403
    r = c.post(
        "/cloudevents", content=b'{"not": "an event"}', headers={**AUTH, "content-type": "application/cloudevents+json"}
    )
    assert r.status_code == 400 and "CloudEvent" in r.json()["detail"]
    other = CloudEvent(attributes={"type": "com.example.other", "source": "x", "id": "1"}, data={"a": 1})
    assert post(c, other).status_code == 400
    bad = post(c, health_event(node="Node; rm -rf /"))  # a node name no route accepts: rejected, no run
    assert bad.status_code == 202 and bad.json()["rejected"] and not bad.json()["runs"]


def test_a_resent_event_dedupes_and_a_healthy_one_resolves(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    first = post(c, health_event()).json()
    again = post(c, health_event()).json()
    assert len(first["runs"]) == 1 and again["deduped"] == first["runs"] and not again["runs"]
    healed = post(c, health_event(healthy=True, fatal=False, event_id="e-2")).json()
    assert healed["resolved"] == 1 and not healed["runs"]


def test_an_application_xid_is_held_by_the_storm_rules(tmp_path):
    """XID 13 needs a repeat on the same GPU (gpulib/data/xid/xid_alert_repeat.csv), as its alert does."""
    app, c = make(tmp_path, StubRunner(delay=0))
    r = post(c, health_event(code="13", fatal=False)).json()
    assert r["held"] == 1 and not r["runs"]


def test_xid79_health_event_and_alert_are_one_incident_with_the_same_verdict(tmp_path, pinned):  # noqa: F811
    """Alone, each decides the same (the fast verdict on the demo fleet); together they are one run."""
    verdicts = {}
    for name, send in (
        ("cloudevent", lambda c: post(c, health_event())),
        ("alert", lambda c: c.post("/alertmanager", json=payload([xid(NODE, GPU)]), headers=AUTH)),
    ):
        runner = HeldRunner(same=True)
        cfg = ServeConfig.build(out=tmp_path / name / "runs", token=AUTH["Authorization"].split()[1])
        app = create_app(cfg, runner, FastVerdicter())
        from fastapi.testclient import TestClient

        c = TestClient(app)
        rid = send(c).json()["runs"][0]
        rec = wait_for(c, rid, "rendering")
        runner.release.set()
        verdicts[name] = {k: rec[k] for k in ("severity", "cause", "command")}
        app.state.service.join(30)
    assert verdicts["cloudevent"] == verdicts["alert"] and "XID 79" in verdicts["alert"]["cause"], verdicts
    assert verdicts["alert"]["severity"] == "critical"

    app, c = make(tmp_path / "both", StubRunner(delay=0.5))
    ce = post(c, health_event()).json()
    am = c.post("/alertmanager", json=payload([xid(NODE, GPU)]), headers=AUTH).json()
    assert len(ce["runs"]) == 1 and not am["runs"] and am["attached"] == ce["runs"], (ce, am)
    assert app.state.service.join(10)
    assert len(c.get("/runs?format=json").json()) == 1
    assert json.loads(json.dumps(app.state.service.store.alert_log()))[-1]["action"] == "attach"
