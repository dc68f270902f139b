"""The in-cluster NCCL probe as Kubernetes objects.

:func:`job_manifest` writes a ``batch/v1`` Job that runs :mod:`gpulib.nccl.probe` under ``torchrun`` on the
GPUs of one node; :func:`pytorchjob_manifest` writes a Kubeflow ``kubeflow.org/v1`` PyTorchJob (one Master and
``nodes - 1`` Workers, one pod per node, pods kept on different nodes) for a multi-node run. Each comes as a
``v1 List`` of two objects: a ConfigMap holding the probe's source (:mod:`gpulib.nccl.probe_files`) and the
Job / PyTorchJob that mounts it read-only and runs ``torchrun ... /probe/nccl_probe.py``, so the default image
is a public PyTorch image (``image`` in the defaults below) and nothing has to be built; ``image=`` takes the
image ``deploy/nccl-probe/Dockerfile`` builds for a registry the nodes can reach (air-gapped). Both give the
pods what NCCL needs: a memory-backed ``emptyDir`` at ``/dev/shm``, ``nvidia.com/gpu`` limits, a toleration
for the GPU taint, ``NCCL_NVLS_ENABLE=0`` (explicit, although the probe forces it too) and
``NCCL_DEBUG=INFO`` so the pod log holds both the nccl-tests table and the NCCL lines that
``runbooks/nccl_check.ipynb`` reads from one file (``kubectl logs ... > probe.txt``).

Defaults (image, sweep, /dev/shm size, deadlines) are in ``gpulib/data/nccl/nccl_job_defaults.csv``. Nothing here
talks to a cluster: :func:`validate` checks the ConfigMap and a Job with kubernetes-validate (strict), a PyTorchJob
structurally plus each pod template as a core ``PodTemplate``, and that every pod mounts the ConfigMap and runs
its script; :func:`apply_commands` gives the kubectl lines. ``python3 -m gpulib.nccl.job --gpus 8 > probe.yaml``
writes the one-node manifest (``--help`` for the options).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import gpulib.nccl.probe_files as _files
from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import settings
from gpulib.nccl.probe_files import configmap_bytes

__all__ = [
    "job_manifest",
    "pytorchjob_manifest",
    "probe_manifest",
    "pod_templates",
    "validate",
    "check_pytorchjob",
    "pod_findings",
    "to_yaml",
    "write_manifest",
    "apply_commands",
    "defaults",
    "workload",
    "probe_configmap",
    "image_note",
    "configmap_bytes",
    "InvalidParameter",
]

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL = "app.kubernetes.io/name"
_PART_OF = "app.kubernetes.io/part-of"
_GPU_RESOURCE = "nvidia.com/gpu"
_SHM_VOLUME = "dshm"
_PYTORCHJOB_API = "kubeflow.org/v1"
_RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}


def defaults() -> dict[str, str]:
    """``gpulib/data/nccl/nccl_job_defaults.csv`` as ``{key: value}``."""
    s = settings("nccl_job_defaults")
    return {k: s.text(k) for k in s}


def _gpu_taint_key() -> str:
    return settings("scheduling_settings").text("gpu_taint_key")


# ------------------------------------------------------------------------------------ validation of inputs
def _check_name(name: str, what: str = "name") -> str:
    if not isinstance(name, str) or len(name) > 52 or not _DNS1123.match(name):
        raise InvalidParameter(
            f"{what}={name!r} is not a valid name: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 52 characters "
            "(Kubernetes appends pod suffixes)"
        )
    return name


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameter(f"{what}={value!r} must be a whole number >= 1")
    return value


def _collectives(value: Iterable[str] | str | None, d: Mapping[str, str]) -> list[str]:
    from gpulib.nccl.probe import SUPPORTED

    raw = (
        d["collectives"].split(";") if value is None else (value.split(",") if isinstance(value, str) else list(value))
    )
    colls = [str(c).strip() for c in raw if str(c).strip()]
    bad = [c for c in colls if c not in SUPPORTED]
    if bad or not colls:
        raise InvalidParameter(f"collectives={value!r}: the probe runs {', '.join(SUPPORTED)}; got {bad or 'none'}")
    return colls


def _sizes(min_bytes: str | int | None, max_bytes: str | int | None, d: Mapping[str, str]) -> tuple[str, str]:
    from gpulib.nccl.probe import parse_size, size_sweep

    lo = str(d["min_bytes"] if min_bytes is None else min_bytes)
    hi = str(d["max_bytes"] if max_bytes is None else max_bytes)
    try:
        size_sweep(parse_size(lo), parse_size(hi))
    except ValueError as exc:
        raise InvalidParameter(f"min_bytes={lo!r} / max_bytes={hi!r}: {exc}") from exc
    return lo, hi


def _extra_env(extra_env: Mapping[str, Any] | None) -> list[dict[str, str]]:
    out = []
    for k, v in (extra_env or {}).items():
        if not _ENV_NAME.match(str(k)):
            raise InvalidParameter(f"extra_env: {k!r} is not an environment variable name")
        if k == "NCCL_NVLS_ENABLE" and str(v) != "0":
            raise InvalidParameter(
                f"extra_env: NCCL_NVLS_ENABLE={v!r}: the probe keeps NVLink SHARP off "
                "(gpulib.nccl.probe forces NCCL_NVLS_ENABLE=0)"
            )
        if k in ("NCCL_DEBUG", "NCCL_NVLS_ENABLE"):
            continue  # already set by the generator
        out.append({"name": str(k), "value": str(v)})
    return out


# ------------------------------------------------------------------------------------ the pod
def _probe_args(colls: list[str], lo: str, hi: str, iters: int, warmup: int) -> list[str]:
    return [
        _files.script_path(),
        "--collectives",
        ",".join(colls),
        "--min-bytes",
        lo,
        "--max-bytes",
        hi,
        "--iters",
        str(iters),
        "--warmup",
        str(warmup),
    ]


def _container(
    name: str,
    image: str,
    command: list[str],
    gpus: int,
    d: Mapping[str, str],
    env: list[dict[str, str]],
    rdma_resource: str | None,
    ports: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    limits: dict[str, Any] = {_GPU_RESOURCE: gpus}
    if rdma_resource:
        limits[rdma_resource] = 1
    c: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": [
            {"name": "NCCL_NVLS_ENABLE", "value": "0"},
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "NCCL_DEBUG_SUBSYS", "value": d["nccl_debug_subsys"]},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ]
        + env,
        "resources": {
            "requests": {"cpu": d["cpu_request"], "memory": d["memory_request"], _GPU_RESOURCE: gpus},
            "limits": limits,
        },
        "volumeMounts": [{"name": _SHM_VOLUME, "mountPath": "/dev/shm"}, _files.volume_mount()],
    }
    # registration of RDMA memory needs an unlimited memlock (``NVIDIA/nccl: src/transport/net_ib`` @ 5067397c)
    if rdma_resource:
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    if ports:
        c["ports"] = ports
    return c


def _pod_spec(
    container: dict[str, Any],
    d: Mapping[str, str],
    *,
    restart_policy: str,
    node_selector: Mapping[str, str] | None,
    host_network: bool,
    affinity: dict[str, Any] | None,
    cm_name: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [container],
        "volumes": [
            {"name": _SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": d["shm_size_limit"]}},
            _files.volume(cm_name),
        ],
        "tolerations": [{"key": _gpu_taint_key(), "operator": "Exists", "effect": "NoSchedule"}],
    }
    if node_selector:
        spec["nodeSelector"] = {str(k): str(v) for k, v in node_selector.items()}
    if host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    if affinity:
        spec["affinity"] = affinity
    return spec


def _labels(name: str) -> dict[str, str]:
    return {_LABEL: "nccl-probe", _PART_OF: "gpu-runbooks", "gpu-runbooks/probe": name}


def _common(name, namespace, image, collectives, min_bytes, max_bytes, iters, warmup, extra_env):
    d = defaults()
    name = _check_name(name if name is not None else d["name"])
    namespace = _check_name(namespace if namespace is not None else d["namespace"], "namespace")
    image = image if image is not None else d["image"]
    if not isinstance(image, str) or not image.strip() or any(ch.isspace() for ch in image):
        raise InvalidParameter(f"image={image!r} is not an image reference")
    colls = _collectives(collectives, d)
    lo, hi = _sizes(min_bytes, max_bytes, d)
    iters = _positive_int(int(d["iters"]) if iters is None else iters, "iters")
    warmup = int(d["warmup"]) if warmup is None else warmup
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise InvalidParameter(f"warmup={warmup!r} must be a whole number >= 0")
    return d, name, namespace, image, _probe_args(colls, lo, hi, iters, warmup), _extra_env(extra_env)


def job_manifest(
    name: str | None = None,
    *,
    gpus: int = 8,
    node: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    namespace: str | None = None,
    image: str | None = None,
    collectives: Iterable[str] | str | None = None,
    min_bytes: str | int | None = None,
    max_bytes: str | int | None = None,
    iters: int | None = None,
    warmup: int | None = None,
    extra_env: Mapping[str, Any] | None = None,
    host_network: bool = False,
) -> dict[str, Any]:
    """A ``batch/v1`` Job running the probe on ``gpus`` GPUs of one node (one process per GPU, ``torchrun
    --standalone``). ``node`` pins it to a node (``kubernetes.io/hostname``); ``node_selector`` adds labels such
    as ``nvidia.com/gpu.product``. Read the result with ``kubectl logs job/<name>``."""
    d, name, namespace, image, probe, env = _common(
        name, namespace, image, collectives, min_bytes, max_bytes, iters, warmup, extra_env
    )
    gpus = _positive_int(gpus, "gpus")
    selector = dict(node_selector or {})
    if node:
        selector["kubernetes.io/hostname"] = str(node)
    command = ["torchrun", "--standalone", f"--nproc_per_node={gpus}"] + probe
    container = _container("nccl-probe", image, command, gpus, d, env, None, None)
    labels = _labels(name)
    cm = _files.configmap(name, namespace, labels)
    return _as_list(
        cm,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {
                "backoffLimit": int(d["backoff_limit"]),
                "activeDeadlineSeconds": int(d["active_deadline_seconds"]),
                "ttlSecondsAfterFinished": int(d["ttl_seconds_after_finished"]),
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": _pod_spec(
                        container,
                        d,
                        restart_policy="Never",
                        node_selector=selector,
                        host_network=host_network,
                        affinity=None,
                        cm_name=cm["metadata"]["name"],
                    ),
                },
            },
        },
    )


def pytorchjob_manifest(
    name: str | None = None,
    *,
    nodes: int = 2,
    gpus_per_node: int = 8,
    node_names: Sequence[str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    namespace: str | None = None,
    image: str | None = None,
    collectives: Iterable[str] | str | None = None,
    min_bytes: str | int | None = None,
    max_bytes: str | int | None = None,
    iters: int | None = None,
    warmup: int | None = None,
    rdma_resource: str | None = None,
    host_network: bool = False,
    extra_env: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Kubeflow PyTorchJob for a multi-node probe: one Master and ``nodes - 1`` Workers, one pod per node
    (required pod anti-affinity on the hostname), each ``torchrun --nnodes=<nodes> --node_rank=$RANK`` with
    ``gpus_per_node`` processes. The training operator sets ``MASTER_ADDR``/``MASTER_PORT`` and ``RANK`` (the
    pod's index: Master 0, Worker i -> i + 1; kubeflow/training-operator pkg/controller.v1/pytorch/envvar.go).
    ``node_names`` restricts the pods to those nodes (e.g. the node pair to test); ``rdma_resource`` (e.g.
    ``rdma/rdma_shared_device_a``) requests one RDMA device per pod and adds ``IPC_LOCK``; without it or
    ``host_network`` NCCL talks TCP sockets between nodes, which :func:`pod_findings` reports."""
    d, name, namespace, image, probe, env = _common(
        name, namespace, image, collectives, min_bytes, max_bytes, iters, warmup, extra_env
    )
    nodes = _positive_int(nodes, "nodes")
    if nodes < 2:
        raise InvalidParameter(
            f"nodes={nodes}: a PyTorchJob probe is for 2 or more nodes; use job_manifest() on one node"
        )
    gpus = _positive_int(gpus_per_node, "gpus_per_node")
    names = [str(n) for n in (node_names or [])]
    if names and len(set(names)) < nodes:
        raise InvalidParameter(f"node_names={names}: {nodes} pods need {nodes} distinct nodes, got {len(set(names))}")
    if rdma_resource is not None and not re.fullmatch(r"[a-z0-9.\-]+/[A-Za-z0-9_.\-]+", rdma_resource):
        raise InvalidParameter(
            f"rdma_resource={rdma_resource!r} is not an extended resource name like rdma/rdma_shared_device_a"
        )
    port = int(d["pytorchjob_port"])
    launch = (
        'exec torchrun --nnodes={nnodes} --nproc_per_node={g} --node_rank="$RANK" '
        '--master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" {probe}'
    ).format(nnodes=nodes, g=gpus, probe=" ".join(probe))
    labels = _labels(name)
    cm = _files.configmap(name, namespace, labels)
    affinity: dict[str, Any] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"gpu-runbooks/probe": name}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    if names:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": names}]}
                ]
            }
        }

    def replica(count: int) -> dict[str, Any]:
        c = _container(
            d["pytorchjob_container"],
            image,
            ["/bin/sh", "-c", launch],
            gpus,
            d,
            env,
            rdma_resource,
            [{"name": "pytorchjob-port", "containerPort": port, "protocol": "TCP"}],
        )
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": _pod_spec(
                    c,
                    d,
                    restart_policy="Never",
                    node_selector=node_selector,
                    host_network=host_network,
                    affinity=copy.deepcopy(affinity),
                    cm_name=cm["metadata"]["name"],
                ),
            },
        }

    return _as_list(
        cm,
        {
            "apiVersion": _PYTORCHJOB_API,
            "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "runPolicy": {
                    "backoffLimit": int(d["backoff_limit"]),
                    "activeDeadlineSeconds": int(d["active_deadline_seconds"]),
                    "ttlSecondsAfterFinished": int(d["ttl_seconds_after_finished"]),
                },
                "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(nodes - 1)},
            },
        },
    )


def probe_manifest(nodes: int = 1, **kwargs: Any) -> dict[str, Any]:
    """:func:`job_manifest` for one node, :func:`pytorchjob_manifest` for several (``gpus`` or
    ``gpus_per_node`` both accepted)."""
    gpus = kwargs.pop("gpus", None)
    if nodes == 1:
        if "gpus_per_node" in kwargs:
            gpus = kwargs.pop("gpus_per_node")
        for k in ("node_names", "rdma_resource"):
            if kwargs.get(k):
                raise InvalidParameter(f"{k} applies to a multi-node probe (nodes >= 2)")
            kwargs.pop(k, None)
        return job_manifest(gpus=8 if gpus is None else gpus, **kwargs)
    if gpus is not None:
        kwargs.setdefault("gpus_per_node", gpus)
    kwargs.pop("node", None)
    return pytorchjob_manifest(nodes=nodes, **kwargs)


def _as_list(cm: dict[str, Any], work: dict[str, Any]) -> dict[str, Any]:
    """The ConfigMap first (kubectl creates the items in order), then the workload that mounts it."""
    return {"apiVersion": "v1", "kind": "List", "items": [cm, work]}


def workload(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The Job or PyTorchJob of a probe manifest (the ``List``'s workload item, or the manifest itself)."""
    if manifest.get("kind") != "List":
        return manifest  # type: ignore[return-value]
    found = [i for i in manifest.get("items") or [] if (i or {}).get("kind") in ("Job", "PyTorchJob")]
    if len(found) != 1:
        raise InvalidParameter(f"the List holds {len(found)} Job/PyTorchJob items; a probe manifest has exactly one")
    return found[0]


def probe_configmap(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ConfigMap of a probe manifest (None for a bare Job/PyTorchJob)."""
    if manifest.get("kind") != "List":
        return None
    found = [i for i in manifest.get("items") or [] if (i or {}).get("kind") == "ConfigMap"]
    return found[0] if len(found) == 1 else None


def image_note(manifest: Mapping[str, Any]) -> str:
    """One line for the runbook: which image the probe pods pull, and whether it is the public default."""
    d = defaults()
    images = sorted(
        {
            c.get("image")
            for tpl in pod_templates(manifest).values()
            for c in (tpl.get("spec") or {}).get("containers") or []
        }
    )
    image = ", ".join(str(i) for i in images)
    script = _files.script_path()
    if images == [d["image"]]:
        return (
            f"Image: {image}, a public image ({d['image_registry']}; PyTorch with CUDA, NCCL and torchrun): "
            f"nothing to build. The probe script is the ConfigMap in this manifest, mounted at {script}."
        )
    return (
        f"Image: {image} (your own, not the public default {d['image']}): mirror the public image or build "
        f"deploy/nccl-probe/Dockerfile, and push it to a registry the GPU nodes can pull from; the probe script "
        f"still comes from the ConfigMap in this manifest, mounted at {script}."
    )


# ------------------------------------------------------------------------------------ checks
def pod_templates(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod templates of a Job (``{"Job": template}``) or PyTorchJob (``{"Master": ..., "Worker": ...}``)."""
    manifest = workload(manifest)
    kind = manifest.get("kind")
    spec = manifest.get("spec") or {}
    if kind == "Job":
        return {"Job": spec.get("template") or {}}
    if kind == "PyTorchJob":
        return {rt: (rs or {}).get("template") or {} for rt, rs in (spec.get("pytorchReplicaSpecs") or {}).items()}
    raise InvalidParameter(f"kind={kind!r}: expected a Job or a PyTorchJob manifest")


def pod_findings(manifest: Mapping[str, Any]) -> list:
    """:func:`gpulib.nccl.env.check_pod_spec` over every pod template (multi-node for a PyTorchJob)."""
    from gpulib.nccl.env import check_pod_spec

    manifest = workload(manifest)
    multi = manifest.get("kind") == "PyTorchJob"
    out = []
    for rt, tpl in pod_templates(manifest).items():
        named = {
            "metadata": {"name": f"{(manifest.get('metadata') or {}).get('name')}/{rt}"},
            "spec": tpl.get("spec") or {},
        }
        out.extend(check_pod_spec(named, multi_node=multi))
    return out


def check_pytorchjob(manifest: Mapping[str, Any]) -> list[str]:
    """Structural problems of a PyTorchJob (it is a CRD, so kubernetes-validate has no schema for it); [] = none."""
    manifest = workload(manifest)
    probs: list[str] = []
    if manifest.get("apiVersion") != _PYTORCHJOB_API:
        probs.append(f"apiVersion is {manifest.get('apiVersion')!r}, expected {_PYTORCHJOB_API}")
    if manifest.get("kind") != "PyTorchJob":
        probs.append(f"kind is {manifest.get('kind')!r}, expected PyTorchJob")
    name = (manifest.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not _DNS1123.match(name):
        probs.append(f"metadata.name {name!r} is not a DNS-1123 label")
    specs = (manifest.get("spec") or {}).get("pytorchReplicaSpecs")
    if not isinstance(specs, Mapping) or "Master" not in specs:
        return probs + ["spec.pytorchReplicaSpecs needs a Master replica spec"]
    unknown = sorted(set(specs) - {"Master", "Worker"})
    if unknown:
        probs.append(f"unknown replica types {unknown} (Master, Worker)")
    for rt, rs in specs.items():
        rs = rs or {}
        n = rs.get("replicas")
        if rt == "Master" and n != 1:
            probs.append(f"Master.replicas is {n!r}; the training operator expects exactly 1")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            probs.append(f"{rt}.replicas {n!r} must be an integer >= 1")
        if rs.get("restartPolicy") not in _RESTART_POLICIES:
            probs.append(f"{rt}.restartPolicy {rs.get('restartPolicy')!r} not in {sorted(_RESTART_POLICIES)}")
        containers = ((rs.get("template") or {}).get("spec") or {}).get("containers") or []
        main = [c for c in containers if c.get("name") == defaults()["pytorchjob_container"]]
        if not main:
            probs.append(
                f"{rt}: no container named {defaults()['pytorchjob_container']!r} (the operator injects "
                "MASTER_ADDR/RANK and looks up the port there)"
            )
        elif not any(p.get("name") == "pytorchjob-port" for p in main[0].get("ports") or []):
            probs.append(f"{rt}: container has no port named 'pytorchjob-port'")
    return probs


def validate(manifest: Mapping[str, Any], version: str | None = None) -> list[str]:
    """Validate a probe manifest; returns what was checked, raises :class:`InvalidParameter` on the first problem.

    The ConfigMap and a Job go through kubernetes-validate (strict: unknown fields are errors) for ``version``
    (default from ``nccl_job_defaults.csv``). A PyTorchJob gets :func:`check_pytorchjob`, and each replica's pod
    template is validated strictly as a core ``v1 PodTemplate``. Then every pod template must mount the ConfigMap
    and run its script (:func:`gpulib.nccl.probe_files.wiring_problems`), and the ConfigMap must fit in 1 MiB."""
    import kubernetes_validate

    version = str(version or defaults()["k8s_version"])
    shipped = sorted(set(kubernetes_validate.utils.all_versions()), key=lambda v: tuple(int(x) for x in v.split(".")))
    if ".".join(version.split(".")[:2]) not in {".".join(v.split(".")[:2]) for v in shipped}:
        raise InvalidParameter(
            f"version={version!r}: kubernetes-validate has no schema for it",
            hint=f"use one it ships: {shipped[0]} ... {shipped[-1]}",
        )
    cm = probe_configmap(manifest)
    if manifest.get("kind") == "List" and cm is None:
        raise InvalidParameter(
            "the probe List has no (or more than one) ConfigMap: the pods would have no probe script"
        )
    manifest = workload(manifest)
    kind = manifest.get("kind")
    name = (manifest.get("metadata") or {}).get("name")

    def strict(obj: Mapping[str, Any], where: str) -> str:
        try:
            kubernetes_validate.validate(dict(obj), version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise InvalidParameter(f"{where} is not valid Kubernetes {version}: {str(exc).splitlines()[0]}") from exc
        except kubernetes_validate.utils.SchemaNotFoundError as exc:
            raise InvalidParameter(
                f"{where}: kubernetes-validate has no schema for {obj.get('apiVersion')}/"
                f"{obj.get('kind')} in Kubernetes {version}"
            ) from exc
        return f"{where}: valid for Kubernetes {version} (strict)"

    out = []
    if cm is not None:
        cm_name = (cm.get("metadata") or {}).get("name")
        out.append(strict(cm, f"ConfigMap/{cm_name}"))
    if kind == "Job":
        out.append(strict(manifest, f"Job/{name}"))
    elif kind == "PyTorchJob":
        probs = check_pytorchjob(manifest)
        if probs:
            raise InvalidParameter(f"PyTorchJob/{name}: " + "; ".join(probs))
        out.append(f"PyTorchJob/{name}: structure ok (kubeflow.org/v1 CRD: Master/Worker, container, port)")
        for rt, tpl in pod_templates(manifest).items():
            pt = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {
                    "name": f"{name}-{rt.lower()}",
                    "namespace": (manifest.get("metadata") or {}).get("namespace"),
                },
                "template": tpl,
            }
            out.append(strict(pt, f"PyTorchJob/{name} {rt} pod template"))
    else:
        raise InvalidParameter(f"kind={kind!r}: expected a Job or a PyTorchJob manifest")
    if cm is not None:
        out.append(_check_wiring(cm, manifest))
    return out


def _check_wiring(cm: Mapping[str, Any], work: Mapping[str, Any]) -> str:
    kind, md = work.get("kind"), work.get("metadata") or {}
    cm_md = cm.get("metadata") or {}
    probs = (
        []
        if cm_md.get("namespace") == md.get("namespace")
        else [
            f"ConfigMap/{cm_md.get('name')} is in namespace {cm_md.get('namespace')!r}, the pods in {md.get('namespace')!r}"
        ]
    )
    for rt, tpl in pod_templates(work).items():
        probs += _files.wiring_problems(cm, tpl, f"{kind}/{md.get('name')} {rt}")
    size = configmap_bytes(cm)
    if size > _files.configmap_limit_bytes():
        probs.append(f"ConfigMap/{cm_md.get('name')} holds {size} bytes, over the 1 MiB ConfigMap limit")
    if probs:
        raise InvalidParameter("; ".join(probs))
    return (
        f"{kind}/{md.get('name')}: every pod mounts ConfigMap/{cm_md.get('name')} read-only and runs "
        f"{_files.script_path()} ({size} bytes of the 1 MiB a ConfigMap may hold)"
    )


# ------------------------------------------------------------------------------------ output
def to_yaml(manifest: Mapping[str, Any]) -> str:
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    def _str(dumper, data):  # the ConfigMap's script as a readable | block (PyYAML falls back to quotes if it must)
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    _NoAliases.add_representer(str, _str)
    return yaml.dump(dict(manifest), Dumper=_NoAliases, sort_keys=False, default_flow_style=False, width=120)


def write_manifest(manifest: Mapping[str, Any], path: str | Path) -> Path:
    """Write the manifest as YAML (creating the folder); returns the path."""
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(to_yaml(manifest))
    return p


def apply_commands(manifest: Mapping[str, Any], path: str | Path = "nccl-probe.yaml") -> list[str]:
    """kubectl lines: server-side dry run, apply, wait, save the log for the runbook, clean up."""
    cm = probe_configmap(manifest)
    manifest = workload(manifest)
    md = manifest.get("metadata") or {}
    ns, name = md.get("namespace", "default"), md.get("name")
    if manifest.get("kind") == "Job":
        ref, log = f"job/{name}", f"kubectl logs -n {ns} job/{name} > {name}.txt"
        wait = f"kubectl wait -n {ns} --for=condition=complete --timeout=30m job/{name}"
    else:
        ref, log = f"pytorchjob/{name}", f"kubectl logs -n {ns} {name}-master-0 > {name}.txt"
        wait = f"kubectl wait -n {ns} --for=condition=Succeeded --timeout=30m pytorchjob/{name}"
    return [
        f"kubectl apply --dry-run=server -f {path}",
        f"kubectl apply -f {path}",
        wait,
        log,
        f"gpuops run nccl_check -p nccl_tests_file {name}.txt",
        f"kubectl delete -n {ns} {ref}" + (f" configmap/{cm['metadata']['name']}" if cm else ""),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m gpulib.nccl.job``: print (or ``--out``) a validated probe manifest; the image note on stderr."""
    import argparse
    import json
    import sys

    d = defaults()
    p = argparse.ArgumentParser(prog="python3 -m gpulib.nccl.job", description=main.__doc__)
    p.add_argument("--nodes", type=int, default=1, help="1: a Job on one node; 2+: a Kubeflow PyTorchJob")
    p.add_argument("--gpus", type=int, default=8, help="GPUs per node (one torchrun process each)")
    p.add_argument("--node", default=None, help="pin the one-node Job to this node (kubernetes.io/hostname)")
    p.add_argument("--name", default=None, help=f"Job name (default {d['name']})")
    p.add_argument("--namespace", default=None, help=f"namespace (default {d['namespace']})")
    p.add_argument(
        "--image",
        default=None,
        help=f"image with PyTorch + CUDA (default: the public {d['image']}; "
        f"or the one deploy/nccl-probe/Dockerfile builds, e.g. <registry>/{d['custom_image']})",
    )
    p.add_argument(
        "--collectives", default=None, help="comma list (default: " + d["collectives"].replace(";", ",") + ")"
    )
    p.add_argument("--min-bytes", default=None)
    p.add_argument("--max-bytes", default=None)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--json", action="store_true", help="JSON instead of YAML (kubectl reads both; stdlib can parse it)")
    p.add_argument("--out", default=None, help="write the manifest here instead of stdout")
    o = p.parse_args(argv)
    try:
        m = probe_manifest(
            o.nodes,
            gpus=o.gpus,
            node=o.node,
            name=o.name,
            namespace=o.namespace,
            image=o.image,
            collectives=o.collectives,
            min_bytes=o.min_bytes,
            max_bytes=o.max_bytes,
            iters=o.iters,
            warmup=o.warmup,
        )
        checked = validate(m)
    except InvalidParameter as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(m, indent=1) + "\n" if o.json else to_yaml(m)
    if o.out:
        out = Path(o.out).expanduser()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    else:
        sys.stdout.write(text)
    print("\n".join(["# " + line for line in checked + [image_note(m)]]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
