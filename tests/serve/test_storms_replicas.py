"""Two ``gpuops serve`` processes (replicas) with ``--claims kubernetes`` against the Kubernetes API double
(tests/helpers/k8s_double.py): the same incident posted to both, several times and at once, gives one run; the
other replica answers ``elsewhere``; the incident's coordination.k8s.io Lease names the replica that holds it; an
API that cannot answer the claim does not lose the alert."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from gpulib.serve.storms import lease_name
from tests.helpers.k8s_double import start_k8s_double
from tests.helpers.pinned import DEMO_END, ROOT
from tests.serve.test_app import AUTH, TOKEN, payload, xid
from tests.serve.test_e2e import free_port, procs, spawn, wait_for  # noqa: F401 (procs is a fixture)


@pytest.fixture
def api(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", ",".join(filter(None, [os.environ.get("NO_PROXY", ""), "127.0.0.1"])))
    (tmp_path / "k8s").mkdir()
    double = start_k8s_double(tmp_path / "k8s")
    yield double
    double.stop()


def _replica(started, tmp_path, name, port, kubeconfig, store=None):
    env = dict(
        os.environ,
        POD_NAME=f"serve-{name}",
        PYTHONPATH=str(ROOT),
        GPUOPS_END=DEMO_END.isoformat(),
        KUBECONFIG=str(kubeconfig),
        GPUOPS_SERVE_TOKEN=TOKEN,
        NO_PROXY="127.0.0.1",
    )
    out = store or tmp_path / f"runs-{name}"
    argv = [sys.executable, "-m", "gpulib.cli", "serve", "--port", str(port), "--out", str(out)]
    argv += ["--claims", "kubernetes", "--kernels", "1", "--warm-kernels", "0", "--verdict", "notebook"]
    spawn(started, argv, tmp_path / f"serve-{name}.log", env)
    base = f"http://127.0.0.1:{port}"
    wait_for(f"replica {name}", lambda: requests.get(f"{base}/healthz", timeout=2).ok, 90, every=0.5)
    return base


@pytest.mark.notebook
def test_two_replicas_run_one_incident_once(tmp_path, api, procs):  # noqa: F811
    bases = [_replica(procs, tmp_path, n, free_port(), api.kubeconfig) for n in ("a", "b")]
    body = payload([xid(node="dgx-h100-1", gpu="5")], group="storm")

    def post(base):
        return requests.post(f"{base}/alertmanager", json=body, headers=AUTH, timeout=30).json()

    with ThreadPoolExecutor(6) as ex:  # three posts of the one alert to each replica, all at once
        answers = list(ex.map(post, bases * 3))
    runs = [r for a in answers for r in a["runs"]]
    deduped = sum(len(a["deduped"]) for a in answers)
    elsewhere = sum(a["elsewhere"] for a in answers)
    assert len(runs) == 1, answers  # one incident, one run, whichever replica claimed it
    assert len(runs) + deduped + elsewhere + sum(len(a["attached"]) for a in answers) == 6
    owner = next(i for i, b in enumerate(bases) if requests.get(f"{b}/runs?format=json", timeout=5).json())
    other = bases[1 - owner]
    assert requests.get(f"{other}/runs?format=json", timeout=5).json() == []
    lease = next(
        v for (ns, n), v in api.leases.items() if n == lease_name(("xid_ecc_triage", (("node", "dgx-h100-1"),)))
    )
    assert lease["spec"]["holderIdentity"].startswith("gpuops-serve@")
    # another node is another incident: claimed (once) too
    body = payload([xid(node="a100-80-0", gpu="1")], group="storm")
    with ThreadPoolExecutor(2) as ex:
        answers = list(ex.map(post, bases))
    assert sum(len(a["runs"]) for a in answers) == 1 and sum(a["elsewhere"] for a in answers) == 1


@pytest.mark.notebook
def test_two_replicas_on_one_run_store_run_one_incident_once_and_both_show_it(tmp_path, api, procs):  # noqa: F811
    store = tmp_path / "runs"
    bases = [_replica(procs, tmp_path, n, free_port(), api.kubeconfig, store) for n in ("a", "b")]
    body = payload([xid(node="dgx-h100-1", gpu="5")], group="storm")

    def post(base):
        return requests.post(f"{base}/alertmanager", json=body, headers=AUTH, timeout=30).json()

    with ThreadPoolExecutor(6) as ex:
        answers = list(ex.map(post, bases * 3))
    (run_id,) = [r for a in answers for r in a["runs"]]
    assert sum(a["elsewhere"] for a in answers) + sum(len(a["deduped"]) for a in answers) == 5

    def finished():
        rec = requests.get(f"{bases[0]}/runs/{run_id}/run.json", timeout=5).json()
        return rec if rec["status"] not in ("queued", "running", "rendering") else None

    rec = wait_for("the run", finished, 180, every=1)
    assert rec["status"] == "done" and rec["severity"] == "critical", rec
    assert rec["replica"] in ("serve-a", "serve-b")
    # both replicas answer for it from the one store: the record, the list, the page
    assert requests.get(f"{bases[1]}/runs/{run_id}/run.json", timeout=5).json() == rec
    for b in bases:
        assert [r["id"] for r in requests.get(f"{b}/runs?format=json", timeout=5).json()] == [run_id]
        assert "XID 79" in requests.get(f"{b}/runs/{run_id}", timeout=5).text
    assert sorted(p.name for p in (store / ".replicas").iterdir()) == ["serve-a", "serve-b"]


def test_an_unanswerable_claim_runs_the_incident_here(tmp_path):
    from fastapi.testclient import TestClient

    from gpulib.serve import ServeConfig
    from gpulib.serve.app import create_app
    from tests.serve.test_app import StubRunner

    app = create_app(ServeConfig.build(out=tmp_path / "runs", token=TOKEN), StubRunner(delay=0))

    def down(key):
        raise ConnectionError("API server unreachable")

    app.state.service.claims = down
    r = TestClient(app).post("/alertmanager", json=payload([xid()]), headers=AUTH).json()
    assert len(r["runs"]) == 1 and r["elsewhere"] == 0
    rec = app.state.service.store.get(r["runs"][0])
    assert "API server unreachable" in rec["trigger"]["claim_error"]
