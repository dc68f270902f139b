"""Dynamic Resource Allocation: which pod holds which GPU, read from ``resource.k8s.io/v1`` objects.

A GPU node served by NVIDIA's DRA driver (GPU Operator's ``GPUCluster``) advertises no ``nvidia.com/gpu``: its GPUs
are devices in ResourceSlices (``spec.driver``, ``spec.pool.name``, ``spec.nodeName``, ``spec.devices[].name`` and
``.attributes``) and a pod holds one through a ResourceClaim whose ``status.allocation.devices.results[]`` names
``driver``/``pool``/``device`` and whose ``status.reservedFor[]`` names the pod
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/resource-claim-v1/,
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/resource-slice-v1/). NVIDIA's driver
``gpu.nvidia.com`` gives each device the attributes ``type`` (``gpu`` / ``mig``), ``uuid``, ``parentUUID`` and
``profile`` (MIG), ``productName`` and ``pcieBusID``, and names a full GPU ``gpu-<minor>``
(NVIDIA/k8s-dra-driver-gpu: cmd/gpu-kubelet-plugin/deviceinfo.go @03af8246).

* :func:`slice_devices` — one row per advertised device (``DEVICE_COLUMNS``).
* :func:`claim_allocations` — one row per allocated device with its pod and node (``ALLOCATION_COLUMNS``).
* :func:`attach_pods` / :func:`attach_nodes` — the pods and nodes frames with what DRA gives them, so every
  consumer of ``gpu_request`` (impact, idle/zombie, cost) counts DRA-held GPUs.
* :func:`allocation_models` — per GPU node: device plugin, DRA, both or none.
* :func:`dra_holders` — (node, GPU UUID, MIG profile) -> the pod holding it, the rule :func:`attribute_series` and
  the report's totals (:mod:`gpulib.cost.totals`) both apply.
* :func:`attribute_series` — a DCGM frame whose DRA-held GPUs carry no pod label (dcgm-exporter maps DRA pods only
  with ``--kubernetes-enable-dra``, off by default: NVIDIA/dcgm-exporter: pkg/cmd/app.go @5a052c34) gets the pod
  from the claims. With the flag the exporter writes ``pod``/``namespace`` plus ``dra_claim_name``,
  ``dra_claim_namespace``, ``dra_driver_name``, ``dra_pool_name`` and ``dra_device_name`` (kubernetes/website:
  content/en/docs/reference/command-line-tools-reference/feature-gates/KubeletPodResourcesDynamicResources.md
  @653f7bbf); those series are left as they are.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

import numpy as np
import pandas as pd

from gpulib.core.errors import KubeconfigMissing, KubernetesError, MalformedKubernetesObject, NotProvided

__all__ = [
    "ALLOCATION_COLUMNS",
    "DEVICE_COLUMNS",
    "DRA_KINDS",
    "DRIVER",
    "allocation_models",
    "attach_nodes",
    "attach_pods",
    "attribute_series",
    "claim_allocations",
    "device_resource_id",
    "dra_holders",
    "dra_note",
    "dra_objects",
    "slice_devices",
]

#: the DRA driver name of NVIDIA's GPU driver (NVIDIA/k8s-dra-driver-gpu: cmd/gpu-kubelet-plugin/deviceinfo.go
#: @03af8246 publishes its devices under it; the exporter's ``dra_driver_name`` label carries it)
DRIVER = "gpu.nvidia.com"
#: a full GPU's device name, ``gpu-<minor>`` (``GpuInfo.CanonicalName`` in the same file)
_GPU_NAME = re.compile(r"^gpu-(\d+)$")

DEVICE_COLUMNS = [
    "node",
    "driver",
    "pool",
    "device",
    "type",
    "uuid",
    "parent_uuid",
    "pci_bus_id",
    "gpu",
    "product",
    "profile",
]
ALLOCATION_COLUMNS = ["namespace", "claim", "pod", "pod_uid", "request", *DEVICE_COLUMNS]

#: the object kinds :meth:`gpulib.sources.base.Source.objects` reads for DRA: what a source without them says, and
#: the hint (a snapshot saves them with ``kubectl get resourceclaims -A -o json`` / ``... resourceslices -o json``)
DRA_KINDS = {
    "resourceclaims": (
        "ResourceClaims are",
        "use source='live' (Kubernetes API) or a snapshot with resourceclaims.json "
        "(kubectl get resourceclaims -A -o json)",
    ),
    "resourceslices": (
        "ResourceSlices are",
        "use source='live' (Kubernetes API) or a snapshot with resourceslices.json "
        "(kubectl get resourceslices -o json)",
    ),
}


def _items(doc: Any, kind: str) -> list[dict]:
    if doc is None:
        return []
    if isinstance(doc, dict):
        if doc.get("kind") == kind:
            return [doc]
        doc = doc.get("items", [])
    if not isinstance(doc, list) or any(not isinstance(o, dict) for o in doc):
        raise MalformedKubernetesObject(f"expected a {kind} list (kubectl get {kind.lower()}s -o json)")
    return doc


def _attr(attrs: dict, name: str, driver: str) -> Any:
    """A device attribute's value: ``name`` or its fully qualified ``<driver>/name``; a DeviceAttribute holds one of
    ``string``/``int``/``bool``/``version``."""
    a = attrs.get(name, attrs.get(f"{driver}/{name}"))
    if not isinstance(a, dict):
        return None
    for k in ("string", "int", "bool", "version"):
        if k in a:
            return a[k]
    return None


def _text(v: Any) -> str:
    return "" if v is None else str(v)


def _pci(v: Any) -> str:
    """A PCI bus id as DCGM/nvidia-smi print it (``00000000:18:00.0``) from the driver's ``pcieBusID``
    (``0000:18:00.0``)."""
    s = _text(v).strip().upper()
    m = re.fullmatch(r"([0-9A-F]{1,8}):([0-9A-F]{2}):([0-9A-F]{2})\.([0-7])", s)
    return f"{int(m.group(1), 16):08X}:{m.group(2)}:{m.group(3)}.{m.group(4)}" if m else s


def slice_devices(slices: Any) -> pd.DataFrame:
    """``kubectl get resourceslices -o json`` -> one row per device (``DEVICE_COLUMNS``), every driver. ``gpu`` is the
    ``index`` attribute when the driver writes one, else ``""`` (the ``gpu-<minor>`` name is the /dev/nvidia minor,
    not the NVML index DCGM labels with); v1beta1's ``basic`` wrapper is read too."""
    rows = []
    for s in _items(slices, "ResourceSlice"):
        spec = s.get("spec") or {}
        driver, node = _text(spec.get("driver")), _text(spec.get("nodeName"))
        pool = _text((spec.get("pool") or {}).get("name"))
        for d in spec.get("devices") or []:
            if not isinstance(d, dict):
                raise MalformedKubernetesObject(f"ResourceSlice {(s.get('metadata') or {}).get('name')}: bad device")
            body = d.get("basic") if isinstance(d.get("basic"), dict) else d
            attrs = body.get("attributes") or {}
            kind = _text(_attr(attrs, "type", driver))
            rows.append(
                {
                    "node": node,
                    "driver": driver,
                    "pool": pool,
                    "device": _text(d.get("name")),
                    "type": kind,
                    "uuid": _text(_attr(attrs, "uuid", driver)),
                    "parent_uuid": _text(_attr(attrs, "parentUUID", driver)),
                    "pci_bus_id": _pci(_attr(attrs, "pcieBusID", driver) or _attr(attrs, "pciBusID", driver)),
                    "gpu": _text(_attr(attrs, "index", driver)),
                    "product": _text(_attr(attrs, "productName", driver)),
                    "profile": _text(_attr(attrs, "profile", driver)),
                }
            )
    return pd.DataFrame(rows, columns=DEVICE_COLUMNS)


def _selector_node(allocation: dict) -> str:
    """The node a claim was allocated on, from ``allocation.nodeSelector`` (``metadata.name`` In [node])."""
    for term in ((allocation.get("nodeSelector") or {}).get("nodeSelectorTerms")) or []:
        for f in (term or {}).get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(f.get("values") or []) == 1:
                return _text(f["values"][0])
    return ""


def claim_allocations(claims: Any, slices: Any = None, pods: pd.DataFrame | None = None) -> pd.DataFrame:
    """``kubectl get resourceclaims -A -o json`` (+ the ResourceSlices) -> one row per allocated device and pod that
    reserved the claim (``ALLOCATION_COLUMNS``); a claim reserved by nobody keeps ``pod`` empty. The node is the
    slice's ``nodeName``, else the allocation's node selector, else the pod's node (``pods``: a pods frame). Only
    allocated claims appear; devices of every driver are kept (``driver`` says whose)."""
    devs = slice_devices(slices)
    by_key = {(r["driver"], r["pool"], r["device"]): r for r in devs.to_dict("records")}
    pod_node = {}
    if pods is not None and len(pods):
        pod_node = dict(zip(zip(pods["namespace"].astype(str), pods["pod"].astype(str)), pods["node"].astype(str)))
    rows = []
    for c in _items(claims, "ResourceClaim"):
        meta, st = c.get("metadata") or {}, c.get("status") or {}
        alloc = st.get("allocation") or {}
        results = (alloc.get("devices") or {}).get("results") or []
        if not results:
            continue
        ns, name = _text(meta.get("namespace")), _text(meta.get("name"))
        holders = [
            (_text(r.get("name")), _text(r.get("uid")))
            for r in st.get("reservedFor") or []
            if isinstance(r, dict) and r.get("resource") == "pods" and not r.get("apiGroup")
        ] or [("", "")]
        for res in results:
            if not isinstance(res, dict):
                raise MalformedKubernetesObject(f"ResourceClaim {ns}/{name}: allocation result is not an object")
            key = (_text(res.get("driver")), _text(res.get("pool")), _text(res.get("device")))
            dev = by_key.get(key) or dict.fromkeys(DEVICE_COLUMNS, "")
            for pod, uid in holders:
                node = dev["node"] or _selector_node(alloc) or pod_node.get((ns, pod), "")
                rows.append(
                    {
                        **dev,
                        "namespace": ns,
                        "claim": name,
                        "pod": pod,
                        "pod_uid": uid,
                        "request": _text(res.get("request")),
                        "driver": key[0],
                        "pool": key[1],
                        "device": key[2],
                        "node": node,
                    }
                )
    return pd.DataFrame(rows, columns=ALLOCATION_COLUMNS)


def _nvidia(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["driver"] == DRIVER] if len(df) else df


def attach_pods(pods: pd.DataFrame, allocations: pd.DataFrame) -> pd.DataFrame:
    """The pods frame with ``dra_devices`` (the pod's ``gpu.nvidia.com`` devices, dicts of ``ALLOCATION_COLUMNS``)
    filled and the GPUs it holds through DRA added to ``gpu_request``/``gpu_limit`` (a full GPU counts 1) and
    ``mig_requests``/``mig_limits`` (a MIG device under ``nvidia.com/mig-<profile>``, the name the device plugin's
    mixed strategy gives the same device), so the GPU units a pod holds read the same under either model. The
    containers' own resources are left as written (the request/limit checks read those)."""
    out = pods.copy()
    if "dra_devices" not in out:
        out["dra_devices"] = [[] for _ in range(len(out))]
    if out.empty or allocations is None or allocations.empty:
        return out
    mine = _nvidia(allocations)
    held: dict[tuple[str, str], list[dict]] = {}
    for r in mine[mine["pod"] != ""].to_dict("records"):
        held.setdefault((r["namespace"], r["pod"]), []).append(r)
    devices, gpu_add, migs = [], [], []
    for ns, pod, mig in zip(out["namespace"].astype(str), out["pod"].astype(str), out["mig_requests"]):
        ds = held.get((ns, pod), [])
        devices.append(ds)
        gpu_add.append(sum(1 for d in ds if d["type"] == "gpu"))
        m = dict(mig) if isinstance(mig, dict) else {}
        for d in ds:
            if d["type"] == "mig" and d["profile"]:
                k = f"nvidia.com/mig-{d['profile']}"
                m[k] = m.get(k, 0) + 1
        migs.append(m)
    out["dra_devices"] = devices
    add = pd.Series(gpu_add, index=out.index, dtype="int64")
    out["gpu_request"] = pd.to_numeric(out["gpu_request"], errors="coerce").fillna(0).astype("int64") + add
    out["gpu_limit"] = pd.to_numeric(out["gpu_limit"], errors="coerce").fillna(0).astype("int64") + add
    out["mig_requests"] = migs
    out["mig_limits"] = [
        {**(dict(lim) if isinstance(lim, dict) else {}), **m} if any(d["type"] == "mig" for d in ds) else lim
        for lim, m, ds in zip(out["mig_limits"], migs, devices)
    ]
    return out


def attach_nodes(nodes: pd.DataFrame, devices: pd.DataFrame) -> pd.DataFrame:
    """The nodes frame with ``dra_gpus`` (full GPUs the node advertises to ``gpu.nvidia.com`` in ResourceSlices) and,
    where GPU Feature Discovery left no labels (GPUCluster deploys none), ``gpu_product``/``gpu_count`` from them."""
    out = nodes.copy()
    gpus = _nvidia(devices)
    gpus = gpus[gpus["type"] == "gpu"] if len(gpus) else gpus
    if "node" not in out:
        return out
    if not len(gpus):
        out["dra_gpus"] = 0
        return out
    count = gpus.groupby("node")["device"].nunique()
    product = gpus.groupby("node")["product"].first()
    names = out["node"].astype(str)
    out["dra_gpus"] = names.map(count).fillna(0).astype("int64")
    if len(out) and {"gpu_product", "gpu_count"} <= set(out.columns):
        no_label = out["gpu_product"].astype("string").fillna("").eq("")
        out.loc[no_label, "gpu_product"] = names[no_label].map(product).fillna("")
        no_count = out["gpu_count"].isna() & (out["dra_gpus"] > 0)
        out["gpu_count"] = out["gpu_count"].astype("Int64")
        out.loc[no_count, "gpu_count"] = out.loc[no_count, "dra_gpus"]
    return out


def dra_served(node: Any) -> bool:
    """Whether a node row (of :func:`attach_nodes`' frame) has GPUs its ResourceSlices advertise to NVIDIA's DRA
    driver: no device plugin there is the design (NVIDIA/cloud-native-docs: gpu-operator/dra-intro-install.rst
    @52dcb7b8, "an alternative to the NVIDIA Device Plugin")."""
    return int(getattr(node, "dra_gpus", 0) or 0) > 0


def allocation_models(nodes: pd.DataFrame) -> dict[str, str]:
    """GPU node -> ``device plugin`` | ``DRA`` | ``both`` | ``none``: which allocation model serves its GPUs
    (``nvidia.com/gpu``/``nvidia.com/mig-*`` capacity from the device plugin; ``dra_gpus`` from ResourceSlices, see
    :func:`attach_nodes`). ``none``: a node GPU Feature Discovery labels as a GPU node that neither serves. Nodes
    without any GPU sign are left out."""
    out = {}
    for r in nodes.to_dict("records"):
        mig = r.get("mig_capacity") if isinstance(r.get("mig_capacity"), dict) else {}
        plugin = (r.get("gpu_capacity") or 0) > 0 or any((v or 0) > 0 for v in mig.values())
        dra = int(r.get("dra_gpus") or 0) > 0
        if not (plugin or dra or str(r.get("gpu_product") or "")):
            continue
        out[str(r["node"])] = {(True, True): "both", (True, False): "device plugin", (False, True): "DRA"}.get(
            (plugin, dra), "none"
        )
    return out


def device_resource_id(row: dict) -> str:
    """The ``resourceID`` kubelet writes for a DRA device in a pod's ``allocatedResourcesStatus`` when the driver
    gives no CDI id: ``<driver>/<pool>/<device>`` (kubernetes/kubernetes: pkg/kubelet/cm/dra/manager.go
    ``UpdateAllocatedResourcesStatus`` @e0a566e7)."""
    return f"{row['driver']}/{row['pool']}/{row['device']}"


def dra_holders(pods: pd.DataFrame | None) -> dict[tuple[str, str, str], tuple[str, str, str]]:
    """(node, GPU UUID, MIG profile) -> (namespace, pod, container) of every device in the pods frame's
    ``dra_devices``: a full GPU by its UUID and profile ``""``, a MIG device by its parent GPU's UUID and its
    profile; ``container`` is the pod's only container's name, else ``""``. Empty without ``dra_devices``. The one
    holder rule of :func:`attribute_series` and of the report's totals (:mod:`gpulib.cost.totals`)."""
    holder: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    if pods is None or "dra_devices" not in pods or pods.empty:
        return holder
    held = pods[[isinstance(d, list) and len(d) > 0 for d in pods["dra_devices"]]]
    for r in held.to_dict("records"):
        conts = r.get("containers") or []
        cname = conts[0].get("name", "") if len(conts) == 1 and isinstance(conts[0], dict) else ""
        for d in r.get("dra_devices") or []:
            uuid = d["parent_uuid"] if d["type"] == "mig" else d["uuid"]
            prof = d["profile"] if d["type"] == "mig" else ""
            holder[(str(r["node"]) or d["node"], uuid, prof)] = (str(r["namespace"]), str(r["pod"]), cname)
    return holder


def attribute_series(frame: pd.DataFrame | None, pods: pd.DataFrame | None) -> pd.DataFrame | None:
    """A DCGM series/summary frame whose rows on a DRA-held GPU carry no pod label get the holder's ``pod``,
    ``namespace`` (and ``container`` when the pod has one) from the pods frame's ``dra_devices``, matched by node and
    GPU UUID (a MIG device by its parent UUID and profile: :func:`dra_holders`). Rows that have a pod label keep
    it."""
    if frame is None or frame.empty or pods is None or "dra_devices" not in pods or "uuid" not in frame:
        return frame
    holder = dra_holders(pods)
    if not holder:
        return frame
    pod = frame["pod"].astype("string").fillna("") if "pod" in frame else pd.Series("", index=frame.index)
    prof = (
        frame["gpu_i_profile"].astype("string").fillna("")
        if "gpu_i_profile" in frame
        else pd.Series("", index=frame.index)
    )
    # one index lookup for every row (a row-by-row walk over a week of samples took seconds)
    owners = list(holder)
    at = pd.MultiIndex.from_tuples(owners).get_indexer(
        pd.MultiIndex.from_arrays([frame["node"].astype(str), frame["uuid"].astype(str), prof.astype(str)])
    )
    hit = (at >= 0) & (pod.to_numpy(dtype=object) == "")
    if not hit.any():
        return frame
    out = frame.copy()
    rows = np.flatnonzero(hit)
    held = [holder[owners[i]] for i in at[rows]]
    for i, col in enumerate(("namespace", "pod", "container")):
        old = out[col].astype(object) if col in out else pd.Series("", index=out.index, dtype=object)
        vals = old.to_numpy(dtype=object).copy()
        vals[rows] = [h[i] for h in held]
        out[col] = vals.tolist()
    return out


#: source -> ((ResourceClaims, ResourceSlices), why a kind could not be read): read once per source object
_READ: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def dra_note(src) -> str:
    """Why :func:`dra_objects` found no ResourceClaims/ResourceSlices in ``src`` ("" when it read both)."""
    dra_objects(src)
    return _READ[src][1]


def dra_objects(src) -> tuple[list[dict] | None, list[dict] | None]:
    """(ResourceClaims, ResourceSlices) of a :class:`gpulib.sources.base.Source` (``objects('resourceclaims')`` /
    ``objects('resourceslices')``), read once per source. None for a kind the source does not hold (a snapshot
    without the file, a cluster that serves no ``resource.k8s.io/v1`` or forbids reading it); why:
    :func:`dra_note`."""
    if src in _READ:
        return _READ[src][0]
    out: list[list[dict] | None] = []
    notes = []
    for kind in ("resourceclaims", "resourceslices"):
        try:
            out.append(list(src.objects(kind)))
        except (NotProvided, KubeconfigMissing) as exc:
            out.append(None)
            notes.append(f"{kind}: {str(exc).split(' (hint:')[0]}")
        except KubernetesError as exc:
            if exc.status not in (403, 404):
                raise
            out.append(None)
            notes.append(f"{kind}: HTTP {exc.status} ({str(exc).split(' (hint:')[0][:160]})")
    _READ[src] = ((out[0], out[1]), "; ".join(notes))
    return _READ[src][0]
