"""Notebook renders as Kubernetes Jobs (``gpuops serve --renders kubernetes``): the evidence of a run is rendered by a
Job from the server's own image instead of a kernel next to the server, so renders scale with the cluster, not with
the server's pod.

The server writes the run's parameters to ``params.json`` in the run folder (the run store every replica mounts),
creates the Job of ``gpulib/data/serve/render_job.yaml`` (:func:`job_manifest`: the name, namespace, image, arguments,
deadline and the store's claim filled in) and reads its status every ``poll_s`` until it completes or fails
(``gpulib/data/serve/render_settings.csv``). The Job runs ``gpuops run <runbook> --run-dir <run folder> --params-file
<run folder>/params.json``, which leaves the notebook, its HTML, ``findings.json`` and ``outcome.json`` (the run's
outcome as :func:`gpulib.run.record.outcome` has it) in the folder; the outcome is read from there, and a Job that
failed without one is a failed render with the Job's reason. A Job past its deadline is deleted (its pod with it).

Where the Job runs and with what: the server's own pod (``POD_NAME``/``POD_NAMESPACE`` from the downward API,
deploy/base/serve/deployment.yaml) names its image and the claim of the volume mounted at ``--out``
(:func:`own_pod_target`); ``--render-image``/``--render-claim``/``--render-namespace`` name them otherwise.
Jobs API: https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from gpulib.core.errors import GpulibError, InvalidParameter, KubernetesError, redact
from gpulib.core.knowledge import data_path, settings
from gpulib.kube.client import _Call
from gpulib.run.record import PARAMS_FILE, Status, read_outcome, write_params

#: the Job template and its settings (gpulib/data/serve/)
TEMPLATE = "render_job.yaml"
SETTINGS = "render_settings"
#: what the server and the Job exchange through the run folder
#: the container of the template whose image, arguments and mounts are filled in
CONTAINER = "render"
#: the template's volume that is the run store
STORE_VOLUME = "runs"
#: annotation naming the run a Job renders (a run id is not always a valid label value)
RUN_ANNOTATION = "gpu-runbooks.io/run-id"


def job_name(run_id: str) -> str:
    """The Job of a run: a DNS-1123 name from the run id's hash (run ids hold ``_`` and capitals)."""
    return "gpuops-render-" + hashlib.sha256(run_id.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class RenderTarget:
    """Where render Jobs run: ``namespace``, the ``image`` (the server's), the run store's ``claim`` and the path
    ``mount`` it is mounted at (the server's ``--out``, so a run folder has one path everywhere)."""

    namespace: str
    image: str
    claim: str
    mount: str


def own_pod_target(
    cluster, out: Path, *, image: str = "", claim: str = "", namespace: str = "", env=os.environ
) -> RenderTarget:
    """The RenderTarget of the server's own pod: its namespace, the image of its container that mounts ``out`` and
    the PersistentVolumeClaim mounted there; ``image``/``claim``/``namespace`` given win. InvalidParameter (a usage
    error) when something needed is neither given nor readable from the pod."""
    mount = str(Path(out).resolve())
    if image and claim and namespace:
        return RenderTarget(namespace, image, claim, mount)
    name, ns = env.get("POD_NAME", ""), env.get("POD_NAMESPACE", "")
    if not name or not ns:
        raise InvalidParameter(
            "--renders kubernetes needs the server's pod (POD_NAME and POD_NAMESPACE from the downward API, as "
            "deploy/base/serve/deployment.yaml sets them) or --render-image, --render-claim and --render-namespace"
        )
    call = _Call("get", "pods", f"/api/v1/namespaces/{ns}/pods/{name}", "", ns)
    pod = cluster._request(cluster.core.read_namespaced_pod, call, name=name, namespace=ns)
    spec = pod.get("spec") or {}
    for c in spec.get("containers") or []:
        for m in c.get("volumeMounts") or []:
            if str(Path(m.get("mountPath", "")).resolve()) != mount:
                continue
            vol = next((v for v in spec.get("volumes") or [] if v.get("name") == m.get("name")), {})
            pvc = (vol.get("persistentVolumeClaim") or {}).get("claimName", "")
            if not (claim or pvc):
                raise InvalidParameter(
                    f"--out {mount} is the volume {m.get('name')!r} of pod {ns}/{name}, not a PersistentVolumeClaim: "
                    "render Jobs need the run store on a claim every pod can mount (ReadWriteMany)"
                )
            return RenderTarget(namespace or ns, image or c.get("image", ""), claim or pvc, mount)
    raise InvalidParameter(
        f"no container of pod {ns}/{name} mounts --out {mount}: render Jobs write the run folders there"
    )


def job_manifest(target: RenderTarget, run_id: str, runbook: str, timeout: float) -> dict[str, Any]:
    """The render Job of one run: the template with the name, namespace, image, arguments, deadline and the run
    store's claim (mounted at ``target.mount``) filled in."""
    job = copy.deepcopy(_template())
    folder = f"{target.mount.rstrip('/')}/{run_id}"
    meta = job["metadata"]
    meta.update(name=job_name(run_id), namespace=target.namespace)
    meta.setdefault("annotations", {})[RUN_ANNOTATION] = run_id
    spec = job["spec"]
    spec["activeDeadlineSeconds"] = int(timeout) + int(settings(SETTINGS)["start_grace_s"])
    pod = spec["template"]["spec"]
    c = next(c for c in pod["containers"] if c["name"] == CONTAINER)
    c["image"] = target.image
    c["args"] = ["run", runbook, "--run-dir", folder, "--params-file", f"{folder}/{PARAMS_FILE}", "--quiet"]
    c["args"] += ["--fail-on", "never"]  # the verdict is in outcome.json; the exit code says only that it ran
    for m in c["volumeMounts"]:
        if m["name"] == STORE_VOLUME:
            m["mountPath"] = target.mount
    for v in pod["volumes"]:
        if v["name"] == STORE_VOLUME:
            v["persistentVolumeClaim"]["claimName"] = target.claim
    return job


@functools.lru_cache(maxsize=1)
def _template() -> dict[str, Any]:  # read once; job_manifest deep-copies it
    return yaml.safe_load(data_path(TEMPLATE).read_text())


class JobRenders:
    """A runner (``(folder, runbook, params, timeout) -> outcome``, :mod:`gpulib.serve.runner`) that renders each run
    as a Kubernetes Job (module docstring). ``clock``/``sleep`` are for tests."""

    def __init__(
        self,
        cluster,
        target: RenderTarget,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.cluster, self.target = cluster, target
        self.clock, self.sleep = clock, sleep
        self.poll_s = float(settings(SETTINGS)["poll_s"])

    def _api(self):
        from kubernetes import client

        return client.BatchV1Api(self.cluster.api_client)

    def _path(self, name: str = "") -> str:
        base = f"/apis/batch/v1/namespaces/{self.target.namespace}/jobs"
        return f"{base}/{name}" if name else base

    def create(self, job: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        ns = self.target.namespace
        kw = {"dry_run": "All"} if dry_run else {}
        call = _Call("create", "jobs", self._path(), "batch", ns)
        return self.cluster._request(self._api().create_namespaced_job, call, namespace=ns, body=job, **kw)

    def status(self, name: str) -> dict[str, Any]:
        ns = self.target.namespace
        call = _Call("get", "jobs", self._path(name), "batch", ns)
        return self.cluster._request(self._api().read_namespaced_job_status, call, name=name, namespace=ns)

    def delete(self, name: str) -> None:
        ns = self.target.namespace
        call = _Call("delete", "jobs", self._path(name), "batch", ns)
        try:  # the Job's pod goes with it (background propagation)
            self.cluster._request(
                self._api().delete_namespaced_job, call, name=name, namespace=ns, propagation_policy="Background"
            )
        except KubernetesError as exc:
            if exc.status != 404:
                raise

    def __call__(self, folder: Path, runbook: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        folder = Path(folder)
        write_params(folder, params)
        job = job_manifest(self.target, folder.name, runbook, timeout)
        name = job["metadata"]["name"]
        try:
            self.create(job)
        except GpulibError as exc:
            return _failed(f"render Job {self.target.namespace}/{name} could not be created: {exc}")
        deadline = self.clock() + job["spec"]["activeDeadlineSeconds"] + 2 * self.poll_s
        while True:
            try:
                state = finished(self.status(name))
            except GpulibError as exc:
                state = ("failed", f"render Job {self.target.namespace}/{name} cannot be read: {exc}")
            if state:
                break
            if self.clock() > deadline:
                self.delete(name)
                state = ("failed", f"timed out: render Job {self.target.namespace}/{name} ran past its deadline")
                break
            self.sleep(self.poll_s)
        got = read_outcome(folder)
        if got is not None:
            return got
        return _failed(state[1])


def finished(job: dict[str, Any]) -> tuple[str, str] | None:
    """``("done" | "failed", why)`` once a Job has the condition Complete or Failed, else None
    (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/job-v1/#JobStatus)."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") != "True":
            continue
        if c.get("type") == "Complete":
            return "done", ""
        if c.get("type") == "Failed":
            why = ": ".join(x for x in (c.get("reason"), c.get("message")) if x)
            return "failed", f"render Job failed ({why or 'no reason given'})"
    return None


def _failed(error: str) -> dict[str, Any]:
    return {"status": Status.FAILED, "error": redact(error)[:1000], "verdict": None, "warm": False}
