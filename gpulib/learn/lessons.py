"""Helpers for the onboarding lessons (``runbooks/learn/``): every figure a lesson shows is computed here or
read from a data file, so a lesson cannot disagree with the runbooks.

A lesson is defined like a runbook (``gpulib/learn/<topic>.py`` ends with its ``RUNBOOK``, kind ``lesson``): each
step's ``gather`` calls these helpers and records its headline figures in ``c.figures``, its ``show`` displays them
(:mod:`gpulib.learn.display`: Markdown tables and self-check questions whose answer and explanation sit in a
collapsed ``<details>`` block). :mod:`gpulib.learn.session` runs it and writes ``figures.json`` beside the findings
file the CLI asks for, so tests can check what the reader saw.
"""

from __future__ import annotations

import html
import importlib
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

import gpulib.cost.analysis as cost
import gpulib.mig as mig
import gpulib.xid as xid
import gpulib.xid.triage as triage
from gpulib import connect as _connect
from gpulib.catalogue import catalogue, project_root
from gpulib.core.errors import EmptyResult, GpulibError, InvalidParameter
from gpulib.core.knowledge import data_path, load_table
from gpulib.core.money import money as _money
from gpulib.core.settings import FINDINGS_ENV  # noqa: F401  (the lessons read it here: tests/learn)
from gpulib.cost import ACTIONS
from gpulib.kube.frames import MalformedKubernetesObject, pods_frame
from gpulib.kube.requests import resource_problems
from gpulib.learn.display import (  # noqa: F401  (the lessons import them from here too)
    SelfCheck,
    _cell,
    _display_html,
    data_table,
    md_table,
    question,
    recording,
    show_html,
    show_md,
)
from gpulib.learn.interview import follow_up_html, follow_ups, model_answer  # noqa: F401  (used by the lessons)
from gpulib.vllm import plan
from gpulib.xid import alert_rules, alert_rules_yaml

GIB = 1024**3


def runbook_ref(name: str, **params: Any) -> str:
    """Markdown pointing at the operational runbook a lesson prepares for: its command and its notebook."""
    cmd = "gpuops run " + name + "".join(f" -p {k} {v}" for k, v in params.items())
    try:
        info = catalogue().get(name)
    except GpulibError:
        info = None
    if info is None:
        return f"**Runbook:** `{cmd}` (not in this checkout yet)"
    rel = f"{info.path.parent.name}/{info.path.name}"
    return f"**Runbook:** `{cmd}` — {info.title} (`{rel}`)"


def connect(source: str = "demo", scenario: str = ""):
    """Open a source; for ``demo`` an optional scenario YAML replaces the packaged demo fleet."""
    if scenario and not Path(scenario).is_file():
        raise InvalidParameter(
            f"scenario {scenario!r} is not a file", hint="give a demo fleet YAML like gpulib/data/demo/demo_fleet.yaml"
        )
    # backends take the keywords they know (the demo's scenario=) and ignore the others (gpulib/sources/)
    return _connect(source, **({"scenario": scenario} if scenario else {}))


# --------------------------------------------------------------------------- packaged lesson inputs
def lesson_text(name: str) -> str:
    """A command output shipped for the lessons: a real capture (``gpulib/data/captures/<name>``) or a lesson
    input (``gpulib/data/learn/<name>``), found by file name."""
    return data_path(name).read_text()


# ------------------------------------------------------------------ GPU resources in Kubernetes
def vllm_serve_command(model: str, device: str, max_model_len: int) -> str:
    """The ``vllm serve`` command the ``vllm_deploy`` runbook would generate (gpulib.vllm.sizing.plan): its
    ``--max-num-seqs`` is the full-length requests the KV cache holds, capped at vLLM's default."""
    p = plan(model, device, context_len=max_model_len)
    args = p.vllm_args()
    return "vllm serve " + " ".join(args[1:2] + args[2:])


def pod_resources_outcome(
    resources: Mapping[str, Mapping[str, Any]], nodes: pd.DataFrame | None = None
) -> dict[str, str]:
    """What the project's pod checks say about one container ``resources`` block (requests/limits).

    Returns ``{"parsed": ..., "check": ..., "schedulable_on": ...}``: how ``gpulib.kube.frames`` reads it (with the API
    server's defaulting of a missing request to the limit, and its refusal of fractional extended resources),
    the verdict of the one request/limit check (:func:`gpulib.kube.requests.resource_problems`, which the cost
    report and the scheduling checks use too), and which nodes of ``nodes`` advertise enough of the resource.
    """
    pod = {
        "kind": "Pod",
        "metadata": {"name": "example", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "cuda", "resources": dict(resources)}]},
        "status": {"phase": "Pending"},
    }
    try:
        row = pods_frame(pod).iloc[0]
    except MalformedKubernetesObject as exc:
        return {"parsed": "rejected", "check": str(exc).split(" (hint:")[0], "schedulable_on": "none"}
    req = {k: v for k, v in row["mig_requests"].items()}
    if row["gpu_request"]:
        req["nvidia.com/gpu"] = int(row["gpu_request"])
    issues = resource_problems(resources.get("requests"), resources.get("limits"))
    check = "; ".join(i["problem"] for i in issues) if issues else "ok: requests = limits, whole numbers"
    if issues:
        # kubernetes pkg/apis/core/validation/validation.go (ValidateResourceRequirements): a non-overcommitable
        # (extended) resource needs a limit, and its request must equal that limit; the pod is never created
        return {
            "parsed": "rejected by the API server (extended resources: limit required, request must equal it)",
            "check": check,
            "schedulable_on": "none (the pod is never created)",
        }
    where = "n/a"
    if nodes is not None and req:
        fit = [n.node for n in nodes.itertuples() if all(_allocatable(n, k) >= v for k, v in req.items())]
        where = ", ".join(fit) if fit else "none (stays Pending: no node advertises " + ", ".join(sorted(req)) + ")"
    parsed = ", ".join(f"{k}: {v}" for k, v in sorted(req.items())) or "no GPU resource"
    return {"parsed": parsed, "check": check, "schedulable_on": where}


#: the one money formatter (:func:`gpulib.core.money.money`), for lessons as ``learn.money``
money = _money


def _allocatable(node, resource: str) -> int:
    if resource == "nvidia.com/gpu":
        return int(node.gpu_allocatable or 0)
    return int((node.mig_allocatable or {}).get(resource, 0))


# -------------------------------------------------------------------------------------- MIG
def mig_fit_count(gpu_model: str, profile: str, alongside: Sequence[str] = ()) -> int:
    """How many ``profile`` instances fit on one ``gpu_model`` next to ``alongside`` (by the MIG placer)."""
    n = 0
    while mig.place(gpu_model, list(alongside) + [profile] * (n + 1)).fits:
        n += 1
    return n


# ------------------------------------------------------------------------------------ monitoring
def thresholds_frame() -> pd.DataFrame:
    """``thresholds.csv`` (the single source for alert rules, triage and this table)."""
    return load_table("thresholds")[["key", "value", "unit", "meaning"]]


def dcgm_fields_frame(enabled_by_default: bool | None = None) -> pd.DataFrame:
    """``dcgm_fields.csv``, optionally only the fields on (True) or off (False) in dcgm-exporter's defaults."""
    df = load_table("dcgm_fields")
    if enabled_by_default is not None:
        df = df[(df["enabled_by_default"] == "yes") == enabled_by_default]
    return df.reset_index(drop=True)


def alert_catalog() -> pd.DataFrame:
    """The generated Prometheus alert rules (gpulib.xid.alerts) with what each catches and the DCGM
    fields it needs that dcgm-exporter does not export by default (so it would never fire)."""
    off = set(dcgm_fields_frame(False)["field"])
    rows = []
    for group in alert_rules()["groups"]:
        for r in group["rules"]:
            fields = sorted(set(re.findall(r"\b(DCGM_\w+)", r["expr"])))
            rows.append(
                {
                    "alert": r["alert"],
                    "severity": r["labels"]["severity"],
                    "for": r.get("for", "0s"),
                    "expr": r["expr"],
                    "catches": r["annotations"]["description"],
                    "needs_non_default_fields": ", ".join(f for f in fields if f in off),
                }
            )
    return pd.DataFrame(rows)


def alerts_file_status(path: str | Path | None = None) -> str:
    """Whether the committed ``deploy/prometheus/gpu-alerts.yaml`` equals what the data files generate now."""
    if path is None:
        try:
            path = project_root() / "deploy" / "prometheus" / "gpu-alerts.yaml"
        except GpulibError:
            return "no checkout found (deploy/prometheus/gpu-alerts.yaml is not part of the installed package)"
    p = Path(path)
    if not p.is_file():
        return f"{p} not found"
    same = p.read_text() == alert_rules_yaml()
    return (
        f"`{p.name}` is in sync with the data files"
        if same
        else f"`{p.name}` differs from what the data files generate now: regenerate it with "
        "`gpuops alerts --base-url URL`"
    )


# ------------------------------------------------------------------------------- troubleshooting
def smi_section(text: str, command: str) -> str:
    """The output of one command from a capture made of ``### nvidia-smi <args>`` sections (set -x noise dropped)."""
    out, on = [], False
    for line in text.splitlines():
        if line.startswith("### "):
            on = line[4:].strip() == command.strip()
            continue
        if on and not line.startswith("+ "):
            out.append(line)
    if not out:
        raise InvalidParameter(f"no '### {command}' section in the capture")
    return "\n".join(out).strip("\n") + "\n"


def xid_sop(code: int) -> dict[str, Any]:
    """NVIDIA's catalog entry for an XID with the project's SOP for its resolution bucket."""
    rec = xid.lookup(code)
    bucket = triage._bucket_for(int(code))
    sop = xid.sop(bucket)
    cmds = " ".join(sop["commands"])
    recovery = "node reboot" if "reboot" in cmds else "GPU reset" if "nvidia-smi -r" in cmds else "restart the workload"
    return {
        "recovery": recovery,
        "code": int(code),
        "mnemonic": rec.mnemonic,
        "description": rec.description,
        "bucket": bucket,
        "takes_gpu_out": bucket in triage.DRAIN_BUCKETS,
        "verdict": sop["verdict"],
        "severity": sop["severity"],
        "sop_step": sop["sop_step"],
        "commands": sop["commands"],
        "escalation": sop["escalation"],
    }


# ----------------------------------------------------------------------------------------- storage
def model_sizes(
    dtypes: Sequence[str] = ("bfloat16", "fp8", "int4"), models: Sequence[str] | None = None
) -> pd.DataFrame:
    """Checkpoint size per model and dtype: parameters (models.csv) x bytes per parameter (model_dtypes.csv)."""
    m = load_table("models")[["model", "params_b"]]
    if models is not None:
        m = m[m["model"].isin(list(models))]
    d = load_table("model_dtypes").set_index("dtype")
    unknown = [x for x in dtypes if x not in d.index]
    if unknown:
        raise InvalidParameter(f"unknown dtype(s) {unknown}; model_dtypes.csv has {list(d.index)}")
    rows = [
        {
            "model": r.model,
            "params_b": float(r.params_b),
            "dtype": dt,
            "bytes_per_param": float(d.loc[dt, "bytes"]),
            "size_gb": float(r.params_b) * float(d.loc[dt, "bytes"]),
            "size_gib": float(r.params_b) * 1e9 * float(d.loc[dt, "bytes"]) / GIB,
        }
        for r in m.itertuples()
        for dt in dtypes
    ]
    return pd.DataFrame(rows)


def storage_tiers() -> pd.DataFrame:
    """Read throughput per storage tier (``learn/storage_tiers.csv``; assumptions are flagged ``inferred``)."""
    return load_table("learn/storage_tiers")


def load_times(size_gb: float, tiers: pd.DataFrame | None = None) -> pd.DataFrame:
    """Seconds to read ``size_gb`` (decimal GB) from each tier at its read throughput."""
    if size_gb <= 0:
        raise InvalidParameter(f"size_gb must be positive, got {size_gb}")
    t = storage_tiers() if tiers is None else tiers
    return t.assign(seconds=size_gb / t["read_gb_s"].astype(float))[["tier", "medium", "read_gb_s", "basis", "seconds"]]


# -------------------------------------------------------------------------------------------- cost
def cost_report(src, window: str = "24h"):
    """``gpulib.cost.analysis.analyze_cost`` over a source's window (GR_ENGINE_ACTIVE when exported, else GPU_UTIL)."""

    def _get(field):
        try:
            return src.series(field, window)
        except EmptyResult:
            return None

    return cost.analyze_cost(
        src.nodes(),
        src.pods(),
        _get("DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
        _get("DCGM_FI_DEV_FB_USED"),
        gpu_util=_get("DCGM_FI_DEV_GPU_UTIL"),
        window=window,
    )


def cost_checklist(rep) -> pd.DataFrame:
    """The optimisation checklist: every action in gpulib.cost.model.ACTIONS with its targets and monthly saving."""
    a = rep.actions
    rows = []
    for key, label in ACTIONS.items():
        part = a[a["action"] == key] if len(a) else a
        rows.append(
            {
                "action": key,
                "checklist item": label,
                "targets": int(len(part)),
                "monthly_saving": float(part["monthly_saving"].sum()) if len(part) else 0.0,
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------- manifests
def _yaml(doc: Mapping[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False)


def hpa_manifest(
    deployment: str,
    metric: str,
    target_average: float,
    *,
    min_replicas: int = 1,
    max_replicas: int = 4,
    namespace: str = "inference",
) -> str:
    """An ``autoscaling/v2`` HPA scaling ``deployment`` on a per-pod custom metric (served by prometheus-adapter
    or KEDA) with an average target per replica."""
    if not 1 <= min_replicas <= max_replicas:
        raise InvalidParameter(f"need 1 <= min_replicas <= max_replicas, got {min_replicas}..{max_replicas}")
    if target_average <= 0:
        raise InvalidParameter(f"target_average must be positive, got {target_average}")
    return _yaml(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": deployment, "namespace": namespace},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
                "minReplicas": int(min_replicas),
                "maxReplicas": int(max_replicas),
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": metric},
                            "target": {"type": "AverageValue", "averageValue": f"{target_average:g}"},
                        },
                    }
                ],
            },
        }
    )


def pytorchjob_worker_spec(*, shm: bool = True, gpus: int = 8, shm_size: str = "16Gi") -> dict:
    """A PyTorchJob worker pod template (``{"spec": ...}``) with or without a memory-backed /dev/shm."""
    container = {
        "name": "pytorch",
        "image": "REGISTRY/TRAINING-IMAGE:TAG",
        "command": ["torchrun", f"--nproc-per-node={gpus}", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
        "env": [{"name": "NCCL_DEBUG", "value": "WARN"}],
    }
    spec: dict[str, Any] = {"containers": [container]}
    if shm:
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}]
    return {"spec": spec}


def pytorchjob_yaml(name: str, *, workers: int = 2, gpus_per_worker: int = 8, namespace: str = "research") -> str:
    """A Kubeflow ``PyTorchJob`` (one Master + ``workers - 1`` Workers) with /dev/shm mounted for NCCL."""
    if workers < 1 or gpus_per_worker < 1:
        raise InvalidParameter(f"workers and gpus_per_worker must be >= 1, got {workers}, {gpus_per_worker}")

    def tmpl() -> dict:
        return pytorchjob_worker_spec(gpus=gpus_per_worker)

    specs = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": tmpl()}}
    if workers > 1:
        specs["Worker"] = {"replicas": workers - 1, "restartPolicy": "OnFailure", "template": tmpl()}
    return _yaml(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"pytorchReplicaSpecs": specs},
        }
    )


def optional_module(name: str):
    """``gpulib.<name>`` if this checkout has it, else None after rendering a note that names the gap."""
    try:
        return importlib.import_module(f"gpulib.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"gpulib.{name}":
            raise
        _display_html(
            f"<div style='border-left:4px solid #b36b00;padding:4px 10px'><b>gpulib.{html.escape(name)} is not in "
            "this checkout</b>: the cells that need it are skipped.</div>"
        )
        return None


def resources_text(resources: dict) -> str:
    """A container's ``resources`` as the line an engineer reads in a pod spec: ``limits nvidia.com/gpu=1; requests
    ...``."""
    return (
        "; ".join(
            f"{kind} " + ", ".join(f"{name}={qty}" for name, qty in (spec or {}).items())
            for kind, spec in resources.items()
        )
        or "(none)"
    )
