"""A replica that is gone from a run store several share (``--claims kubernetes``; its heartbeat older than
``heartbeat_stale_s``, made here by setting the file's mtime): a live replica adopts the runs it accepted but never
started, exactly once (an atomic claim in the run's folder), and runs them; the gone replica's finished runs are
counted and pruned within the bounds by one live replica, and two replicas removing one folder never race into an
error. In a Deployment a restarted pod has a new name, so the gone replica's own restart never finds them."""

from __future__ import annotations

import os
import threading
import time

import pytest

import gpulib.serve.service as service_mod
from gpulib.core.knowledge import settings
from gpulib.serve import ServeConfig
from gpulib.serve.retention import Bounds, Retention
from gpulib.serve.service import Service
from gpulib.serve.store import REPLICAS, RunStore
from tests.serve.test_app import TOKEN, StubRunner

STALE = float(settings("render_settings")["heartbeat_stale_s"])
DAY = 86400


def _gone(root, replica):
    """The heartbeat of ``replica`` as a replica that stopped beating leaves it."""
    t = time.time() - STALE - 30
    os.utime(root / REPLICAS / replica, (t, t))


@pytest.fixture(autouse=True)
def no_api(monkeypatch):
    """Incident claims need an API server: each replica here claims every incident for itself."""
    monkeypatch.setattr(service_mod, "KubeClaims", lambda window: lambda key: True)


def _service(root, name, runner):
    cfg = ServeConfig.build(out=root, token=TOKEN, claims="kubernetes", replica=name, warm_kernels=0)
    return Service(cfg, runner)


def _accepted_by_a_gone_replica(root, n=1):
    """``n`` runs replica serve-a accepted (202) and never started before it went away."""
    a = RunStore(root, replica="serve-a")
    ids = []
    for i in range(n):
        rec = a.create("xid_ecc_triage", {"node": f"dgx-h100-{i}", "gpu": "5"}, trigger={"alertname": "GPUXidCritical"})
        a.update(rec["id"], priority=[0, 0], gpus=["5"])
        ids.append(rec["id"])
    _gone(root, "serve-a")
    return ids


def test_a_gone_replicas_accepted_runs_are_run_once_by_the_live_replicas(tmp_path):
    """Failed before: the runs stayed queued (or were shown interrupted) and no replica ever ran them."""
    root = tmp_path / "runs"
    ids = _accepted_by_a_gone_replica(root, 6)
    runners = {n: StubRunner(delay=0.01) for n in ("serve-b", "serve-c")}
    svcs = []
    starting = [threading.Thread(target=lambda n=n: svcs.append(_service(root, n, runners[n]))) for n in runners]
    for t in starting:  # both replicas start (and look for a gone replica's runs) at once
        t.start()
    for t in starting:
        t.join()
    end = time.monotonic() + 30
    while time.monotonic() < end:  # each adopts at its start and with each heartbeat
        if all(RunStore(root, replica="probe").get(i)["status"] == "done" for i in ids):
            break
        time.sleep(0.05)
    for s in svcs:
        assert s.join(30)
        s.close()
    ran = [params["node"] for r in runners.values() for _, params in r.calls]
    assert sorted(ran) == sorted(f"dgx-h100-{i}" for i in range(6))  # each once, by one replica or the other
    probe = RunStore(root, replica="probe")
    for i in ids:
        rec = probe.get(i)
        assert rec["status"] == "done" and rec["replica"] in runners, rec
        assert rec["adopted_from"] == "serve-a"


def test_a_live_replica_adopts_a_gone_replicas_run_once_and_never_a_live_replicas(tmp_path):
    root = tmp_path / "runs"
    a = RunStore(root, replica="serve-a")
    rec = a.create("xid_ecc_triage", {"node": "dgx-h100-1", "gpu": "5"}, trigger={})
    runner = StubRunner(delay=0)
    b = _service(root, "serve-b", runner)
    try:
        assert b.adopt() == [] and runner.calls == []  # serve-a still beats: its queued run is its own
        _gone(root, "serve-a")
        assert b.adopt() == [rec["id"]]
        assert b.join(30) and len(runner.calls) == 1
        assert b.adopt() == []  # adopted once
    finally:
        b.close()


def test_one_claim_wins_between_two_adopters_and_the_gone_replica_coming_back(tmp_path):
    """Two live replicas and the gone one restarting under its own name (a StatefulSet) all reach for one run:
    exactly one takes it; the others leave it alone (and drop it from their index)."""
    root = tmp_path / "runs"
    (rid,) = _accepted_by_a_gone_replica(root)
    for _ in range(20):
        stores = [RunStore(root, replica=n) for n in ("serve-b", "serve-c")]
        _gone(root, "serve-a")
        back = RunStore(root, replica="serve-a")  # it beats again, and lists the run as its own, not started
        got = []
        barrier = threading.Barrier(3)

        def take(s, rec):
            barrier.wait()
            got.append((s.replica, s.adopt(rec)))

        rec = back.get(rid)
        threads = [threading.Thread(target=take, args=(s, rec)) for s in (*stores, back)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [name for name, r in got if r is not None]
        assert len(winners) == 1, got
        on_disk = RunStore(root, replica="probe").get(rid)
        assert on_disk["replica"] == winners[0] and on_disk["status"] == "queued"
        for s in (*stores, back):
            assert (rid in {r["id"] for r in s.not_started()}) == (s.replica == winners[0])
        _gone(root, winners[0])  # the winner goes away in turn: the next round starts from its record
        for s in (*stores, back):
            if s.replica != winners[0]:
                _gone(root, s.replica)


def test_a_replica_whose_heartbeat_lagged_does_not_start_a_run_another_adopted(tmp_path):
    root = tmp_path / "runs"
    a = RunStore(root, replica="serve-a")
    rec = a.create("xid_ecc_triage", {"node": "dgx-h100-1", "gpu": "5"}, trigger={})
    _gone(root, "serve-a")  # alive, but its beats were late
    b = RunStore(root, replica="serve-b")
    assert b.adopt(b.get(rec["id"])) is not None
    assert a.claim(rec["id"]) is False  # serve-a's worker would have started it: it may not
    assert rec["id"] not in {r["id"] for r in a.not_started()}
    assert b.claim(rec["id"]) is True


def _finished(store, n, days):
    ids = []
    for i in range(n):
        rec = store.create("xid_ecc_triage", {"node": "n1"}, trigger={})
        store.update(rec["id"], status="done", created=time.time() - (days + n - i) * DAY, started=time.time())
        ids.append(rec["id"])
    return ids


def test_a_gone_replicas_finished_runs_are_pruned_within_the_bounds(tmp_path):
    """Failed before: each replica bounded only its own runs, so a gone replica's stayed forever."""
    root = tmp_path / "runs"
    a = RunStore(root, replica="serve-a")
    old = _finished(a, 5, 2)
    _gone(root, "serve-a")
    b, c = RunStore(root, replica="serve-b"), RunStore(root, replica="serve-c")
    mine = _finished(b, 1, 0)
    bounds = Bounds(runs=3, age_s=30 * DAY, bytes=2**40)
    got_c = Retention(c, bounds).prune()  # one live replica (the first by name) keeps the gone one's runs
    got_b = Retention(b, bounds).prune()
    assert got_c.ids == []
    assert got_b.ids == old[:3] and got_b.runs == 3
    left = {r["id"] for r in RunStore(root, replica="probe").list()}
    assert left == {*old[3:], *mine}
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == sorted(left)


def test_two_replicas_removing_one_run_never_race_into_an_error(tmp_path):
    root = tmp_path / "runs"
    a = RunStore(root, replica="serve-a")
    ids = _finished(a, 30, 40)
    for d in ids:  # some bytes to remove, so the removals overlap
        for k in range(20):
            (root / d / f"f{k}.bin").write_bytes(b"x" * 4096)
    _gone(root, "serve-a")
    stores = [RunStore(root, replica=n) for n in ("serve-b", "serve-c")]
    errors, removed = [], []
    barrier = threading.Barrier(2)

    def forget_all(s):
        barrier.wait()
        for i in ids:
            try:
                removed.append((s.replica, i, s.forget(i)))
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=forget_all, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(i for _, i, ok in removed if ok) == sorted(ids)  # each removed by exactly one of them
    assert [p.name for p in root.iterdir() if p.name not in (REPLICAS,) and not p.name.startswith("alerts")] == []


def test_a_gone_replicas_heartbeat_goes_once_nothing_of_it_is_left_to_adopt(tmp_path):
    """The folders are read for a gone replica only while it has runs to adopt; its heartbeat file then goes (in a
    Deployment every restart leaves one), and its runs still count as a gone replica's."""
    root = tmp_path / "runs"
    (rid,) = _accepted_by_a_gone_replica(root)
    b = RunStore(root, replica="serve-b")
    assert [r["id"] for r in b.orphans()] == [rid] and (root / REPLICAS / "serve-a").exists()
    assert b.adopt(b.get(rid)) is not None
    assert b.orphans() == [] and not (root / REPLICAS / "serve-a").exists()
    assert b.steward("serve-a")  # its finished runs are still kept within the bounds, by serve-b
