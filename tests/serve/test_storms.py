"""Alert storms (gpulib/serve/storms.py): one run per node and incident with the alerts' GPUs, later alerts attached
and listed on the run page, the repeat rules per XID class from gpulib/data/xid/xid_alert_repeat.csv, queue
priorities, and the accounting runs + attached + deduped (+ held) = alerts posted."""

from __future__ import annotations

import threading
import time

from fastapi.testclient import TestClient

from gpulib.serve import ServeConfig
from gpulib.serve.app import create_app
from gpulib.serve.pool import WorkerPool
from gpulib.serve.storms import Storms, load_rules, priority, xid_code
from tests.serve.test_app import AUTH, TOKEN, StubRunner, make, payload


def alert(node="n1", gpu="5", name="GPUXidCritical", severity="critical", code=79, starts="2026-12-01T06:00:00Z"):
    return {
        "status": "firing",
        "labels": {"alertname": name, "Hostname": node, "gpu": gpu, "severity": severity},
        "annotations": {"summary": f"XID {code} on {node} GPU {gpu}"},
        "startsAt": starts,
    }


class Gate:
    """A verdicter that waits until released, so a storm arrives while every run is still queued."""

    def __init__(self):
        self.open = threading.Event()

    def __call__(self, folder, runbook, params):
        assert self.open.wait(30)
        return None  # no fast verdict: the stub runner decides


def test_repeat_rules_come_from_the_table():
    rules, default = load_rules()
    for code in (13, 31, 43):  # NVIDIA counts repeats on one GPU over 24 h
        assert rules[code].alerts_to_open == 2 and rules[code].window_s == 24 * 3600, code
    assert rules[45].alerts_to_open == 1 and rules[45].solo_window_s > 0  # solo XID 45 is the actionable case
    assert 79 not in rules and 48 not in rules and default.alerts_to_open == 1
    assert Storms(60).rule(None) == default


def test_the_xid_code_is_read_from_the_label_or_our_summary():
    assert xid_code({"xid": "13"}, {}) == 13
    assert xid_code({}, {"summary": "XID 31 on n1 GPU 2"}) == 31
    assert xid_code({}, {"summary": "Uncorrectable (DBE) ECC errors on n1 GPU 2"}) is None
    assert xid_code({"xid": "13; rm -rf"}, {}) is None


def test_a_single_application_xid_is_held_and_its_repeat_opens_the_incident(tmp_path):
    stub = StubRunner(delay=0)
    app, c = make(tmp_path, stub)
    first = alert(gpu="2", name="GPUXidError", severity="warning", code=13)
    r = c.post("/alertmanager", json=payload([first]), headers=AUTH).json()
    assert r["held"] == 1 and not r["runs"]
    r = c.post("/alertmanager", json=payload([first]), headers=AUTH).json()  # Alertmanager re-sending it
    assert r["held"] == 0 and len(r["deduped"]) == 1 and not r["runs"]
    again = alert(gpu="2", name="GPUXidError", severity="warning", code=13, starts="2026-12-01T06:20:00Z")
    r = c.post("/alertmanager", json=payload([again]), headers=AUTH).json()
    assert len(r["runs"]) == 1, r  # the repeat within the window is the incident
    assert app.state.service.join(10)
    rec = c.get(f"/runs/{r['runs'][0]}/run.json").json()
    assert rec["trigger"]["repeats"] == 2 and rec["trigger"]["repeat_rule"] == "application"
    assert [e["action"] for e in app.state.service.store.alert_log()] == ["held", "dedupe", "run"]


def test_a_critical_xid_opens_the_incident_at_once(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    r = c.post("/alertmanager", json=payload([alert(code=79)]), headers=AUTH).json()
    assert len(r["runs"]) == 1 and r["held"] == 0


def test_a_storm_is_one_run_per_node_with_every_alert_accounted_for(tmp_path):
    gate, stub = Gate(), StubRunner(delay=0)
    app = create_app(ServeConfig.build(out=tmp_path / "runs", token=TOKEN, verdict_workers=1), stub, gate)
    c = TestClient(app)
    nodes, gpus, posts = ["n1", "n2", "n3"], ["0", "1", "2", "3"], 0
    answers = []
    for _ in range(3):  # each alert posted three times, in its own group per node
        for n in nodes:
            for g in gpus:
                answers.append(c.post("/alertmanager", json=payload([alert(n, g)], group=n), headers=AUTH).json())
                posts += 1
    runs = [rid for a in answers for rid in a["runs"]]
    attached = [rid for a in answers for rid in a["attached"]]
    deduped = [rid for a in answers for rid in a["deduped"]]
    # the first run may have left the queue before the other GPUs of its node came: one follow-up at most
    assert 3 <= len(runs) <= 4 and len(runs) + len(attached) + len(deduped) == posts == 36
    assert len(deduped) == 24 and sum(a["held"] for a in answers) == 0
    gate.open.set()
    assert app.state.service.join(30)
    svc = app.state.service
    for n in nodes:
        mine = [svc.store.get(r) for r in set(runs) if svc.store.get(r)["params"]["node"] == n]
        assert mine and all(r["status"] == "done" for r in mine)
        assert {g for r in mine for g in r["gpus"]} == set(gpus), mine  # the alerts' GPUs, none lost
        assert any(r["params"]["gpu"] == "" for r in mine) or len(mine) == len(gpus)
    rid = next(r for r in runs if svc.store.get(r).get("attached"))
    rec = svc.store.get(rid)
    page = c.get(f"/runs/{rid}").text
    assert f"later alerts of this incident ({len(rec['attached'])})" in page and "GPUXidCritical" in page
    assert "every GPU of the node is checked" in page


def test_an_alert_after_the_run_within_the_window_is_attached(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    rid = c.post("/alertmanager", json=payload([alert(gpu="5")]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(10)
    r = c.post("/alertmanager", json=payload([alert(gpu="5", name="GPUEccUncorrectable")], group="g2"), headers=AUTH)
    assert r.json()["attached"] == [rid]
    assert c.get(f"/runs/{rid}/run.json").json()["attached"][0]["alertname"] == "GPUEccUncorrectable"


def test_after_the_window_the_node_gets_a_repeat_run_at_repeat_priority(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0), dedupe_window=1)
    first = c.post("/alertmanager", json=payload([alert()]), headers=AUTH).json()["runs"][0]
    assert app.state.service.join(10)
    time.sleep(1.1)
    second = c.post("/alertmanager", json=payload([alert()]), headers=AUTH).json()["runs"][0]
    assert second != first
    svc = app.state.service
    assert svc.store.get(first)["priority"] == [0, 0] and svc.store.get(second)["priority"] == [0, 1]


def test_priorities_critical_first_then_first_runs_then_arrival():
    assert priority("critical", True) < priority("warning", False) < priority("info", False)
    assert priority("critical", False) < priority("critical", True)
    order, hold = [], threading.Event()

    def work(run_id):
        if run_id == "blocker":
            assert hold.wait(10)
        order.append(run_id)

    pool = WorkerPool(work, 1, 0)
    pool.submit("blocker", (0, 0))
    time.sleep(0.2)  # the blocker holds the only worker; the rest queue behind it
    for rid, sev, rep in [
        ("warn-first", "warning", False),
        ("crit-repeat", "critical", True),
        ("warn-repeat", "warning", True),
        ("crit-first", "critical", False),
        ("crit-first-2", "critical", False),
    ]:
        pool.submit(rid, priority(sev, rep))
    hold.set()
    assert pool.join(10)
    pool.stop()
    assert order == ["blocker", "crit-first", "crit-first-2", "crit-repeat", "warn-first", "warn-repeat"]


def test_a_node_gets_one_follow_up_run_for_every_gpu_not_one_per_gpu(tmp_path):
    # each run is out before the next GPU of the node alerts, so no queued run can be widened
    app, c = make(tmp_path, StubRunner(delay=0))
    svc, runs, attached = app.state.service, [], []
    for g in ("0", "1", "2", "3"):
        r = c.post("/alertmanager", json=payload([alert("n1", g)], group=f"g{g}"), headers=AUTH).json()
        runs += r["runs"]
        attached += r["attached"]
        assert svc.join(10)
    assert len(runs) == 2 and len(attached) == 2, (runs, attached)
    follow = svc.store.get(runs[1])
    assert follow["params"]["gpu"] == ""  # the follow-up checks every GPU of the node
    assert set(follow["gpus"]) == {"1", "2", "3"}  # and lists the GPUs alerted since


def test_a_run_whose_work_raises_is_reported_and_the_worker_goes_on(tmp_path):
    done, errors = [], []

    def work(run_id):
        if run_id == "bad":
            raise ValueError("a bug in the work")
        done.append(run_id)

    pool = WorkerPool(work, 1, 0, on_error=lambda rid, exc: errors.append((rid, str(exc))))
    for rid in ("bad", "good"):
        pool.submit(rid)
    assert pool.join(10)
    assert done == ["good"] and errors == [("bad", "a bug in the work")]
    pool.stop()


def test_a_run_the_server_could_not_finish_is_shown_failed_not_left_running(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    svc = app.state.service

    def broken(*a, **k):
        raise OSError("disk full")

    svc._close = broken  # what a full disk does to writing summary.md
    rid = c.post("/alertmanager", json=payload([alert()]), headers=AUTH).json()["runs"][0]
    assert svc.join(10)
    rec = svc.store.get(rid)
    assert rec["status"] == "failed" and "disk full" in rec["error"], rec


def test_renders_wait_while_verdicts_are_queued_so_a_storms_verdicts_come_first(tmp_path):
    """A render on this server's CPUs starts only when no verdict is waiting or running (up to
    ``verdicts_first_max_wait_s``): n1's verdict is out, but its notebook waits until n2's verdict is out too."""
    from tests.serve.test_app_verdict_first import _verdicter

    held, posted = threading.Event(), threading.Event()
    fast = _verdicter("critical", "XID 79")
    seen = {}

    def verdicter(folder, runbook, params):
        assert posted.wait(30)  # both alerts are in before the first verdict is out
        if params["node"] == "n2":
            assert held.wait(30)
        seen[params["node"]] = time.monotonic()
        return fast(folder, runbook, params)

    runner = StubRunner(delay=0)
    starts = []
    inner = runner.__call__

    def timed(folder, runbook, params, timeout):
        starts.append((params["node"], time.monotonic()))
        return inner(folder, runbook, params, timeout)

    cfg = ServeConfig.build(out=tmp_path / "runs", token=TOKEN, verdict_workers=1)
    app = create_app(cfg, timed, verdicter)
    c, svc = TestClient(app), app.state.service
    for node in ("n1", "n2"):
        c.post("/alertmanager", json=payload([alert(node)], group=node), headers=AUTH)
    posted.set()
    deadline = time.monotonic() + 10
    while "n1" not in seen and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    assert "n1" in seen and starts == []  # n1's verdict is out; its render waits for n2's
    held.set()
    assert svc.join(20)
    assert sorted(n for n, _ in starts) == ["n1", "n2"] and all(t >= seen["n2"] for _, t in starts)


# ------------------------------------------------------------------ NVIDIA's repeat rules: same GPU, 24 h
def _xid(gpu, code, starts, name="GPUXidError", seen=None, node="n1"):
    """A last-XID gauge alert (GPUXidError), or with ``seen`` the XID count metric's alert (GPUXidRepeatCount, the
    ``xid`` label and "seen N times" as our rules write them)."""
    a = alert(node=node, gpu=gpu, name=name, severity="warning", code=code, starts=starts)
    if seen is not None:
        a["labels"] = {**a["labels"], "alertname": "GPUXidRepeatCount", "xid": str(code)}
        a["annotations"] = {"summary": f"XID {code} seen {seen} times on {node} GPU {gpu}"}
    return a


def _post(c, a, group="g"):
    return c.post("/alertmanager", json=payload([a], group=group), headers=AUTH).json()


def test_an_xid_13_repeat_on_the_same_gpu_two_hours_later_opens_the_incident_through_the_count_metric(tmp_path):
    """The gauge does not change on a same-code repeat, so no new GPUXidError fires; the XID count metric's alert
    fires again (a new ``startsAt``) and serve counts it: 2 occurrences on GPU 2 within 24 h (RepeatedXID13...)."""
    app, c = make(tmp_path, StubRunner(delay=0))
    assert _post(c, _xid("2", 13, "2026-12-01T06:00:00Z"))["held"] == 1
    assert _post(c, _xid("2", 13, "2026-12-01T06:00:00Z", seen=1), group="g2")["held"] == 1  # the same XID
    r = _post(c, _xid("2", 13, "2026-12-01T08:00:00Z", seen=1), group="g3")
    assert len(r["runs"]) == 1, r
    assert app.state.service.join(10)
    trig = c.get(f"/runs/{r['runs'][0]}/run.json").json()["trigger"]
    assert trig["repeats"] == 2 and "DCGM_EXP_XID_ERRORS_COUNT" in trig["repeat_evidence"], trig


def test_an_xid_31_refire_on_the_same_gpu_within_24_h_opens_the_incident_and_says_it_was_a_refire(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    assert _post(c, _xid("3", 31, "2026-12-01T06:00:00Z"))["held"] == 1
    r = _post(c, _xid("3", 31, "2026-12-01T20:00:00Z"), group="g2")  # 14 h later: the gauge alert fired again
    assert len(r["runs"]) == 1, r
    assert app.state.service.join(10)
    trig = c.get(f"/runs/{r['runs'][0]}/run.json").json()["trigger"]
    assert trig["repeats"] == 2 and "re-fire" in trig["repeat_evidence"], trig


def test_an_application_xid_on_another_gpu_or_after_24_h_is_not_a_repeat(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    assert _post(c, _xid("2", 13, "2026-12-01T06:00:00Z"))["held"] == 1
    assert _post(c, _xid("5", 13, "2026-12-01T06:10:00Z"), group="g2")["held"] == 1  # another GPU of the node
    assert _post(c, _xid("2", 31, "2026-12-01T06:20:00Z"), group="g3")["held"] == 1  # another code
    assert _post(c, _xid("2", 13, "2026-12-02T06:30:00Z"), group="g4")["held"] == 1  # 24 h 30 min later
    assert _post(c, _xid("2", 13, "2026-12-01T06:00:00Z", seen=1, node="n2"), group="g5")["held"] == 1
    log = app.state.service.store.alert_log()
    assert [e["action"] for e in log] == ["held"] * 5
    assert all("24 h" in e["reason"] for e in log), log


def test_a_lone_xid_45_opens_the_incident_and_one_following_another_xid_of_the_gpu_is_ignored(tmp_path):
    app, c = make(tmp_path, StubRunner(delay=0))
    r = _post(c, _xid("1", 45, "2026-12-01T06:00:00Z"))
    assert len(r["runs"]) == 1 and r["held"] == 0, r  # solo: NVIDIA's action is to restart Fabric Manager
    assert _post(c, _xid("4", 43, "2026-12-01T07:00:00Z", node="n2"), group="g2")["held"] == 1
    r = _post(c, _xid("4", 45, "2026-12-01T07:00:30Z", node="n2"), group="g3")
    assert r["held"] == 1 and not r["runs"], r  # not solo: follow the other XID
    assert "not solo" in app.state.service.store.alert_log()[-1]["reason"]
    r = _post(c, _xid("6", 45, "2026-12-01T07:01:00Z", node="n2"), group="g4")  # another GPU: solo there
    assert len(r["runs"]) == 1, r


def test_the_storm_tables_keep_only_what_a_decision_can_still_use():
    """A long-running server sees new incident keys for ever (nodes come and go, each alert group is a new dedupe
    key): the tables behind the decisions keep an open incident for the dedupe window, a GPU's XID sightings for the
    longest repeat window and a node's run count (its repeat priority) for the run store's retention (retain_days);
    older entries are dropped, so 100 days of a new node's incident every hour leave bounded tables."""
    from gpulib.serve.config import limit

    s = Storms(60)
    keep_days = float(limit("retain_days"))
    t0, hour = 1_800_000_000.0, 3600.0
    for i in range(100 * 24):
        now = t0 + i * hour
        key = ("xid_ecc_triage", (("node", f"node-{i}"),))
        s.sight((key, "0"), 31, ("GPUXidCritical", str(i)), now, None, now=now)
        s.opened(key, f"run-{i}", "0", now=now)
    sizes = s.sizes()
    live_runs = keep_days * 24
    assert sizes["runs"] <= 2 * live_runs + 64, sizes  # pruned once it doubles: at most twice what is live
    assert sizes["open"] <= 64 and sizes["sightings"] <= 2 * 24 + 64, sizes
    last = t0 + (100 * 24 - 1) * hour
    s.prune(last)
    assert s.sizes()["runs"] <= live_runs + 1
    assert s.is_repeat(("xid_ecc_triage", (("node", f"node-{100 * 24 - 1}"),)), now=last)
    assert not s.is_repeat(("xid_ecc_triage", (("node", "node-0"),)), now=last)  # older than the store keeps runs


def test_the_dedupe_table_drops_keys_past_the_window():
    """Every alert group is a key of its own (a payload's groupKey): without pruning, the dedupe table grows by one
    entry per alert for the life of the server."""
    from gpulib.serve import routing
    from gpulib.serve.routing import Deduper

    clock = [1_800_000_000.0]
    real = routing.time.time
    routing.time.time = lambda: clock[0]
    try:
        d = Deduper(1)
        for i in range(5000):
            clock[0] += 0.5
            key = Deduper.key(f"group-{i}", "xid_ecc_triage", {"node": "n", "gpu": "0"})
            assert d.lookup(key) is None
            d.remember(key, f"run-{i}")
            assert d.lookup(key) == f"run-{i}"
        assert len(d) <= 2 * 2 + 64  # two keys are within the 1 s window at any time
    finally:
        routing.time.time = real
