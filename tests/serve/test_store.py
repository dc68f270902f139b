"""gpulib.serve.store: run folders, the index rebuilt at start, and one store shared by several replicas."""

from __future__ import annotations

import os
import time

from gpulib.core.knowledge import settings
from gpulib.serve.store import REPLICAS, RunStore

STALE = settings("render_settings")["heartbeat_stale_s"]


def _age(store_root, replica, seconds):
    p = store_root / REPLICAS / replica
    t = time.time() - seconds
    os.utime(p, (t, t))


def test_a_restarted_server_marks_its_cut_short_runs_interrupted(tmp_path):
    # a run accepted but never started is no longer marked interrupted; it is handed to the server to run
    # again (not_started). A run that had started is still marked interrupted.
    s = RunStore(tmp_path)
    queued = s.create("fleet_overview", {}, trigger={"kind": "manual"})
    running = s.create("fleet_overview", {}, trigger={"kind": "manual"})
    s.update(running["id"], status="running", started=time.time())
    done = s.create("fleet_overview", {}, trigger={"kind": "manual"})
    s.update(done["id"], status="done", finished=time.time())
    again = RunStore(tmp_path)
    assert again.get(running["id"])["status"] == "failed" and "interrupted" in again.get(running["id"])["error"]
    assert again.get(queued["id"])["status"] == "queued"
    assert [r["id"] for r in again.not_started()] == [queued["id"]]
    assert again.get(done["id"])["status"] == "done"


def test_replicas_on_one_store_see_each_others_runs_and_never_cut_a_live_ones_short(tmp_path):
    a = RunStore(tmp_path, replica="serve-a")
    b = RunStore(tmp_path, replica="serve-b")
    run = a.create("xid_ecc_triage", {"node": "n1", "gpu": "5"}, trigger={"kind": "alert"})
    assert run["replica"] == "serve-a"
    assert b.get(run["id"])["status"] == "queued"  # read from its folder
    assert [r["id"] for r in b.list()] == [run["id"]] and len(b) == 0  # listed, not indexed
    a.update(run["id"], status="running")
    b_again = RunStore(tmp_path, replica="serve-b")  # b restarts while a is alive
    assert b_again.get(run["id"])["status"] == "running"
    assert a.get(run["id"])["status"] == "running"
    a.log_alert({"by": "serve-a"})
    b.log_alert({"by": "serve-b"})  # each appends to its own file; either reads both
    assert sorted(e["by"] for e in b.alert_log()) == ["serve-a", "serve-b"]
    assert b.get("../etc") is None and b.get(".replicas") is None


def test_the_runs_of_a_replica_that_stopped_beating_are_shown_interrupted(tmp_path):
    a = RunStore(tmp_path, replica="serve-a")
    run = a.create("xid_ecc_triage", {"node": "n1", "gpu": "5"}, trigger={"kind": "alert"})
    a.update(run["id"], status="running")
    b = RunStore(tmp_path, replica="serve-b")
    _age(tmp_path, "serve-a", STALE - 5)
    assert b.get(run["id"])["status"] == "running"  # a late beat is not a gone replica
    _age(tmp_path, "serve-a", STALE + 5)
    got = b.get(run["id"])
    assert got["status"] == "failed" and "interrupted" in got["error"]
    assert RunStore(tmp_path, replica="serve-a").get(run["id"])["status"] == "failed"  # recorded in its folder
    a.beat()
    assert time.time() - (tmp_path / REPLICAS / "serve-a").stat().st_mtime < 5


def test_a_replica_restarting_under_its_own_name_takes_its_runs_back(tmp_path):
    a = RunStore(tmp_path, replica="serve-a")
    run = a.create("fleet_overview", {}, trigger={"kind": "manual"})
    a.update(run["id"], status="rendering", verdict_status="done")
    again = RunStore(tmp_path, replica="serve-a")
    got = again.get(run["id"])
    assert got["status"] == "done" and got["render"] == "failed" and len(again) == 1
