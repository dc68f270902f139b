"""The one request/limit check for NVIDIA extended resources in pod specs.

Kubernetes' rules for extended resources such as ``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` and
``nvidia.com/mig-<profile>`` (https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/ and
https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources):
they are set in ``limits`` (a missing request defaults to the limit), a request without a limit or a
request different from the limit is invalid, and quantities are whole numbers. The API server rejects
a pod spec that breaks them, so every problem found here is CRITICAL.

One rule (:func:`resource_problems`) over one container's ``requests``/``limits``; two readers of where
the containers come from: raw Pod objects or pod templates (:func:`request_limit_problems`, used by the
scheduling checks) and the pods frame of :func:`gpulib.kube.client.pods_frame`
(:func:`request_limit_issues`, used by the cost report and the Kubernetes lesson). Both return the same
columns (:data:`REQUEST_LIMIT_COLUMNS`) and :func:`request_limit_findings` turns either into findings.

:func:`non_gpu_pods` is the one rule for the opposite case, pods that request no NVIDIA resource but sit on a
GPU node (the scheduling checks and the cost report both read it); agents are exempt: DaemonSet pods and the
``system_namespaces`` of ``gpulib/data/fleet/scheduling_settings.csv``.
"""

from __future__ import annotations

from numbers import Real
from typing import Any, Iterable, Mapping

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import settings
from gpulib.core.sop import sop
from gpulib.kube.labels import GPU_RESOURCE, GPU_SHARED_RESOURCE, MIG_RESOURCE_PREFIX

__all__ = [
    "REQUEST_LIMIT_COLUMNS",
    "NON_GPU_POD_COLUMNS",
    "is_extended_gpu_resource",
    "resource_problems",
    "request_limit_problems",
    "request_limit_issues",
    "request_limit_findings",
    "system_namespaces",
    "requests_nvidia",
    "REQUEST_COLUMNS",
    "non_gpu_pods",
]

#: one row per (pod, container, resource) that breaks a rule
REQUEST_LIMIT_COLUMNS = [
    "namespace",
    "pod",
    "node",
    "workload",
    "container",
    "resource",
    "request",
    "limit",
    "problem",
    "detail",
]


def is_extended_gpu_resource(key: str) -> bool:
    """``nvidia.com/gpu``, ``nvidia.com/gpu.shared`` or a ``nvidia.com/mig-*`` resource."""
    return key in (GPU_RESOURCE, GPU_SHARED_RESOURCE) or key.startswith(MIG_RESOURCE_PREFIX)


def _whole(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    if isinstance(v, float):
        return v.is_integer()
    return str(v).strip().isdigit()


def _same(request: Any, limit: Any) -> bool:
    return int(float(str(request).strip())) == int(float(str(limit).strip()))


def _absent(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip())


def resource_problems(requests: Mapping[str, Any] | None, limits: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The rule: problems of one container's NVIDIA extended resources, one dict per resource
    (``resource``, ``request``, ``limit``, ``problem`` a short label, ``detail`` the reason)."""
    req, lim = dict(requests or {}), dict(limits or {})
    out = []
    for key in sorted({*req, *lim}):
        if not is_extended_gpu_resource(key):
            continue
        kind = "MIG" if "/mig-" in key else "GPU"
        r, lm = req.get(key), lim.get(key)
        r = None if _absent(r) else r
        lm = None if _absent(lm) else lm
        bad = [f"{x}={v!r}" for x, v in (("request", r), ("limit", lm)) if v is not None and not _whole(v)]
        if bad:
            problem, detail = (
                f"{kind} quantity fractional",
                f"{key} {', '.join(bad)}: extended resources are whole numbers",
            )
        elif r is not None and lm is None:
            problem, detail = (
                f"{kind} request without a limit",
                f"{key} request {r}, no limit: extended resources are set in limits",
            )
        elif r is not None and not _same(r, lm):
            problem, detail = (
                f"{kind} request != limit",
                f"{key} request {r} != limit {lm}: for extended resources they must be equal",
            )
        else:
            continue
        out.append({"resource": key, "request": r, "limit": lm, "problem": problem, "detail": detail})
    return out


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=REQUEST_LIMIT_COLUMNS).reset_index(drop=True)


def request_limit_problems(pod_specs: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """:func:`resource_problems` of every container and init container of raw Pod objects (or objects with a
    pod ``template``), as :data:`REQUEST_LIMIT_COLUMNS` rows."""
    rows = []
    for obj in pod_specs:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        if "containers" not in spec:
            spec = ((spec.get("template") or obj.get("template") or {}).get("spec")) or spec
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            res = c.get("resources") or {}
            for p in resource_problems(res.get("requests"), res.get("limits")):
                rows.append(
                    {
                        "namespace": meta.get("namespace", ""),
                        "pod": meta.get("name", ""),
                        "node": spec.get("nodeName", "") or "",
                        "workload": meta.get("name", ""),
                        "container": c.get("name", "?"),
                        **p,
                    }
                )
    return _frame(rows)


def _number(v: Any) -> Any:
    """One value as ``pd.to_numeric(..., errors="coerce")`` reads it (NaN when it is no number); a plain number or
    None without building a Series (this runs per pod: a Series per value was most of the cost report's pod work)."""
    if v is None:
        return float("nan")
    if isinstance(v, Real):
        return v
    return pd.to_numeric(pd.Series([v]), errors="coerce").iloc[0]


def _frame_resources(gpu: Any, mig: Any) -> dict[str, Any]:

    out = {k: v for k, v in (dict(mig) if isinstance(mig, Mapping) else {}).items() if v}
    g = _number(gpu)
    if pd.notna(g) and g > 0:
        out[GPU_RESOURCE] = int(g) if float(g).is_integer() else float(g)
    return out


def request_limit_issues(pods: pd.DataFrame | None) -> pd.DataFrame:
    """:func:`resource_problems` over a pods frame (:func:`gpulib.kube.client.pods_frame`): per container when
    the frame has ``containers``, else per pod from ``gpu_request``/``gpu_limit``/``mig_requests``/``mig_limits``
    (a zero or missing limit is no limit). Same columns as :func:`request_limit_problems`."""
    if pods is None or len(pods) == 0:
        return _frame([])
    rows = []
    read = ["namespace", "pod", "node", "workload", "containers", *REQUEST_COLUMNS]
    for p in _columns(pods, read).to_dict("records"):
        base = {
            "namespace": p.get("namespace", ""),
            "pod": p.get("pod", ""),
            "node": p.get("node", "") or "",
            "workload": p.get("workload", "") or p.get("pod", ""),
        }
        containers = p.get("containers")
        if not isinstance(containers, list) or not containers:
            containers = [
                {"name": "", **{k: p.get(k) for k in ("gpu_request", "gpu_limit", "mig_requests", "mig_limits")}}
            ]
        for c in containers:
            req = _frame_resources(c.get("gpu_request"), c.get("mig_requests"))
            lim = _frame_resources(c.get("gpu_limit"), c.get("mig_limits"))
            for prob in resource_problems(req, lim):
                rows.append({**base, "container": c.get("name", "") or "", **prob})
    return _frame(rows)


def request_limit_findings(
    problems: pd.DataFrame,
    *,
    evidence: Mapping[tuple[str, str], list[str]] | None = None,
    data: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    runbook: str = "operator_install",
) -> list[Finding]:
    """One CRITICAL finding per row of :func:`request_limit_problems` / :func:`request_limit_issues`.

    ``evidence`` / ``data`` add caller lines and fields per ``(namespace, pod)`` (the cost report adds what
    the GPUs cost)."""
    out = []
    for r in problems.to_dict("records"):
        ns, pod, c = r["namespace"], r["pod"], r["container"]
        where = f"{ns}/{pod}" + (f" container {c}" if c else "")
        key = (ns, pod)
        s = sop("kube_sop", "request_limit", detail=r["detail"], resource=r["resource"], ns=ns, pod=pod)
        out.append(
            Finding(
                Severity.CRITICAL,
                f"{r['problem']}: {where} ({r['detail'].split(':')[0]})",
                category="scheduling",
                node=str(r["node"]) or None,
                runbook=runbook,
                summary=s.summary,
                evidence=[
                    f"{r['resource']}: request {'none' if r['request'] is None else r['request']}, "
                    f"limit {'none' if r['limit'] is None else r['limit']}"
                ]
                + list((evidence or {}).get(key, [])),
                sop_step=s.sop_step,
                commands=s.commands,
                data={
                    "check": "request_limit",
                    "action": "fix_limits",
                    "namespace": ns,
                    "pod": pod,
                    "container": c,
                    "workload": r["workload"],
                    "resource": r["resource"],
                    **dict((data or {}).get(key, {})),
                },
            )
        )
    return out


NON_GPU_POD_COLUMNS = ["node", "namespace", "pod", "owner_kind", "owner_name"]


def system_namespaces() -> set[str]:
    """Namespaces whose pods on GPU nodes are expected agents (``scheduling_settings.csv`` system_namespaces)."""
    return set(settings("scheduling_settings").items_list("system_namespaces"))


#: the pods-frame columns :func:`requests_nvidia` reads
REQUEST_COLUMNS = ["gpu_request", "gpu_limit", "mig_requests", "mig_limits"]


def _columns(pods: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    """``pods`` cut to the ``names`` it has: ``to_dict("records")`` of the columns a loop reads, not all of them."""
    return pods[[c for c in dict.fromkeys(names) if c in pods.columns]]


def requests_nvidia(row: Mapping[str, Any]) -> bool:
    """True when a pods-frame row requests or limits ``nvidia.com/gpu`` or a MIG resource (any value above 0)."""
    for k in ("gpu_request", "gpu_limit"):
        v = _number(row.get(k))
        if pd.notna(v) and v > 0:
            return True
    return any(
        bool(row.get(k)) and any((v or 0) > 0 for v in dict(row.get(k)).values())
        for k in ("mig_requests", "mig_limits")
        if isinstance(row.get(k), Mapping)
    )


def non_gpu_pods(pods: pd.DataFrame | None, gpu_nodes: Iterable[str]) -> pd.DataFrame:
    """Pods on ``gpu_nodes`` that request no ``nvidia.com/gpu`` or MIG resource (requests or limits), are not done
    (phase other than Succeeded/Failed), and are neither DaemonSet pods nor in :func:`system_namespaces`.
    Columns :data:`NON_GPU_POD_COLUMNS`, in the pods frame's order."""
    if pods is None or len(pods) == 0:
        return pd.DataFrame(columns=NON_GPU_POD_COLUMNS)
    gpu, system = {str(n) for n in gpu_nodes}, system_namespaces()
    rows = [
        {c: (r.get(c) or "") for c in NON_GPU_POD_COLUMNS}
        for r in _columns(pods, [*NON_GPU_POD_COLUMNS, "phase", *REQUEST_COLUMNS]).to_dict("records")
        if str(r.get("node") or "") in gpu
        and str(r.get("phase") or "") not in ("Succeeded", "Failed")
        and str(r.get("owner_kind") or "") != "DaemonSet"
        and str(r.get("namespace") or "") not in system
        and not requests_nvidia(r)
    ]
    return pd.DataFrame(rows, columns=NON_GPU_POD_COLUMNS)
