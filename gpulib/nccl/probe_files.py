"""The probe's ConfigMap: the source of :mod:`gpulib.nccl.probe` and the bus-factor table it reads, as the keys
of one ``v1 ConfigMap``, so that a public PyTorch image runs the probe without gpulib installed.

The data is read from the installed package (``importlib.resources``), never pasted: the ConfigMap always holds
the probe of the gpulib that wrote the manifest. A ConfigMap holds at most 1 MiB
(https://kubernetes.io/docs/concepts/configuration/configmap/); :func:`configmap_bytes` measures it.
:func:`wiring_problems` checks that a pod template mounts that ConfigMap and that its ``torchrun`` command runs
the script key from the mount folder. Key names and the mount folder are in ``gpulib/data/nccl/nccl_job_defaults.csv``.
"""

from __future__ import annotations

import os
import shlex
from importlib import resources
from typing import Any, Mapping

from gpulib.core.knowledge import data_path, settings
from gpulib.nccl.probe import BUS_FACTORS_FILE as _BUS_FACTORS  # the name the probe looks for next to itself

__all__ = [
    "probe_source",
    "configmap_data",
    "configmap",
    "configmap_bytes",
    "script_path",
    "script_argv",
    "wiring_problems",
    "configmap_limit_bytes",
    "VOLUME",
]

#: the pod volume name of the probe ConfigMap
VOLUME = "probe"


def _d(key: str) -> str:
    return settings("nccl_job_defaults").text(key)


def probe_source() -> str:
    """The text of ``gpulib/nccl/probe.py`` as installed."""
    return resources.files("gpulib.nccl").joinpath("probe.py").read_text(encoding="utf-8")


def configmap_data() -> dict[str, str]:
    """``{script key: probe source, "nccl_bus_factors.csv": the table}``."""
    return {
        _d("probe_script_key"): probe_source(),
        _BUS_FACTORS: data_path(f"nccl/{_BUS_FACTORS}").read_text(encoding="utf-8"),
    }


def configmap_name(workload_name: str) -> str:
    return f"{workload_name}{_d('probe_configmap_suffix')}"


def configmap(workload_name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The ``v1 ConfigMap`` named ``<workload_name>-script`` holding :func:`configmap_data`."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": configmap_name(workload_name), "namespace": namespace, "labels": dict(labels)},
        "data": configmap_data(),
    }


def configmap_limit_bytes() -> int:
    """The 1 MiB a ConfigMap may hold (``configmap_limit_bytes`` of ``nccl_job_defaults.csv``)."""
    return int(settings("nccl_job_defaults").number("configmap_limit_bytes"))


def configmap_bytes(cm: Mapping[str, Any]) -> int:
    """Bytes of the ConfigMap's ``data`` values (UTF-8), the part the 1 MiB limit is about."""
    return sum(len(str(v).encode("utf-8")) for v in (cm.get("data") or {}).values())


def script_path() -> str:
    """Where the container finds the probe: ``<probe_mount_path>/<probe_script_key>``."""
    return f"{_d('probe_mount_path').rstrip('/')}/{_d('probe_script_key')}"


def volume(cm_name: str) -> dict[str, Any]:
    return {"name": VOLUME, "configMap": {"name": cm_name, "defaultMode": 0o444}}


def volume_mount() -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": _d("probe_mount_path"), "readOnly": True}


def script_argv(command: list[str]) -> list[str]:
    """The argv of a container command: the list itself, or the ``sh -c`` line split as the shell would."""
    if len(command) >= 3 and command[0] in ("/bin/sh", "sh", "/bin/bash", "bash") and command[1] == "-c":
        return shlex.split(command[2])
    return list(command)


def wiring_problems(cm: Mapping[str, Any], template: Mapping[str, Any], where: str) -> list[str]:
    """What is wrong between the ConfigMap and one pod template; [] = it mounts it and runs its script."""
    name = (cm.get("metadata") or {}).get("name")
    data = cm.get("data") or {}
    spec = template.get("spec") or {}
    vols = {v.get("name"): v for v in spec.get("volumes") or []}
    cm_vols = {n for n, v in vols.items() if (v.get("configMap") or {}).get("name") == name}
    probs: list[str] = []
    if not cm_vols:
        return [f"{where}: no volume from ConfigMap/{name}"]
    for c in spec.get("containers") or []:
        mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") in cm_vols]
        argv = script_argv(c.get("command") or [])
        scripts = [a for a in argv if a.endswith(".py")]
        if not mounts:
            probs.append(f"{where}: container {c.get('name')!r} does not mount ConfigMap/{name}")
            continue
        if "torchrun" not in argv or len(scripts) != 1:
            probs.append(f"{where}: container {c.get('name')!r} does not run one .py script under torchrun")
            continue
        folder, key = os.path.split(scripts[0])
        if folder.rstrip("/") not in {m.get("mountPath", "").rstrip("/") for m in mounts}:
            probs.append(
                f"{where}: {scripts[0]} is not under the ConfigMap's mount path "
                f"{', '.join(m.get('mountPath', '') for m in mounts)}"
            )
        for needed in (key, _BUS_FACTORS):
            if needed not in data:
                probs.append(f"{where}: ConfigMap/{name} has no key {needed!r} (keys: {', '.join(sorted(data))})")
    return probs
