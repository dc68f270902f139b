"""GPU Operator knowledge from ``gpulib/data/``: the operand table (``operator_components.csv``), settings
(``operator_settings.csv``) and the SOP of every check (``operator_sop.yaml``), turned into a Finding by :func:`sop`.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import data_path, load_table


# --------------------------------------------------------------------------------------------
# knowledge
# --------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _components() -> pd.DataFrame:
    return load_table("operator_components").fillna("").set_index("component")


def components() -> pd.DataFrame:
    """The operand table (component, Helm key, DaemonSet, state, deploy label, validator init container)."""
    return _components().reset_index()


@lru_cache(maxsize=1)
def _settings() -> dict[str, str]:
    t = load_table("operator_settings")
    return {str(k): str(v) for k, v in zip(t["key"], t["value"])}


def setting(key: str) -> str:
    s = _settings()
    if key not in s:
        raise InvalidParameter(f"no operator setting {key!r}; known: {', '.join(sorted(s))}")
    return s[key]


@lru_cache(maxsize=1)
def sop_table() -> dict[str, dict]:
    """``data/gpu_operator/operator_sop.yaml``: check id -> severity, title, sop_step, commands, escalation, source."""
    import yaml

    doc = yaml.safe_load(data_path("operator_sop.yaml").read_text())
    for key, entry in doc.items():
        if not str(entry.get("source", "")).strip():
            raise InvalidParameter(f"operator_sop.yaml entry {key!r} has no source")
    return doc


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def sop(check: str, *, evidence: Iterable[str] = (), node: str | None = None, confidence: float = 1.0,
        **fields: Any) -> Finding:
    """The Finding for a failed check, its texts filled from ``fields`` (unknown placeholders stay ``<x>``)."""
    table = sop_table()
    if check not in table:
        raise InvalidParameter(f"no SOP for check {check!r}; known: {', '.join(table)}")
    e = table[check]
    f = _Blank({"node": node or "", **fields})
    return Finding(Severity(e["severity"]), e["title"].format_map(f), sop_step=e["sop_step"].format_map(f),
                   commands=[c.format_map(f) for c in e.get("commands") or []], evidence=list(evidence),
                   escalation=(e.get("escalation") or "").format_map(f), category="gpu-operator", node=node,
                   confidence=confidence, runbook="operator_install", data={"check": check, **_jsonable(fields)})


def _jsonable(d: dict) -> dict:
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v) for k, v in d.items()}
