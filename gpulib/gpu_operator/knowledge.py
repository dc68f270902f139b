"""GPU Operator knowledge from ``gpulib/data/gpu_operator/``: the operand table (``operator_components.csv``), settings
(``operator_settings.csv``) and the SOP of every check (``operator_sop.yaml``, turned into a Finding by
:func:`gpulib.gpu_operator.findings.sop`).
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd
import yaml

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import data_path, load_table, settings


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
def gpucluster_components() -> pd.DataFrame:
    """The GPUCluster (DRA stack) operand table: component, spec key, DaemonSet, deploy label, default."""
    return load_table("gpucluster_components").fillna("")


def setting(key: str) -> str:
    """A value of ``gpulib/data/gpu_operator/operator_settings.csv`` as written there
    (:func:`gpulib.core.knowledge.settings`)."""
    return settings("operator_settings").text(key)


@lru_cache(maxsize=1)
def sop_table() -> dict[str, dict]:
    """``data/gpu_operator/operator_sop.yaml``: check id -> severity, title, sop_step, commands, escalation, source."""
    doc = yaml.safe_load(data_path("operator_sop.yaml").read_text())
    for key, entry in doc.items():
        if not str(entry.get("source", "")).strip():
            raise InvalidParameter(f"operator_sop.yaml entry {key!r} has no source")
    return doc
