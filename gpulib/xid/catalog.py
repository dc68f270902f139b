"""NVIDIA XID errors: the catalog as data.

``lookup(code)`` answers "what does XID N mean and what do I do": mnemonic, our-words description,
category, NVIDIA's immediate and investigatory resolution buckets, fatal or not, DCGM's health
severity. The catalog is ``gpulib/data/xid/xid_catalog.csv`` (codes 1-172, each row citing its source);
unknown codes get an explicit ``unknown`` record, never an exception. :func:`annotate` adds the catalog's columns to
the events of :func:`gpulib.xid.kernel_log.parse_kernel_log`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from gpulib.core.knowledge import load_table

CATEGORIES = ("application", "driver", "memory", "NVLink", "hardware-PCIe", "thermal-power", "meta")


@dataclass(frozen=True)
class XidRecord:
    """One XID code as NVIDIA's catalog (and DCGM / NVSentinel) describe it."""

    code: int
    mnemonic: str
    description: str
    category: str
    immediate_action: str
    investigatory_action: str
    fatal: bool
    unused_on_datacenter: bool = False
    dcgm_subsystem: str = ""
    dcgm_severity: str = ""
    legacy_causes: str = ""
    notes: str = ""
    inferred: str = "no"
    source: str = ""
    known: bool = True

    @property
    def title(self) -> str:
        """Short label for charts and findings: ``XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS``."""
        return f"XID {self.code} {self.mnemonic}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


@lru_cache(maxsize=1)
def _records() -> dict[int, XidRecord]:
    df = load_table("xid_catalog")
    out: dict[int, XidRecord] = {}
    for row in df.to_dict("records"):
        code = int(row["code"])
        out[code] = XidRecord(
            code=code,
            mnemonic=_text(row["mnemonic"]),
            description=_text(row["description"]),
            category=_text(row["category"]),
            immediate_action=_text(row["immediate_action"]),
            investigatory_action=_text(row["investigatory_action"]),
            fatal=_text(row["fatal"]) == "yes",
            unused_on_datacenter=_text(row["unused_on_datacenter"]) == "yes",
            dcgm_subsystem=_text(row["dcgm_subsystem"]),
            dcgm_severity=_text(row["dcgm_severity"]),
            legacy_causes=_text(row["legacy_causes"]),
            notes=_text(row["notes"]),
            inferred=_text(row["inferred"]),
            source=_text(row["source"]),
        )
    return out


def xid_catalog() -> pd.DataFrame:
    """The whole XID catalog as a DataFrame (one row per code)."""
    return load_table("xid_catalog")


def lookup(code: Any) -> XidRecord:
    """Describe an XID code. Unknown or unparsable codes give an explicit ``unknown`` record.

    >>> lookup(79).immediate_action
    'RESTART_BM'
    """
    try:
        n = int(str(code).strip())
    except (TypeError, ValueError):
        n = -1
    rec = _records().get(n)
    if rec is not None:
        return rec
    return XidRecord(
        code=n,
        mnemonic="UNKNOWN",
        category="unknown",
        fatal=False,
        known=False,
        description=f"XID {code!r} is not in NVIDIA's catalog as shipped here (codes 1-172); "
        "newer drivers may define it",
        immediate_action="CONTACT_SUPPORT",
        investigatory_action="CONTACT_SUPPORT",
        notes="check https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html for newer codes",
        source="gpulib fallback for codes missing from gpulib/data/xid/xid_catalog.csv",
    )


@lru_cache(maxsize=1)
def _action_classes() -> dict[str, tuple[str, bool]]:
    t = load_table("xid_action_classes")
    return {
        str(r["immediate_action"]): (str(r["incident_class"]), r["hardware_incident"] == "yes") for _, r in t.iterrows()
    }


def incident_class(code: Any) -> str:
    """The incident class of an XID, from NVIDIA's immediate action for it (the catalog's ``immediate_action``
    column, mapped by ``gpulib/data/xid/xid_action_classes.csv``): ``ignore``, ``application``, ``gpu_reset``,
    ``node_reboot``, ``memory``, ``nvlink``, ... A code the catalog does not know gets CONTACT_SUPPORT's class."""
    act = lookup(code).immediate_action or "CONTACT_SUPPORT"
    return _action_classes().get(act, _action_classes()["CONTACT_SUPPORT"])[0]


def hardware_classes() -> set[str]:
    """The XID incident classes that count as hardware incidents (``hardware_incident`` of xid_action_classes.csv):
    not IGNORE, RESTART_APP, CHECK_UVM or the sympathetic XID 45."""
    return {c for c, hw in _action_classes().values() if hw}


def soft_classes() -> set[str]:
    """The XID incident classes that are no hardware incident (NVIDIA says ignore, or restart the application)."""
    return {c for c, hw in _action_classes().values() if not hw}


def recovery_actions() -> pd.DataFrame:
    """NVML recovery-action enum announced by XID 154 (code, name, bucket)."""
    return load_table("xid_recovery_actions")


def annotate(events: pd.DataFrame) -> pd.DataFrame:
    """Add catalog columns (mnemonic, category, immediate_action, investigatory_action, fatal) to events."""
    out = events.copy()
    recs = [lookup(x) for x in out["xid"]] if len(out) else []
    for col in ("mnemonic", "category", "immediate_action", "investigatory_action"):
        out[col] = [getattr(r, col) for r in recs]
    out["fatal"] = [r.fatal for r in recs]
    return out
