"""The probe pod of :mod:`gpulib.nccl.job`: its defaults (``gpulib/data/nccl/nccl_job_defaults.csv``), the checked
inputs (name, sweep, extra environment) and the container and pod spec every probe manifest is built from."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import gpulib.nccl.probe_files as _files
from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import settings
from gpulib.nccl.probe import SUPPORTED, parse_size, size_sweep

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
    raw = (
        d["collectives"].split(";") if value is None else (value.split(",") if isinstance(value, str) else list(value))
    )
    colls = [str(c).strip() for c in raw if str(c).strip()]
    bad = [c for c in colls if c not in SUPPORTED]
    if bad or not colls:
        raise InvalidParameter(f"collectives={value!r}: the probe runs {', '.join(SUPPORTED)}; got {bad or 'none'}")
    return colls


def _sizes(min_bytes: str | int | None, max_bytes: str | int | None, d: Mapping[str, str]) -> tuple[str, str]:
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
