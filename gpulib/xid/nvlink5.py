"""Decode of the NVLink5 XIDs 144-150 (NVIDIA's "XID 144-150 Decode" sheet, ``gpulib/data/xid_nvlink5_decode.csv``).

The driver prints these XIDs with an interrupt-info word and an error-status word:
``NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT/NETIR_LINK_DOWN Fatal XC0 i0 Link 07 (0x02500011 0x00000000 ...)``
(line layout: leptonai/gpud components/accelerator/nvidia/xid/nvlink_logs_test.go; NVIDIA/NVSentinel
health-monitors/syslog-health-monitor/pkg/xid/parser/csv.go reads the first word as intrinfo and the second
as error status). A rule matches when its error status equals the status word and its 32-character intrinfo
pattern (``1``/``0`` fixed bits, ``-`` any; V2 for drivers from R575, V1 before) matches the intrinfo word,
as gpud's ``patternMatches`` does (components/accelerator/nvidia/xid/xid.go @4a8de33a). The matching rule's
resolution bucket (RESET_GPU, IGNORE, XID_154_EVAL) replaces the generic WORKFLOW_NVLINK5_ERR.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from gpulib.core.knowledge import load_table

CODES = range(144, 151)


@lru_cache(maxsize=1)
def _rules() -> list[dict[str, Any]]:
    df = load_table("xid_nvlink5_decode").fillna("")
    out = []
    for r in df.to_dict("records"):
        r = dict(r, xid=int(r["xid"]), error_status=int(str(r["error_status"]), 16))
        out.append(r)
    return out


def _matches(pattern: str, word: int) -> bool:
    if len(pattern) != 32:
        return False
    for i, ch in enumerate(pattern):
        bit = (word >> (31 - i)) & 1
        if ch == "1" and not bit or ch == "0" and bit:
            return False
    return True


def decode(xid: int, intrinfo: int, error_status: int, unit: str | None = None) -> dict[str, Any] | None:
    """The decode rule for an NVLink5 XID (dict with unit, resolution, investigatory, severity ...) or None."""
    if int(xid) not in CODES:
        return None
    hits = [
        r
        for r in _rules()
        if r["xid"] == int(xid)
        and r["error_status"] == int(error_status)
        and (_matches(r["intrinfo_pattern_v2"], int(intrinfo)) or _matches(r["intrinfo_pattern_v1"], int(intrinfo)))
    ]
    if unit and len(hits) > 1:
        named = [
            r
            for r in hits
            if unit.upper() in str(r["unit"]).upper().split("/") or str(r["unit"]).upper() in unit.upper()
        ]
        hits = named or hits
    return dict(hits[0]) if hits else None


def bucket(xid: int, detail_words: Any, message: str = "") -> str | None:
    """Resolution bucket for an XID 144-150 event from its detail words; None when the words do not decode."""
    if int(xid) not in CODES or not detail_words or len(detail_words) < 2:
        return None
    unit = message.split()[0] if message else None
    rule = decode(int(xid), int(detail_words[0]), int(detail_words[1]), unit)
    if rule is None:
        return None
    return "XID_154" if rule["resolution"] == "XID_154_EVAL" else (rule["resolution"] or None)
