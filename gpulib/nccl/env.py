"""NCCL environment and pod-spec checks: NCCL_* variables against ``gpulib/data/nccl/nccl_env_vars.csv`` (defaults from
``NVIDIA/nccl`` @ 5067397c and the NCCL user guide, https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html),
``/dev/shm`` and memlock of a pod, and what a node's environment looks like from inside a container. The SOP step
and commands of each finding are a row of ``gpulib/data/nccl/nccl_sop.csv``.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Mapping, Sequence

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, FindingList, Severity
from gpulib.core.knowledge import load_table
from gpulib.core.sop import sop
from gpulib.nccl.findings import _fmt_bytes
from gpulib.nccl.results import _thr

# --------------------------------------------------------------------------------------------
# environment and pod checks
# --------------------------------------------------------------------------------------------

_DEBUG_VALUES = {"NCCL_DEBUG": {"INFO", "TRACE"}, "NCCL_P2P_DISABLE": {"1"}, "NCCL_SHM_DISABLE": {"1"}}


def _ifname_matches(spec: str, iface: str) -> bool:
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    parts = [p for p in spec.split(",") if p]
    hit = any(iface == p if exact else iface.startswith(p) for p in parts)
    return not hit if exclude else hit


def check_environment(
    env: Mapping[str, Any],
    *,
    interfaces: Sequence[str] | None = None,
    hcas: Sequence[str] | None = None,
    shm_bytes: int | None = None,
    memlock_bytes: int | str | None = None,
    multi_node: bool | None = None,
    node: str | None = None,
) -> FindingList:
    """Check NCCL-related settings given as plain values (testable without a machine).

    ``env``: the process environment (only ``NCCL_*`` keys are judged). ``interfaces``: network
    interface names present; ``hcas``: RDMA devices present; ``shm_bytes``: size of /dev/shm;
    ``memlock_bytes``: ``ulimit -l`` in bytes, ``-1`` or ``"unlimited"``. Checks unknown variable
    names (typos), debugging variables left set, NCCL_SOCKET_IFNAME / NCCL_IB_HCA matching nothing,
    /dev/shm size and memlock (``nccl_thresholds.csv``).
    """
    if not isinstance(env, Mapping):
        raise InvalidParameter(f"env must be a mapping of variable -> value, got {type(env).__name__}")
    known = load_table("nccl_env_vars").set_index("name")
    out = FindingList()
    nccl = {str(k): str(v) for k, v in env.items() if str(k).startswith("NCCL_")}
    for name, val in nccl.items():
        if name not in known.index:
            close = difflib.get_close_matches(name, list(known.index), n=1, cutoff=0.8)
            step = (
                sop("nccl_sop", "env_misspelt_variable", suggestion=close[0])
                if close
                else sop("nccl_sop", "env_unknown_variable")
            )
            out.append(
                Finding(
                    Severity.WARNING if close else Severity.INFO,
                    f"Unknown NCCL variable {name}",
                    summary=(
                        f"did you mean {close[0]}? NCCL ignores misspelt variables"
                        if close
                        else "not in the project's catalog of NCCL variables (it may be newer or a plugin's)"
                    ),
                    sop_step=step.sop_step,
                    evidence=[f"{name}={val}"],
                    category="nccl-env",
                    node=node,
                    confidence=0.8 if close else 0.4,
                )
            )
            continue
        cat = str(known.loc[name, "category"])
        noisy = name in _DEBUG_VALUES and val.strip().upper() in _DEBUG_VALUES[name]
        if noisy or (cat == "debug" and name not in _DEBUG_VALUES and name not in ("NCCL_DEBUG_FILE",)):
            step = sop("nccl_sop", "env_debug_variable_set", name=name)
            out.append(
                Finding(
                    Severity.WARNING,
                    f"Debugging variable {name} left set",
                    summary=f"{known.loc[name, 'meaning']}; NCCL's docs say debugging variables should not stay in production",
                    sop_step=step.sop_step,
                    commands=step.commands,
                    evidence=[f"{name}={val}"],
                    category="nccl-env",
                    node=node,
                )
            )
    spec = nccl.get("NCCL_SOCKET_IFNAME")
    if spec and interfaces is not None:
        hits = [i for i in interfaces if _ifname_matches(spec, i)]
        if not hits:
            step = sop("nccl_sop", "env_socket_ifname_matches_nothing")
            out.append(
                Finding(
                    Severity.CRITICAL,
                    "NCCL_SOCKET_IFNAME matches no interface",
                    summary="NCCL will fail with 'Bootstrap : no socket interface found'",
                    sop_step=step.sop_step,
                    commands=step.commands,
                    evidence=[f"NCCL_SOCKET_IFNAME={spec}", f"interfaces: {', '.join(interfaces) or 'none'}"],
                    category="nccl-env",
                    node=node,
                )
            )
    hca = nccl.get("NCCL_IB_HCA")
    if hca and hcas is not None:
        names = [h.split(":")[0] for h in hcas]
        spec_names = hca.lstrip("^=").split(",")
        if not hca.startswith("^") and not any(
            any(n.startswith(p.split(":")[0]) for n in names) for p in spec_names if p
        ):
            step = sop("nccl_sop", "env_ib_hca_matches_nothing")
            out.append(
                Finding(
                    Severity.CRITICAL,
                    "NCCL_IB_HCA matches no RDMA device",
                    summary="NCCL finds no HCA and falls back to sockets (or fails)",
                    sop_step=step.sop_step,
                    commands=step.commands,
                    evidence=[f"NCCL_IB_HCA={hca}", f"devices: {', '.join(hcas) or 'none'}"],
                    category="nccl-env",
                    node=node,
                )
            )
    if multi_node and nccl.get("NCCL_IB_DISABLE") == "1":
        step = sop("nccl_sop", "env_ib_disabled_multi_node")
        out.append(
            Finding(
                Severity.WARNING,
                "NCCL_IB_DISABLE=1 on a multi-node job",
                summary="inter-node traffic uses TCP sockets",
                sop_step=step.sop_step,
                evidence=["NCCL_IB_DISABLE=1"],
                category="nccl-env",
                node=node,
            )
        )
    if shm_bytes is not None:
        floor = _thr("shm_min_bytes")
        if shm_bytes < floor:
            step = sop("nccl_sop", "env_shm_small")
            out.append(
                Finding(
                    Severity.WARNING,
                    "/dev/shm is small for NCCL",
                    summary=f"/dev/shm is {_fmt_bytes(int(shm_bytes))}; NCCL's SHM transport fails with 'No space left on device' (container default 64 MiB)",
                    sop_step=step.sop_step,
                    commands=step.commands,
                    evidence=[f"/dev/shm {shm_bytes} bytes < {int(floor)} bytes"],
                    category="nccl-env",
                    node=node,
                )
            )
    if memlock_bytes is not None:
        unlimited = str(memlock_bytes).strip().lower() in ("unlimited", "-1", "infinity")
        if not unlimited:
            sev = Severity.WARNING if multi_node or hcas else Severity.INFO
            step = sop("nccl_sop", "env_memlock_limited")
            out.append(
                Finding(
                    sev,
                    "memlock limit is not unlimited",
                    summary="RDMA memory registration (ibv_reg_mr) can fail with 'Cannot allocate memory'",
                    sop_step=step.sop_step,
                    commands=step.commands,
                    evidence=[f"memlock {memlock_bytes} bytes"],
                    category="nccl-env",
                    node=node,
                )
            )
    return out


def _quantity_bytes(q: Any) -> int | None:
    if q is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGTPE]i?|[kmgtpe])?\s*", str(q))
    if not m:
        return None
    mult = {
        "": 1,
        "k": 1e3,
        "K": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "P": 1e15,
        "E": 1e18,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "Pi": 2**50,
        "Ei": 2**60,
    }[m.group(2) or ""]
    return int(float(m.group(1)) * mult)


def check_pod_spec(pod: Mapping[str, Any], *, multi_node: bool = False) -> FindingList:
    """Check a Pod (``kubectl get pod -o json``, or a Job/PyTorchJob pod template ``spec``) for NCCL needs:
    /dev/shm as emptyDir ``medium: Memory``, hostIPC/hostNetwork, RDMA/SR-IOV resources, IPC_LOCK."""
    if not isinstance(pod, Mapping):
        raise InvalidParameter(f"pod must be a dict (kubectl get pod -o json), got {type(pod).__name__}")
    spec = pod.get("spec", pod) or {}
    name = (pod.get("metadata") or {}).get("name", "pod")
    out = FindingList()
    vols = {v.get("name"): v for v in spec.get("volumes", []) or []}
    containers = spec.get("containers", []) or []
    shm_vol = None
    for c in containers:
        for vm in c.get("volumeMounts", []) or []:
            if vm.get("mountPath", "").rstrip("/") == "/dev/shm":
                shm_vol = vols.get(vm.get("name"))
    if spec.get("hostIPC"):
        out.append(
            Finding(
                Severity.INFO,
                "hostIPC: /dev/shm is the node's",
                evidence=[f"{name}: hostIPC true"],
                summary="NCCL SHM works across pods on the node; isolation is reduced",
                category="nccl-pod",
            )
        )
    elif shm_vol is None:
        out.append(
            Finding(
                Severity.WARNING,
                "No /dev/shm volume in the pod",
                summary="the container gets the 64 MiB default /dev/shm; NCCL fails with 'Error while creating shared memory segment'",
                sop_step=sop("nccl_sop", "pod_no_shm_volume").sop_step,
                evidence=[f"{name}: no volumeMount at /dev/shm"],
                category="nccl-pod",
            )
        )
    else:
        ed = shm_vol.get("emptyDir")
        if ed is None or ed.get("medium") != "Memory":
            out.append(
                Finding(
                    Severity.WARNING,
                    "/dev/shm volume is not memory-backed",
                    sop_step=sop("nccl_sop", "pod_shm_not_memory").sop_step,
                    evidence=[f"{name}: volume {shm_vol.get('name')} = {shm_vol}"],
                    category="nccl-pod",
                )
            )
        elif ed.get("sizeLimit") is not None and (_quantity_bytes(ed["sizeLimit"]) or 0) < _thr("shm_min_bytes"):
            out.append(
                Finding(
                    Severity.WARNING,
                    "/dev/shm sizeLimit is small for NCCL",
                    sop_step=sop("nccl_sop", "pod_shm_size_small").sop_step,
                    evidence=[f"sizeLimit {ed['sizeLimit']}"],
                    category="nccl-pod",
                )
            )
    res_names: set[str] = set()
    caps: set[str] = set()
    for c in containers:
        r = c.get("resources") or {}
        for k in ("limits", "requests"):
            res_names.update((r.get(k) or {}).keys())
        caps.update(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])
    rdma = sorted(
        n
        for n in res_names
        if n.startswith("rdma/")
        or "sriov" in n.lower()
        or n.startswith("nvidia.com/hostdev")
        or n.startswith("openshift.io/")
        or "infiniband" in n.lower()
    )
    if multi_node and not rdma and not spec.get("hostNetwork"):
        out.append(
            Finding(
                Severity.WARNING,
                "Multi-node job without RDMA resources",
                summary="no rdma/* or SR-IOV resource requested and no hostNetwork: NCCL will use TCP sockets between nodes",
                sop_step=sop("nccl_sop", "pod_multi_node_without_rdma").sop_step,
                evidence=[f"{name}: resources {sorted(res_names)}"],
                category="nccl-pod",
            )
        )
    if (
        rdma
        and "IPC_LOCK" not in caps
        and not any((c.get("securityContext") or {}).get("privileged") for c in containers)
    ):
        out.append(
            Finding(
                Severity.WARNING,
                "RDMA without IPC_LOCK capability",
                summary="memory registration needs an unlimited memlock; add the IPC_LOCK capability",
                sop_step=sop("nccl_sop", "pod_rdma_without_ipc_lock").sop_step,
                evidence=[f"{name}: rdma resources {rdma}"],
                category="nccl-pod",
            )
        )
    if spec.get("hostNetwork"):
        out.append(
            Finding(
                Severity.INFO,
                "hostNetwork: NCCL sees the node's interfaces",
                summary="set NCCL_SOCKET_IFNAME to the data interface so bootstrap does not pick a management NIC",
                evidence=[f"{name}: hostNetwork true"],
                category="nccl-pod",
            )
        )
    return out


def collect_environment() -> dict[str, Any]:
    """Read the local values :func:`check_environment` needs (env, interfaces, HCAs, /dev/shm, memlock)."""
    import os
    import resource

    def _ls(p: str) -> list[str]:
        try:
            return sorted(os.listdir(p))
        except OSError:
            return []

    try:
        st = os.statvfs("/dev/shm")
        shm = st.f_frsize * st.f_blocks
    except OSError:
        shm = None
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return {
        "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
        "interfaces": _ls("/sys/class/net"),
        "hcas": _ls("/sys/class/infiniband"),
        "shm_bytes": shm,
        "memlock_bytes": -1 if soft == resource.RLIM_INFINITY else soft,
    }
