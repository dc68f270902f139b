"""gpulib.serve.jobs: notebook renders as Kubernetes Jobs (``gpuops serve --renders kubernetes``), against the API
double (tests/helpers/k8s_double.py: its ``job_hook`` runs the Job's container command here, as the kubelet would in
the pod) and, for the Job object itself, the real ``kubectl create --dry-run=server`` against the kubectl double."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from gpulib.catalogue import find_notebook
from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import settings
from gpulib.execute import prepare
from gpulib.kube.client import KubeCluster
from gpulib.run.record import OUTCOME_FILE, PARAMS_FILE, read_verdict
from gpulib.serve.jobs import (
    JobRenders,
    RenderTarget,
    job_manifest,
    job_name,
    own_pod_target,
)
from tests.helpers.commandcheck import Checker, schema_problems
from tests.helpers.kubectl_double import KubectlDouble
from tests.helpers.pinned import DEMO_END, ROOT

IMAGE = "registry.example.com/gpu-runbooks:1.4.0"
NS = "gpu-runbooks"


@pytest.fixture
def api(k8s_double):
    """The API double of tests/helpers/k8s_double.py (its ``k8s_double`` fixture), named as these tests use it."""
    return k8s_double


def _cluster(api) -> KubeCluster:
    return KubeCluster(kubeconfig=str(api.kubeconfig))


def _pod(mount="/runs", volume=None) -> dict:
    volume = volume or {"name": "runs", "persistentVolumeClaim": {"claimName": "gpuops-serve-runs-rwx"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpuops-serve-7d9f-abcde", "namespace": NS},
        "spec": {
            "nodeName": "cpu-node-1",
            "containers": [
                {"name": "sidecar", "image": "busybox:1.36"},
                {"name": "serve", "image": IMAGE, "volumeMounts": [{"name": "runs", "mountPath": mount}]},
            ],
            "volumes": [volume],
        },
        "status": {"phase": "Running"},
    }


def test_the_server_pod_names_the_image_and_the_claim_of_its_run_store(api, tmp_path):
    api.pods.append(_pod())
    env = {"POD_NAME": "gpuops-serve-7d9f-abcde", "POD_NAMESPACE": NS}
    got = own_pod_target(_cluster(api), "/runs", env=env)
    assert got == RenderTarget(NS, IMAGE, "gpuops-serve-runs-rwx", "/runs")
    # what is given wins, and with all three given the pod is not read
    assert own_pod_target(None, "/runs", image="x:1", claim="c", namespace="n", env={}).image == "x:1"
    with pytest.raises(InvalidParameter, match="POD_NAME and POD_NAMESPACE"):
        own_pod_target(_cluster(api), "/runs", env={})
    with pytest.raises(InvalidParameter, match="no container .* mounts --out /elsewhere"):
        own_pod_target(_cluster(api), "/elsewhere", env=env)
    api.pods[-1] = _pod(volume={"name": "runs", "emptyDir": {}})
    with pytest.raises(InvalidParameter, match="not a PersistentVolumeClaim"):
        own_pod_target(_cluster(api), "/runs", env=env)


def test_the_render_job_is_the_template_with_the_run_filled_in():
    target = RenderTarget(NS, IMAGE, "gpuops-serve-runs-rwx", "/runs")
    run_id = "20261201T064500Z-xid_ecc_triage-3f9a"
    job = job_manifest(target, run_id, "xid_ecc_triage", 600)
    name = job["metadata"]["name"]
    assert name == job_name(run_id) and len(name) <= 63 and name == name.lower() and "_" not in name
    assert job["metadata"]["namespace"] == NS and job["metadata"]["annotations"]["gpu-runbooks.io/run-id"] == run_id
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 600 + settings("render_settings")["start_grace_s"]
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == IMAGE
    folder = f"/runs/{run_id}"
    assert c["args"][:6] == ["run", "xid_ecc_triage", "--run-dir", folder, "--params-file", f"{folder}/{PARAMS_FILE}"]
    assert {"name": "runs", "mountPath": "/runs"} in c["volumeMounts"]
    assert {"name": "runs", "persistentVolumeClaim": {"claimName": "gpuops-serve-runs-rwx"}} in pod["volumes"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "gpuops-render"


def test_kubectl_accepts_the_render_job_with_a_server_side_dry_run(tmp_path):
    double = KubectlDouble([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}], token=None).start()
    try:
        double.write_kubeconfig(tmp_path / "kubeconfig")
        job = job_manifest(RenderTarget(NS, IMAGE, "gpuops-serve-runs-rwx", "/runs"), "r-1", "fleet_overview", 300)
        text = yaml.safe_dump(job, sort_keys=False)
        assert schema_problems(text) == []
        chk = Checker(tmp_path / "chk", files={"render-job.yaml": text}, double=double)
        # --validate=false: the double serves no OpenAPI document; schema_problems checked the same schema above
        assert chk.check("kubectl create --validate=false -f render-job.yaml") == []
        assert chk.modes == {"dry-run=server": 1}, chk.modes
        assert double.dry_runs == [("POST", f"jobs/{job_name('r-1')}")]
    finally:
        double.stop()


def _in_pod(store, env):
    """The Job's pod, here: its container's arguments run as a gpuops process (the run store is the same path)."""

    def run(job):
        (c,) = job["spec"]["template"]["spec"]["containers"]
        assert c["volumeMounts"][0]["mountPath"] == str(store)
        res = subprocess.run(
            [sys.executable, "-m", "gpulib.cli", *c["args"]], env=env, capture_output=True, text=True, timeout=300
        )
        return "Complete" if res.returncode == 0 else f"Failed: exit {res.returncode}: {res.stderr[-300:]}"

    return run


@pytest.mark.notebook
def test_a_run_rendered_by_its_job_has_the_notebook_and_the_outcome_of_the_run(api, tmp_path):
    store = tmp_path / "runs"
    folder = store / "20261201T064500Z-xid_ecc_triage-job1"
    folder.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUOPS_END=DEMO_END.isoformat())
    api.job_hook = _in_pod(store, env)
    params = prepare(find_notebook("xid_ecc_triage"), given={"node": "dgx-h100-1", "gpu": "5"}, source="demo")
    renders = JobRenders(_cluster(api), RenderTarget(NS, IMAGE, "c", str(store)))
    got = renders(folder, "xid_ecc_triage", params, 300)
    assert got["status"] == "done", got
    assert json.loads((folder / PARAMS_FILE).read_text()) == json.loads(json.dumps(params, default=str))
    assert (folder / "xid_ecc_triage.html").is_file() and (folder / OUTCOME_FILE).is_file()
    # the verdict is the notebook's own (findings.json in the run folder): XID 79 on that GPU is critical
    assert got["verdict"] == read_verdict(folder) and got["verdict"]["severity"] == "critical", got
    (job,) = api.jobs.values()
    assert job["status"]["conditions"][0]["type"] == "Complete"


def test_a_job_that_failed_before_it_wrote_an_outcome_is_a_failed_render_with_the_jobs_reason(api, tmp_path):
    folder = tmp_path / "runs" / "r-oom"
    folder.mkdir(parents=True)
    api.job_hook = lambda job: "Failed: the pod was OOMKilled"
    renders = JobRenders(_cluster(api), RenderTarget(NS, IMAGE, "c", str(tmp_path / "runs")), sleep=lambda s: None)
    got = renders(folder, "fleet_overview", {"source": "demo"}, 60)
    assert got["status"] == "failed" and "OOMKilled" in got["error"] and got["verdict"] is None, got


def test_a_job_past_its_deadline_is_deleted_and_the_render_failed(api, tmp_path):
    folder = tmp_path / "runs" / "r-stuck"
    folder.mkdir(parents=True)
    now = [0.0]

    def sleep(s):
        now[0] += 50

    renders = JobRenders(
        _cluster(api), RenderTarget(NS, IMAGE, "c", str(tmp_path / "runs")), clock=lambda: now[0], sleep=sleep
    )
    got = renders(folder, "fleet_overview", {"source": "demo"}, 60)  # no hook: the Job never finishes
    assert got["status"] == "failed" and "timed out" in got["error"], got
    assert api.jobs == {} and f"job/{job_name('r-stuck')}" in api.deleted
    assert now[0] >= 60 + settings("render_settings")["start_grace_s"]


def test_a_job_the_api_refuses_is_a_failed_render_naming_the_job(api, tmp_path):
    folder = tmp_path / "runs" / "r-forbidden"
    folder.mkdir(parents=True)
    api.fail(f"/apis/batch/v1/namespaces/{NS}/jobs", 403, method="POST")
    renders = JobRenders(_cluster(api), RenderTarget(NS, IMAGE, "c", str(tmp_path / "runs")))
    got = renders(folder, "fleet_overview", {"source": "demo"}, 60)
    assert got["status"] == "failed" and job_name("r-forbidden") in got["error"], got
    assert "kubectl auth can-i create jobs" in got["error"]  # the client's RBAC hint


@pytest.mark.notebook
def test_a_server_with_renders_kubernetes_gives_its_verdict_first_and_each_runs_evidence_from_a_job(
    api, tmp_path, monkeypatch
):
    """``gpuops serve --renders kubernetes`` end to end in one process: the alert's fast verdict is out at once, its
    notebook is a Job created from the server's pod (its image and claim), and the run's page shows the render the
    Job rendered (the job hook runs the Job's command here)."""
    from fastapi.testclient import TestClient

    from gpulib.serve import ServeConfig
    from gpulib.serve.app import create_app
    from tests.serve.test_app import AUTH, TOKEN, payload, xid

    store = tmp_path / "runs"
    api.pods.append(_pod(mount=str(store)))
    monkeypatch.setenv("KUBECONFIG", str(api.kubeconfig))
    monkeypatch.setenv("POD_NAME", "gpuops-serve-7d9f-abcde")
    monkeypatch.setenv("POD_NAMESPACE", NS)
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    seen = []
    in_pod = _in_pod(store, dict(os.environ, PYTHONPATH=str(ROOT)))

    def pod(job):
        (c,) = job["spec"]["template"]["spec"]["containers"]
        seen.append((c["image"], job["spec"]["template"]["spec"]["volumes"][0], c["args"][3]))
        return in_pod(job)

    api.job_hook = pod
    cfg = ServeConfig.build(out=store, token=TOKEN, renders="kubernetes", verdict_in="threads", warm_kernels=0)
    app = create_app(cfg)
    svc = app.state.service
    try:
        r = TestClient(app).post("/alertmanager", json=payload([xid()]), headers=AUTH).json()
        (run_id,) = r["runs"]
        assert svc.join(240)
        rec = svc.store.get(run_id)
        assert rec["verdict_by"] == "fast" and rec["severity"] == "critical", rec  # XID 79 on dgx-h100-1 GPU 5
        assert rec["render"] == "done" and not rec.get("verdict_changed"), rec
        assert (store / run_id / "xid_ecc_triage.html").is_file()
        assert seen == [
            (
                IMAGE,
                {"name": "runs", "persistentVolumeClaim": {"claimName": "gpuops-serve-runs-rwx"}},
                str(store / run_id),
            )
        ]
        assert json.loads((store / run_id / PARAMS_FILE).read_text())["node"] == "dgx-h100-1"
    finally:
        svc.close()
