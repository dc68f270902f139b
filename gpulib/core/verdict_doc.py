"""``findings.json`` version 2: the verdict in the vocabulary the tools around us read.

Version 2 keeps every field of version 1 (``runbook``, ``parameters``, ``worst``, ``findings``, ``errors`` and, where
the run knows them, ``usage_errors``, ``steps``, ``inputs``), so a version-1 reader keeps working, and adds:

* ``status``: done | incomplete | bad parameter (:func:`gpulib.run.record.status_of`'s rule, without the engine's
  "failed", which no notebook writes);
* ``verdict``: the node verdict as NVIDIA Health Validation words it (severity PASS/INFO/WARNING/CRITICAL/UNKNOWN,
  the affected entities, the ordered action chain ``drain`` → ``reset_gpu`` → ``restart_os`` → ``service_required``:
  https://docs.nvidia.com/health-validation/reference/verdict-schema.md and
  https://docs.nvidia.com/health-validation/reference/checks/node.md) with NVSentinel's ``recommendedAction`` code
  (NVIDIA/NVSentinel: data-models/protobufs/health_event.proto @264bfab8), and the evidence with the inputs used;
* on each finding its ``entities``, ``actions`` and ``nvsentinel_action``.

An incomplete run (a step without data, a bad parameter) is UNKNOWN, never PASS. The action chain of a finding comes
from its SOP bucket (``data["xid13"]``, ``data["xid31"]``, ``data["rule"]`` or ``data["bucket"]``) through
``gpulib/data/core/verdict_actions.csv``. The published JSON Schema is ``docs/schema/findings.v2.schema.json``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

from gpulib.core.knowledge import load_table

SCHEMA_VERSION = 2
#: where the schema is published, relative to the repository root
SCHEMA_PATH = "docs/schema/findings.v2.schema.json"
#: our severities in Health Validation's words
HV_SEVERITY = {"critical": "CRITICAL", "warning": "WARNING", "info": "INFO", "ok": "PASS"}
UNKNOWN = "UNKNOWN"
#: the order of Health Validation's action chain (a finding's chain is a subsequence of it)
CHAIN = ("drain", "reset_gpu", "restart_os", "service_required")
#: the finding data keys that name an SOP bucket, most specific first
_KEYS = ("xid13", "xid31", "rule", "bucket")
#: the categories of the finding a runbook adds when it could not decide (gpulib/runbook.py: usage, data)
INCOMPLETE_CATEGORIES = ("usage", "data")


@lru_cache(maxsize=1)
def _actions() -> dict[str, tuple[tuple[str, ...], str]]:
    out = {}
    for r in load_table("core/verdict_actions").fillna("").to_dict("records"):
        chain = tuple(a for a in str(r["actions"]).split(";") if a)
        if [a for a in CHAIN if a in chain] != list(chain):
            raise ValueError(f"verdict_actions.csv {r['key']}: {chain} is not in the order {CHAIN}")
        out[str(r["key"])] = (chain, str(r["nvsentinel_action"]))
    return out


@lru_cache(maxsize=1)
def nvsentinel_codes() -> dict[str, int]:
    """NVSentinel's ``RecommendedAction`` names and their numbers (``gpulib/data/core/nvsentinel_actions.csv``)."""
    return {str(r["name"]): int(r["code"]) for r in load_table("core/nvsentinel_actions").to_dict("records")}


def nvsentinel_name(code: Any) -> str:
    """The ``RecommendedAction`` name of a number or name (the CloudEvents exporter writes the number);
    UNKNOWN for anything else."""
    codes = nvsentinel_codes()
    if isinstance(code, str) and code in codes:
        return code
    try:
        n = int(code)
    except (TypeError, ValueError):
        return UNKNOWN
    return next((k for k, v in codes.items() if v == n), UNKNOWN)


def _get(f: Any, name: str) -> Any:
    return f.get(name) if isinstance(f, dict) else getattr(f, name, None)


def bucket_of(f: Any) -> str:
    """The SOP key a finding (a :class:`~gpulib.core.findings.Finding` or its dict) was decided by; ``""``."""
    data = _get(f, "data") or {}
    for k in _KEYS:
        if data.get(k):
            return str(data[k])
    return ""


def actions_of(f: Any) -> tuple[list[str], str]:
    """The ordered action chain and the NVSentinel action of one finding."""
    table = _actions()
    if _get(f, "category") in INCOMPLETE_CATEGORIES and str(_get(f, "title") or "").startswith("Runbook incomplete"):
        chain, code = table["@incomplete"]
    else:
        chain, code = table.get(bucket_of(f), table["@default"])
    return list(chain), code


def entities_of(f: Any) -> list[dict[str, str]]:
    """Node, GPU index, UUID, PCI bus id, MIG instance and pods a finding names (``type``/``value`` pairs)."""
    data = _get(f, "data") or {}
    out: list[dict[str, str]] = []

    def add(kind: str, value: Any) -> None:
        if value not in (None, "") and {"type": kind, "value": str(value)} not in out:
            out.append({"type": kind, "value": str(value)})

    add("node", _get(f, "node"))
    add("gpu", _get(f, "gpu"))
    add("gpu_uuid", data.get("uuid"))
    add("pci_bus_id", data.get("pci_bus_id"))
    mig = data.get("gpu_i_id")
    if mig not in (None, ""):
        add("mig_instance", f"{data.get('gpu_i_profile') or 'gi'}/{mig}")
    pods = data.get("pods") if isinstance(data.get("pods"), list) else []
    for p in pods:
        if isinstance(p, dict) and p.get("pod"):
            add("pod", f"{p.get('namespace') or ''}/{p['pod']}".lstrip("/"))
    if data.get("pod"):
        add("pod", f"{data.get('namespace') or ''}/{data['pod']}".lstrip("/"))
    return out


def finding_block(f: Any) -> dict[str, Any]:
    """The fields version 2 adds to one finding."""
    chain, code = actions_of(f)
    return {"entities": entities_of(f), "actions": chain, "nvsentinel_action": code}


def status_of(errors: Iterable[str], usage_errors: Iterable[str]) -> str:
    """done | incomplete | bad parameter, as :func:`gpulib.run.record.status_of` rules (no notebook writes
    failed)."""
    return "bad parameter" if list(usage_errors) else "incomplete" if list(errors) else "done"


def verdict_block(doc: dict[str, Any]) -> dict[str, Any]:
    """The ``verdict`` of a version-2 document from its version-1 fields (findings sorted most severe first)."""
    findings = doc.get("findings") or []
    status = status_of(doc.get("errors") or [], doc.get("usage_errors") or [])
    top = findings[0] if findings else None
    severity = UNKNOWN if status != "done" else HV_SEVERITY[str(doc.get("worst") or "ok")]
    chain, code = actions_of(top) if top is not None else ([], "NONE")
    if status != "done":
        chain, code = actions_of({"category": "data", "title": "Runbook incomplete"})
    entities: list[dict[str, str]] = []
    for f in findings:
        if f.get("severity") in ("critical", "warning") or f is top:
            entities += [e for e in entities_of(f) if e not in entities]
    return {
        "severity": severity,
        "cause": str(top.get("title") or "") if top else "no finding",
        "entities": entities,
        "actions": chain,
        "nvsentinel_action": code,
        "sop_step": str(top.get("sop_step") or "") if top else "",
        "commands": list(top.get("commands") or []) if top else [],
        "evidence": {
            "facts": list(top.get("evidence") or []) if top else [],
            "inputs": list(doc.get("inputs") or []),
            "errors": list(doc.get("errors") or []) + list(doc.get("usage_errors") or []),
        },
    }


def upgrade(doc: dict[str, Any]) -> dict[str, Any]:
    """A version-1 document (or a version-2 one, unchanged) as version 2: the reader of an older run folder gets
    the same shape as a new one."""
    if doc.get("schema") == SCHEMA_VERSION and "verdict" in doc:
        return doc
    out = dict(doc)
    out["schema"] = SCHEMA_VERSION
    out["findings"] = [{**f, **finding_block(f)} for f in doc.get("findings") or []]
    out["status"] = status_of(out.get("errors") or [], out.get("usage_errors") or [])
    out["verdict"] = verdict_block(out)
    return out
