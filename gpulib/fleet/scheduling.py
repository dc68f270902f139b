"""GPU scheduling checks over NODE / POD frames and raw pod specs (used by operator_install and fleet_overview).

* :func:`untolerated_gpu_pods` — GPU pods that tolerate the taints of no GPU node offering their resource.
* :func:`untainted_gpu_nodes` — GPU nodes without a NoSchedule/NoExecute taint, so CPU pods can land there.
* :func:`non_gpu_pods_on_gpu_nodes` — pods that request no GPU running on GPU nodes (agents excluded).
* :func:`unknown_product_affinity` — nodeSelector / required nodeAffinity on ``nvidia.com/gpu.product`` values
  that no node has (the pod stays Pending).
* :func:`request_limit_problems` — GPU requests different from limits or fractional values, which the API
  server rejects for extended resources (kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/).
* :func:`split_across_sockets` — multi-GPU pods on nodes whose ``nvidia-smi topo -m`` puts the GPUs they need on
  different NUMA nodes joined only through the CPU interconnect (SYS).

:func:`check_scheduling` runs them all. The SOP step and commands of each finding are a row of
``gpulib/data/fleet/fleet_sop.csv`` (:func:`gpulib.core.sop.sop`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from gpulib.core.errors import NotProvided, SourceError
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import settings
from gpulib.core.sop import sop
from gpulib.kube.frames import iter_gpu_nodes
from gpulib.kube.labels import GPU_RESOURCE
from gpulib.kube.requests import non_gpu_pods, request_limit_findings
from gpulib.kube.requests import request_limit_problems as _request_limit_frame
from gpulib.nvidia.topology import Topology, parse_topology

PRODUCT_LABEL = "nvidia.com/gpu.product"
HARD_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    """Kubernetes matching: Exists with empty key matches all; Equal needs key and value; empty effect matches all."""
    for t in tolerations or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if op == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if op == "Equal" and t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _hard_taints(taints: list[dict]) -> list[dict]:
    # cordon (unschedulable) and node-condition taints are transient, not isolation
    return [
        t
        for t in taints or []
        if t.get("effect") in HARD_EFFECTS and not t.get("key", "").startswith("node.kubernetes.io/")
    ]


def _resources_of(pod) -> list[str]:
    res = [GPU_RESOURCE] if pod.gpu_request > 0 or pod.gpu_limit > 0 else []
    return res + sorted({*(pod.mig_requests or {}), *(pod.mig_limits or {})})


def _offers(node, resource: str) -> bool:
    if resource == GPU_RESOURCE:
        return node.gpu_capacity > 0
    return (node.mig_capacity or {}).get(resource, 0) > 0


def _fmt_taint(t: dict) -> str:
    return f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"


def untolerated_gpu_pods(nodes: pd.DataFrame, pods: pd.DataFrame) -> list[Finding]:
    """GPU pods that tolerate the hard taints of none of the nodes offering their GPU/MIG resource."""
    out = []
    for p in pods.itertuples(index=False):
        if p.phase in ("Succeeded", "Failed"):
            continue
        for res in _resources_of(p):
            offering = [n for n in nodes.itertuples(index=False) if _offers(n, res)]
            if not offering:
                continue
            blocked = {n.node: [t for t in _hard_taints(n.taints) if not tolerates(t, p.tolerations)] for n in offering}
            if all(blocked.values()):
                pending = p.phase == "Pending"
                taints = sorted({_fmt_taint(t) for ts in blocked.values() for t in ts})
                step = sop(
                    "fleet_sop",
                    "untolerated_gpu_pod",
                    namespace=p.namespace,
                    pod=p.pod,
                    taint_key=taints[0].split(":")[0].split("=")[0],
                )
                out.append(
                    Finding(
                        Severity.CRITICAL if pending else Severity.WARNING,
                        f"{p.namespace}/{p.pod} requests {res} but tolerates no GPU node's taint",
                        category="scheduling",
                        summary="Every node offering the resource is tainted and the pod has no matching toleration"
                        + (
                            ": it stays Pending."
                            if pending
                            else " (it was placed before the taint, or bypassed the scheduler)."
                        ),
                        evidence=[
                            f"taints on the {len(offering)} node(s) offering {res}: {', '.join(taints)}",
                            f"pod tolerations: {p.tolerations or 'none'}",
                        ],
                        sop_step=step.sop_step,
                        commands=step.commands,
                        data={"check": "untolerated", "pod": p.pod, "namespace": p.namespace},
                    )
                )
                break
    return out


def untainted_gpu_nodes(nodes: pd.DataFrame) -> list[Finding]:
    """GPU nodes with no hard taint: CPU-only pods can fill them and block GPU pods."""
    gpu = set(iter_gpu_nodes(nodes))
    key, value = (
        settings("scheduling_settings").text("gpu_taint_key"),
        settings("scheduling_settings").text("gpu_taint_value"),
    )
    bare = [n for n in nodes.itertuples(index=False) if n.node in gpu and not _hard_taints(n.taints)]
    if not bare:
        return []
    steps = [
        sop(
            "fleet_sop",
            "untainted_gpu_nodes",
            taint_key=key,
            taint_value=value,
            node=n.node,
            taint=f"{key}={value}:NoSchedule",
        )
        for n in bare
    ]
    return [
        Finding(
            Severity.WARNING,
            f"{len(bare)} GPU node(s) have no NoSchedule taint",
            category="scheduling",
            summary="Pods that need no GPU can be scheduled there and take the CPU and memory GPU pods need.",
            evidence=[
                f"{n.node}: {n.gpu_product or 'GPU'} x{n.gpu_count}, taints: "
                f"{', '.join(_fmt_taint(t) for t in n.taints) or 'none'}"
                for n in bare
            ][:10],
            sop_step=steps[0].sop_step,
            commands=[c for st in steps for c in st.commands][:10],
            data={"check": "untainted", "nodes": [n.node for n in bare]},
        )
    ]


def non_gpu_pods_on_gpu_nodes(nodes: pd.DataFrame, pods: pd.DataFrame) -> list[Finding]:
    """Pods without any GPU/MIG request on GPU nodes (the rule: :func:`gpulib.kube.requests.non_gpu_pods`)."""
    hits = list(non_gpu_pods(pods, iter_gpu_nodes(nodes)).itertuples(index=False))
    if not hits:
        return []
    taints = {n.node: [_fmt_taint(t) for t in _hard_taints(n.taints)] for n in nodes.itertuples(index=False)}
    tainted = sorted({t for p in hits for t in taints.get(p.node, [])})
    if tainted and all(taints.get(p.node) for p in hits):
        # the nodes are tainted already, so these pods tolerate the taint: another taint would not move them
        steps = [
            sop("fleet_sop", "non_gpu_pods_tolerate_taint", taints=", ".join(tainted), namespace=p.namespace, pod=p.pod)
            for p in hits[:5]
        ]
    else:
        steps = [sop("fleet_sop", "non_gpu_pods", namespace=p.namespace, pod=p.pod) for p in hits[:5]]
    return [
        Finding(
            Severity.WARNING,
            f"{len(hits)} pod(s) without a GPU request run on GPU nodes",
            category="scheduling",
            summary="They use a GPU node's CPU/memory (and may use a GPU without requesting it).",
            evidence=[
                f"{p.namespace}/{p.pod} ({p.owner_kind or 'bare'} {p.owner_name}) on {p.node}"
                + (f", node taints {', '.join(taints[p.node])}" if taints.get(p.node) else ", node untainted")
                for p in hits
            ][:12],
            sop_step=steps[0].sop_step,
            commands=[c for st in steps for c in st.commands],
            data={"check": "non_gpu_on_gpu", "pods": [f"{p.namespace}/{p.pod}" for p in hits]},
        )
    ]


def _affinity_products(spec: Mapping[str, Any]) -> list[list[str]]:
    """Required nodeAffinity terms on the product label: one list of allowed values per term (In only)."""
    req = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    out = []
    for term in req.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") == PRODUCT_LABEL and e.get("operator") == "In":
                out.append(list(e.get("values") or []))
    return out


def unknown_product_affinity(
    nodes: pd.DataFrame, pods: pd.DataFrame, pod_specs: Iterable[Mapping[str, Any]] | None = None
) -> list[Finding]:
    """Pods whose nodeSelector or required nodeAffinity names ``nvidia.com/gpu.product`` values no node has."""
    products = sorted({p for p in nodes["gpu_product"] if p})
    wanted: dict[tuple[str, str], list[str]] = {}
    for p in pods.itertuples(index=False):
        v = (p.node_selector or {}).get(PRODUCT_LABEL)
        if v:
            wanted[(p.namespace, p.pod)] = [v]
    for obj in pod_specs or []:
        meta = obj.get("metadata") or {}
        terms = _affinity_products(obj.get("spec") or {})
        if terms:
            wanted.setdefault((meta.get("namespace", ""), meta.get("name", "")), []).extend(v for t in terms for v in t)
    out = []
    for (ns, name), values in sorted(wanted.items()):
        if values and not set(values) & set(products):
            close = [p for p in products if any(v.split("-")[1:2] and v.split("-")[1] in p for v in values)]
            step = sop("fleet_sop", "unknown_gpu_product")
            out.append(
                Finding(
                    Severity.CRITICAL,
                    f"{ns}/{name} asks for GPU product {', '.join(sorted(set(values)))}, which no node has",
                    category="scheduling",
                    summary="The pod can never schedule; GFD writes products with "
                    "spaces as '-' and adds -SHARED / -MIG-<profile> suffixes under sharing and MIG single.",
                    evidence=[f"products on nodes: {', '.join(products) or 'none'}"]
                    + ([f"similar: {', '.join(close)}"] if close else []),
                    sop_step=step.sop_step,
                    commands=step.commands,
                    data={"check": "unknown_product", "pod": name, "namespace": ns},
                )
            )
    return out


def request_limit_problems(pod_specs: Iterable[Mapping[str, Any]]) -> list[Finding]:
    """Containers whose GPU/MIG request differs from the limit, lacks one, or is fractional (the API rejects all
    three): :func:`gpulib.kube.requests.request_limit_problems` as findings."""
    return request_limit_findings(_request_limit_frame(pod_specs))


def split_across_sockets(pods: pd.DataFrame, topologies: Mapping[str, Any]) -> list[Finding]:
    """Multi-GPU pods on nodes whose GPUs per NUMA node are fewer than the pod needs and whose cross-NUMA GPU
    links go through the CPU interconnect (``SYS``): the pod's GPUs are split across sockets."""
    out = []
    for node, topo in topologies.items():
        t = topo if isinstance(topo, Topology) else parse_topology(topo)
        col = next(
            (
                c
                for c in ("numa_affinity", "cpu_affinity")  # old nvidia-smi prints CPU affinity only
                if t.affinity[c].notna().any() and (t.affinity[c] != "N/A").any()
            ),
            None,
        )
        if col is None:
            continue
        aff = t.affinity[t.affinity[col].notna() & (t.affinity[col] != "N/A")]
        per_numa = aff.groupby(col)["gpu"].apply(list).to_dict()
        most = max(len(g) for g in per_numa.values())
        groups = list(per_numa.values())
        cross = {t.link(a, b) for i, ga in enumerate(groups) for gb in groups[i + 1 :] for a in ga for b in gb}
        if not cross or not cross <= {"SYS"}:
            continue
        for p in pods[(pods["node"] == node) & (pods["gpu_request"] > most)].itertuples(index=False):
            step = sop("fleet_sop", "gpus_split_across_sockets", most=most, node=node)
            out.append(
                Finding(
                    Severity.WARNING,
                    f"{p.namespace}/{p.pod} needs {p.gpu_request} GPUs; {node} has at most {most} per socket",
                    category="scheduling",
                    node=node,
                    summary="Its GPUs span NUMA nodes linked only through the CPU interconnect (SYS): "
                    "collectives and P2P copies between the halves are slow.",
                    evidence=[f"{col.replace('_', ' ')} {k}: {', '.join(v)}" for k, v in sorted(per_numa.items())]
                    + [f"cross-socket GPU link: {', '.join(sorted(cross))}"],
                    sop_step=step.sop_step,
                    commands=step.commands,
                    data={"check": "split_sockets", "pod": p.pod},
                )
            )
    return out


def require_frames(nodes: pd.DataFrame | None, pods: pd.DataFrame | None) -> None:
    """SourceError when the nodes or the pods the scheduling checks need could not be read."""
    if nodes is None or pods is None:
        raise SourceError(
            f"the scheduling checks need the {'nodes' if nodes is None else 'pods'}, which could not be read",
            hint="see the step that read them (Inventory and allocation) for what is missing",
        )


def check_scheduling(
    nodes: pd.DataFrame,
    pods: pd.DataFrame,
    *,
    pod_specs: Iterable[Mapping[str, Any]] | None = None,
    topologies: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """All scheduling checks; ``pod_specs`` (raw Pod objects) add the affinity and request/limit checks."""
    require_frames(nodes, pods)
    specs = list(pod_specs or [])
    out = untolerated_gpu_pods(nodes, pods) + untainted_gpu_nodes(nodes) + non_gpu_pods_on_gpu_nodes(nodes, pods)
    out += unknown_product_affinity(nodes, pods, specs) + request_limit_problems(specs)
    if topologies:
        out += split_across_sockets(pods, topologies)
    return out


def pod_specs_from(src) -> list[dict]:
    """Raw Pod objects of every namespace from a source when it has them (``src.objects("pods")``), else []."""
    try:
        return list(src.objects("pods"))
    except NotProvided:
        return []
