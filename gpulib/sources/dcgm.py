"""dcgm-exporter metrics: field catalogue, label normalisation and the ``/metrics`` scrape parser.

dcgm-exporter's labels moved over time (NVIDIA/dcgm-exporter: internal/pkg/rendermetrics/render_metrics.go @ d5e5f510):
``Hostname`` became ``hostname`` (NVIDIA/dcgm-exporter#655),
old-namespace mode writes ``pod_name``/``pod_namespace``/``container_name``, and a Prometheus scrape
through a ServiceMonitor without ``honorLabels`` renames the workload labels to ``exported_pod``,
``exported_namespace``, ``exported_container`` (the target's own ``pod`` is the exporter's pod).
:func:`normalise_labels` maps all of them onto one vocabulary: ``node, gpu, uuid, model, pci_bus_id,
pod, namespace, container, gpu_i_profile, gpu_i_id``.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Mapping

import pandas as pd

from gpulib.core.knowledge import load_table
from gpulib.sources.signals import canonical, scale

#: workload label candidates in order of preference (the first present and non-empty wins)
_POD_KEYS = ("exported_pod", "pod", "pod_name")
_NS_KEYS = ("exported_namespace", "namespace", "pod_namespace")
_CONTAINER_KEYS = ("exported_container", "container", "container_name")
_NODE_KEYS = ("hostname", "Hostname", "node", "kubernetes_node", "nodename")
_EXPORTER_POD = re.compile(r"^(nvidia-)?dcgm-exporter", re.I)


def fields() -> pd.DataFrame:
    """The DCGM field table (``gpulib/data/nvidia/dcgm_fields.csv``)."""
    return load_table("dcgm_fields")


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    for k in keys:
        v = labels.get(k)
        if v:
            return str(v)
    return ""


def normalise_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Map raw dcgm-exporter / Prometheus labels to the project vocabulary (see module doc)."""
    pod = _first(labels, _POD_KEYS)
    ns = _first(labels, _NS_KEYS)
    container = _first(labels, _CONTAINER_KEYS)
    if "exported_pod" not in labels and _EXPORTER_POD.match(pod or ""):
        # the target's pod label (the exporter itself), not a workload
        pod = ns = container = ""
    node = _first(labels, _NODE_KEYS)
    if not node and labels.get("instance"):
        node = str(labels["instance"]).rsplit(":", 1)[0]
    return {
        "node": node,
        "gpu": str(labels.get("gpu", "")),
        "uuid": _first(labels, ("UUID", "uuid", "gpu_uuid")),
        "model": _first(labels, ("modelName", "model_name")),
        "pci_bus_id": str(labels.get("pci_bus_id", "")),
        "pod": pod,
        "namespace": ns,
        "container": container,
        "gpu_i_profile": _first(labels, ("GPU_I_PROFILE", "gpu_i_profile")),
        "gpu_i_id": _first(labels, ("GPU_I_ID", "gpu_i_id")),
    }


# --------------------------------------------------------------------------------------------
# Prometheus text exposition parser (what dcgm-exporter serves on :9400/metrics)
# --------------------------------------------------------------------------------------------
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
#: a sample with more labels is malformed (dcgm-exporter writes about 15; inferred bound, keeps a crafted
#: line of millions of labels from costing seconds)
MAX_LABELS = 256
_LABEL_HEAD = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"')
_TS = re.compile(r"-?\d+")


def _unescape(v: str) -> str:
    if "\\" not in v:
        return v
    return v.replace("\\\\", "\x00").replace('\\"', '"').replace("\\n", "\n").replace("\x00", "\\")


def _closing_quote(text: str, pos: int) -> int:
    """Index of the first unescaped ``"`` at or after ``pos``, or -1. Linear: each backslash run is counted once."""
    while True:
        j = text.find('"', pos)
        if j < 0:
            return -1
        k = j
        while k > pos and text[k - 1] == "\\":
            k -= 1
        if (j - k) % 2 == 0:
            return j
        pos = j + 1


def _parse_labels_at(text: str, pos: int) -> tuple[dict[str, str], int] | None:
    """Labels ``name="value",...`` from ``text[pos:]`` up to the closing ``}``; (labels, index after ``}``) or None.
    No regex runs over a value, so time and memory stay linear in the line (tests/project/test_parser_limits.py)."""
    out: dict[str, str] = {}
    n = len(text)
    count = 0
    while True:
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos < n and text[pos] == "}":
            return out, pos + 1
        m = _LABEL_HEAD.match(text, pos)
        count += 1
        if not m or count > MAX_LABELS:
            return None
        end = _closing_quote(text, m.end())
        if end < 0:
            return None
        out[m.group(1)] = _unescape(text[m.end() : end])
        pos = end + 1
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos < n and text[pos] == ",":
            pos += 1


def _parse_labels(text: str) -> dict[str, str] | None:
    parsed = _parse_labels_at(text.strip() + "}", 0)
    return parsed[0] if parsed and parsed[1] == len(text.strip()) + 1 else None


def _sample(line: str):
    """(name, labels, value text, timestamp text or None) of one exposition line, or None when malformed."""
    m = _NAME.match(line)
    if not m:
        return None
    pos = m.end()
    labels: dict[str, str] = {}
    if pos < len(line) and line[pos] == "{":
        parsed = _parse_labels_at(line, pos + 1)
        if parsed is None:
            return None
        labels, pos = parsed
    rest = line[pos:]
    if rest[:1] not in (" ", "\t"):
        return None
    parts = rest.split(None, 2)
    if not 1 <= len(parts) <= 2 or (len(parts) == 2 and not _TS.fullmatch(parts[1])):
        return None
    return m.group(0), labels, parts[0], parts[1] if len(parts) == 2 else None


def _float(v: str) -> float:
    low = v.lower()
    if low in ("nan",):
        return math.nan
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    return float(v)


def parse_scrape(text: str | bytes) -> pd.DataFrame:
    """Parse a dcgm-exporter ``/metrics`` scrape into one row per sample.

    Columns: ``metric``, the normalised labels (``node, gpu, uuid, model, pci_bus_id, pod, namespace,
    container, gpu_i_profile, gpu_i_id``), ``value``, ``timestamp`` (NaT unless the line had one),
    ``labels`` (every raw label as a dict) and ``type`` (from ``# TYPE``, else ``untyped``).
    ``# HELP``/``# TYPE`` comments and blank lines are skipped; a malformed line (e.g. a scrape cut
    mid-line) is skipped and counted in ``df.attrs["skipped_lines"]``. ``text`` may be bytes (decoded
    as UTF-8, invalid bytes replaced); the parser never raises on content and is linear in the input.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = "" if text is None else str(text)
    types: dict[str, str] = {}
    rows = []
    skipped = 0
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            parts = s.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        sample = _sample(s)
        if sample is None:
            skipped += 1
            continue
        name, labels, value_text, ts = sample
        try:
            value = _float(value_text)
            stamp = pd.to_datetime(int(ts), unit="ms", utc=True) if ts else pd.NaT
        except (ValueError, OverflowError, pd.errors.OutOfBoundsDatetime):
            skipped += 1
            continue
        row = {
            "metric": name,
            **normalise_labels(labels),
            "value": value,
            "timestamp": stamp,
            "labels": labels,
            "type": types.get(name, "untyped"),
        }
        rows.append(row)
    cols = [
        "metric",
        "node",
        "gpu",
        "uuid",
        "model",
        "pci_bus_id",
        "pod",
        "namespace",
        "container",
        "gpu_i_profile",
        "gpu_i_id",
        "value",
        "timestamp",
        "labels",
        "type",
    ]
    df = pd.DataFrame(rows, columns=cols)
    df["value"] = df["value"].astype(float)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True)
    df.attrs["skipped_lines"] = skipped
    return df


def canonical_scrape(df: pd.DataFrame) -> pd.DataFrame:
    """A :func:`parse_scrape` frame with every metric under its canonical name and in its canonical unit, whatever
    dcgm-exporter generation emitted it (``gpulib/data/sources/signals.csv``); names outside the contract are kept."""
    if df.empty:
        return df
    names = df["metric"].unique()
    to_name = {n: canonical(n) for n in names}
    factors = {n: scale(n) for n in names}
    out = df.copy()
    if any(f != 1.0 for f in factors.values()):
        out["value"] = out["value"] * out["metric"].map(factors).astype(float)
    out["metric"] = out["metric"].map(to_name)
    return out


def _escape(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_labels(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def format_value(v: float) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return repr(round(v, 6))
    return str(v)
