"""The run store's retention bounds: count, age and bytes, the oldest finished runs pruned first and never a
queued, running or rendering one, nor one younger than the recent window; the defaults fit the shipped volume
(deploy/base/serve/deployment.yaml) and are declared with the other serve limits and in the README."""

from __future__ import annotations

import re
import time
from pathlib import Path

import yaml

from gpulib.core.knowledge import settings
from gpulib.serve.retention import Bounds, Retention
from gpulib.serve.store import RunStore
from tests.serve.test_app import AUTH, make, payload, xid

ROOT = Path(__file__).resolve().parents[2]
DAY = 86400


def _store(tmp_path, runs):
    """``runs``: (status, age in days, MiB) oldest first; their ids in that order."""
    s = RunStore(tmp_path / "runs")
    ids = []
    for status, days, mib in runs:
        rec = s.create("xid_ecc_triage", {"node": "n1"}, trigger={})
        s.update(rec["id"], status=status, created=time.time() - days * DAY, started=time.time())
        (s.folder(rec["id"]) / "report.html").write_bytes(b"x" * int(mib * 2**20))
        ids.append(rec["id"])
    return s, ids


def test_the_oldest_finished_runs_go_first_until_the_count_holds(tmp_path):
    s, ids = _store(tmp_path, [("done", 5, 0), ("failed", 4, 0), ("incomplete", 3, 0), ("done", 2, 0), ("done", 1, 0)])
    got = Retention(s, Bounds(runs=3, age_s=30 * DAY, bytes=2**40)).prune()
    assert got.ids == ids[:2] and got.runs == 3
    assert sorted(r["id"] for r in s.list()) == sorted(ids[2:])
    assert not s.folder(ids[0]).exists() and s.folder(ids[2]).exists()


def test_runs_older_than_the_age_bound_go(tmp_path):
    s, ids = _store(tmp_path, [("done", 40, 0), ("done", 31, 0), ("done", 29, 0)])
    got = Retention(s, Bounds(runs=100, age_s=30 * DAY, bytes=2**40)).prune()
    assert got.ids == ids[:2]


def test_the_bytes_bound_holds_and_a_queued_running_or_rendering_run_is_never_removed(tmp_path):
    s, ids = _store(
        tmp_path,
        [("queued", 9, 2), ("running", 8, 2), ("rendering", 7, 2), ("done", 6, 2), ("done", 5, 2), ("done", 1, 2)],
    )
    got = Retention(s, Bounds(runs=1, age_s=2 * DAY, bytes=7 * 2**20)).prune()
    assert got.ids == ids[3:6]  # every finished run: still over the bounds with the live ones, which stay
    assert [r["id"] for r in sorted(s.list(), key=lambda r: r["created"])] == ids[:3]
    s2, ids2 = _store(tmp_path / "b", [("done", 3, 2), ("done", 2, 2), ("done", 1, 2)])
    got = Retention(s2, Bounds(runs=100, age_s=30 * DAY, bytes=5 * 2**20)).prune()
    assert got.ids == ids2[:1] and got.bytes < 5 * 2**20


def test_a_run_younger_than_the_recent_window_is_kept_whatever_the_bounds(tmp_path):
    s, ids = _store(tmp_path, [("done", 0.001, 1), ("done", 0.002, 1)])
    got = Retention(s, Bounds(runs=0, age_s=0, bytes=0), keep_recent_s=900).prune()
    assert got.ids == [] and len(s.list()) == 2


def test_a_run_whose_run_json_cannot_be_read_is_pruned_by_age_too(tmp_path):
    s, ids = _store(tmp_path, [("done", 40, 0), ("done", 1, 0)])
    d = s.folder(ids[0])
    (d / "run.json").write_text("{")
    s = RunStore(tmp_path / "runs")  # restarted: the folder is not in the index
    old = d.with_name("20200101T000000Z-xid_ecc_triage-aaaaaa")
    d.rename(old)
    got = Retention(s, Bounds(runs=100, age_s=30 * DAY, bytes=2**40)).prune()
    assert got.ids == [old.name] and not old.exists()


def test_the_server_prunes_at_start(tmp_path):
    app, c = make(tmp_path)
    r = c.post("/alertmanager", json=payload([xid("dgx-h100-1", "5")]), headers=AUTH)
    (rid,) = r.json()["runs"]
    assert app.state.service.join(30)
    app.state.service.store.update(rid, created=time.time() - 400 * DAY)
    app2, c2 = make(tmp_path)
    end = time.monotonic() + 20
    while time.monotonic() < end and app2.state.retention.last is None:
        time.sleep(0.1)
    assert app2.state.retention.last.ids == [rid]
    assert c2.get(f"/runs/{rid}").status_code == 404
    assert c2.get("/healthz").json()["retention"]["pruned"] == 1


def _gib(q: str) -> float:
    n, unit = re.fullmatch(r"(\d+)(Gi|Mi)", q).groups()
    return int(n) / (1 if unit == "Gi" else 1024)


def test_the_default_bounds_fit_the_shipped_volume_and_are_documented():
    docs = list(yaml.safe_load_all((ROOT / "deploy/base/serve/deployment.yaml").read_text()))
    pvc = next(d for d in docs if d and d["kind"] == "PersistentVolumeClaim")
    volume = _gib(pvc["spec"]["resources"]["requests"]["storage"])
    lim = settings("serve_limits")
    retained = float(lim["retain_gib"])
    # room for the runs under way: a full alert queue of runs at 10.8 MB each (a report carrying its own plotly.js)
    in_flight = 50 * 10.8e6 / 2**30
    assert retained + in_flight <= volume, (retained, in_flight, volume)
    assert retained >= volume / 2  # and the volume is used, not left mostly empty
    b = Bounds()
    assert b.bytes == retained * 2**30 and b.runs == int(lim["retain_runs"])
    assert b.age_s == float(lim["retain_days"]) * DAY
    readme = (ROOT / "README.md").read_text()
    assert all(k in readme for k in ("retain_runs", "retain_days", "retain_gib"))
