"""Validation and escaping of every value that reaches PromQL, a manifest or a printed shell command.

One place, used by the CLI, the runbooks, the sources and ``gpuops serve``, so a node name from an alert
label is checked exactly as one typed on the command line.

- Kubernetes object names: DNS-1123 subdomain (nodes, pods, deployments) and label (namespaces), as the
  API server checks them: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
- GPU references: the index ``nvidia-smi`` prints, a GPU UUID (``GPU-8-4-4-4-12`` hex), or a MIG device
  UUID (``MIG-<uuid>``, or the older ``MIG-GPU-<uuid>/<gi>/<ci>`` form), as listed by ``nvidia-smi -L``:
  https://docs.nvidia.com/deploy/nvidia-smi/index.html
- PromQL string literals: backslash and double quote escaped, as PromQL parses them:
  https://prometheus.io/docs/prometheus/latest/querying/basics/#string-literals
- Shell words: :func:`shlex.quote` (https://docs.python.org/3/library/shlex.html#shlex.quote).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Iterable

from gpulib.core.errors import InvalidParameter, UnknownGPU

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_UUID = re.compile(rf"^GPU-{_UUID}$")
_MIG_UUID = re.compile(rf"^MIG-{_UUID}$")
_MIG_LEGACY = re.compile(rf"^MIG-GPU-{_UUID}/\d+/\d+$")
_INDEX = re.compile(r"^\d{1,3}$")
#: label names as Prometheus defines them: https://prometheus.io/docs/concepts/data_model/
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _shown(value: object, limit: int = 80) -> str:
    s = repr(str(value))
    return s if len(s) <= limit else s[:limit] + "…'"


def node_name(value: object, *, param: str = "node") -> str:
    """A Kubernetes node name (DNS-1123 subdomain), returned unchanged; InvalidParameter otherwise."""
    s = "" if value is None else str(value)
    if not _DNS1123_SUBDOMAIN.match(s):
        raise InvalidParameter(
            f"{param}={_shown(s)} is not a Kubernetes node name",
            hint="node names are lower-case letters, digits, '-' and '.', at most 253 characters "
            "(kubectl get nodes lists them)",
        )
    return s


def object_name(value: object, *, param: str = "name", kind: str = "object") -> str:
    """A Kubernetes object name (DNS-1123 subdomain: pods, deployments, configmaps)."""
    s = "" if value is None else str(value)
    if not _DNS1123_SUBDOMAIN.match(s):
        raise InvalidParameter(
            f"{param}={_shown(s)} is not a valid Kubernetes {kind} name",
            hint="lower-case letters, digits, '-' and '.', starting and ending with a letter or digit",
        )
    return s


def namespace(value: object, *, param: str = "namespace") -> str:
    """A namespace name (DNS-1123 label, at most 63 characters)."""
    s = "" if value is None else str(value)
    if not _DNS1123_LABEL.match(s):
        raise InvalidParameter(
            f"{param}={_shown(s)} is not a namespace name",
            hint="lower-case letters, digits and '-', at most 63 characters",
        )
    return s


@dataclass(frozen=True)
class GpuRef:
    """A GPU as the user named it: ``kind`` is ``index``, ``uuid`` (GPU-...) or ``mig`` (MIG-...)."""

    kind: str
    value: str

    def __str__(self) -> str:
        return self.value


def gpu_ref(value: object, *, param: str = "gpu") -> GpuRef:
    """Parse a GPU reference: an index (``3``), a GPU UUID or a MIG UUID; UnknownGPU for anything else."""
    s = "" if value is None else str(value).strip()
    if _INDEX.match(s):
        return GpuRef("index", str(int(s)))
    if _GPU_UUID.match(s):
        return GpuRef("uuid", "GPU-" + s[4:].lower())
    if _MIG_UUID.match(s) or _MIG_LEGACY.match(s):
        return GpuRef("mig", "MIG-" + s[4:].lower() if _MIG_UUID.match(s) else s)
    raise UnknownGPU(
        f"{param}={_shown(s)} is not a GPU index, GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) "
        "or MIG UUID (MIG-...)"
    )


def label_name(value: object) -> str:
    """A Prometheus label name."""
    s = "" if value is None else str(value)
    if not _LABEL_NAME.match(s):
        raise InvalidParameter(f"{_shown(s)} is not a Prometheus label name")
    return s


def promql_string(value: object) -> str:
    """``value`` as a PromQL double-quoted string literal (quotes included)."""
    s = "" if value is None else str(value)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def promql_regex_literal(value: object) -> str:
    """``value`` as a PromQL regex matching it literally, quoted (for ``=~``)."""
    return promql_string(re.escape("" if value is None else str(value)))


def shell_quote(value: object) -> str:
    """One shell word (``shlex.quote``)."""
    return shlex.quote("" if value is None else str(value))


def command(*words: object) -> str:
    """A command line whose every word is shell-quoted (``command("kubectl", "cordon", node)``)."""
    return " ".join(shell_quote(w) for w in words)


def one_of(value: object, allowed: Iterable[str], *, param: str) -> str:
    """``value`` if it is one of ``allowed``; InvalidParameter naming the choices otherwise."""
    choices = list(allowed)
    s = "" if value is None else str(value)
    if s not in choices:
        raise InvalidParameter(f"{param}={_shown(s)}; use one of {', '.join(choices)}")
    return s
