"""One finding per root cause: fold the findings that are symptoms of another into it.

A GPU that fell off the bus (XID 79) also stops reporting telemetry; a row-remap failure is what XID 64 (and
XID 48/63/94/95) reports on the same GPU; a pod that uses a GPU it never requested is also an idle "zombie" and
a pod without a GPU request on a GPU node. Each pair is one problem with one SOP (NVIDIA Xid catalog,
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html: XID 79 "GPU has fallen off the bus", XID 64
"ECC page retirement or row remapper recording failure"), so the overview shows the root finding with every
signal in its evidence, and findings of one kind ordered by their impact (``data["impact"]``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from gpulib.core.findings import Finding

#: within one GPU, the category whose finding is the root cause, first match wins
_GPU_ROOTS = ("memory", "xid")
#: categories that are a symptom of a root finding on the same GPU
_GPU_SYMPTOMS = {"memory": ("xid", "telemetry"), "xid": ("telemetry",)}


def _fold(root: Finding, extra: list[Finding]) -> Finding:
    evidence = list(root.evidence)
    for f in extra:
        evidence.append(f"also: {f.title}" + (f" ({'; '.join(f.evidence)})" if f.evidence else ""))
    return replace(root, evidence=evidence, data={**root.data, "merged": [f.title for f in extra]})


def merge_findings(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` with each symptom folded into its root-cause finding (same node and GPU, or same pod)."""
    fs = list(findings)
    drop: set[int] = set()
    folded: dict[int, list[Finding]] = {}
    by_gpu: dict[tuple, list[int]] = {}
    for i, f in enumerate(fs):
        if f.node and f.gpu not in (None, ""):
            by_gpu.setdefault((f.node, str(f.gpu)), []).append(i)
    for idx in by_gpu.values():
        for cat in _GPU_ROOTS:
            roots = [i for i in idx if fs[i].category == cat and i not in drop]
            if not roots:
                continue
            root = min(roots, key=lambda i: fs[i].severity.rank)
            for i in idx:
                if (
                    i != root
                    and i not in drop
                    and fs[i].category in _GPU_SYMPTOMS[cat]
                    and fs[i].severity.rank >= fs[root].severity.rank
                ):
                    folded.setdefault(root, []).append(fs[i])
                    drop.add(i)
            break
    # one pod: the unrequested-GPU finding is the cause; its idle/zombie finding and a pods-without-request
    # finding naming only such pods are symptoms
    unrequested = {f.data.get("pod"): i for i, f in enumerate(fs) if f.category == "scheduling" and f.data.get("pod")}
    for i, f in enumerate(fs):
        if i in drop or i in unrequested.values():
            continue
        pod = f.data.get("pod")
        pods = f.data.get("pods") if f.data.get("check") == "non_gpu_on_gpu" else None
        if pod in unrequested and f.category == "cost":
            folded.setdefault(unrequested[pod], []).append(f)
            drop.add(i)
        elif pods and all(p in unrequested for p in pods):
            for p in pods:
                folded.setdefault(unrequested[p], []).append(f)
            drop.add(i)
    return [_fold(f, folded[i]) if i in folded else f for i, f in enumerate(fs) if i not in drop]
