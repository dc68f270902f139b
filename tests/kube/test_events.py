"""kubectl get events -A -o json -> node history rows (gpulib/kube/events.py), and the snapshot source serving them
(gpulib/sources/snapshot.py) to runbooks/node_health.ipynb and reports/gpu_reliability_report.ipynb."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest

from gpulib.demo.simulator import FleetSimulator
from gpulib.kube.events import events_history
from tests.helpers.gpuops_cli import gpuops

ROOT = Path(__file__).resolve().parents[2]
END = datetime(2026, 12, 1, 6, 45, tzinfo=timezone.utc)


def _ev(reason, kind, name, minutes_ago, namespace="", message=""):
    t = (pd.Timestamp(END) - pd.Timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "reason": reason,
        "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
        "lastTimestamp": t,
        "message": message,
        "count": 1,
    }


EVENTS = {
    "kind": "EventList",
    "items": [
        _ev("NodeNotReady", "Node", "l4-spot-0", 50, message="Node l4-spot-0 status is now: NodeNotReady"),
        _ev("NodeReady", "Node", "l4-spot-0", 44),
        _ev("NodeNotSchedulable", "Node", "l4-spot-0", 40),
        _ev("BackOff", "Pod", "image-resize-5d6c7b8a9-r4t5y", 30, namespace="media"),
        _ev("NodeReady", "Node", "a100-80-1", 20),  # its NotReady is older than the capture: dropped
        {"reason": "NodeNotReady", "involvedObject": "garbage"},
        "not an object",
    ],
}


def test_events_become_intervals_and_points():
    where = {"media/image-resize-5d6c7b8a9-r4t5y": "l4-spot-0"}
    df = events_history(EVENTS, where)
    cond = df[df["signal"] == "condition"]
    assert len(cond) == 1 and (cond["end"] - cond["time"]).iloc[0] == pd.Timedelta(minutes=6)
    cordon = df[df["signal"] == "cordon"]
    assert len(cordon) == 1 and cordon["end"].isna().all()  # still cordoned at the capture
    assert df[df["signal"] == "pod_restart"]["node"].tolist() == ["l4-spot-0"]
    assert "a100-80-1" not in set(df["node"])


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    d = tmp_path_factory.mktemp("snap")
    sim = FleetSimulator(end=END)
    (d / "nodes.json").write_text(json.dumps(sim.nodes_json()))
    (d / "pods.json").write_text(json.dumps(sim.pods_json()))
    (d / "metrics.txt").write_text(sim.scrape_text())
    (d / "events.json").write_text(json.dumps(EVENTS))
    return d


def _run(monkeypatch, capsys, runbook, snap, tmp, *params):
    env = {"PYTHONPATH": str(ROOT), "GPUOPS_END": END.isoformat()}
    args = [
        "run",
        runbook,
        "--source",
        "snapshot",
        "--snapshot",
        str(snap),
        "--out",
        str(tmp),
        "-q",
        *params,
    ]
    code, _, _ = gpuops(monkeypatch, capsys, args, env=env, cwd=ROOT)
    return code, json.loads(next(tmp.rglob("findings.json")).read_text())


@pytest.mark.notebook
def test_node_health_on_a_snapshot_reads_events_and_the_xid_gauge(snap, tmp_path, monkeypatch, capsys):
    code, doc = _run(monkeypatch, capsys, "node_health", snap, tmp_path, "-p", "node", "dgx-h100-1")
    assert doc["errors"] == []
    top = doc["findings"][0]
    assert top["data"]["verdict"] == "faulted" and top["gpu"] == "5"  # the scrape's XID 79 gauge on GPU 5


@pytest.mark.notebook
def test_a_snapshot_without_the_xid_gauge_is_incomplete(snap, tmp_path, monkeypatch, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in ("nodes.json", "pods.json", "events.json"):
        (bare / f).write_text((snap / f).read_text())
    out = tmp_path / "out"
    code, doc = _run(monkeypatch, capsys, "node_health", bare, out, "-p", "node", "l4-spot-0")
    assert code == 3 and doc["errors"]
