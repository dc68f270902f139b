"""The Findings model: what is wrong, how sure we are, the evidence, and the next step.

One model for every runbook, the CLI and the reports (docs/architecture.md, "The flow"). A Finding renders as
notebook HTML (``_repr_html_``), as CLI text (:meth:`Finding.as_text`) and as JSON
(:func:`save_findings`), so a scheduled job or a pager can read what a notebook concluded.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Iterable

from gpulib.core.redact import redact, redact_obj
from gpulib.core.verdict_doc import upgrade


class Severity(str, Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"
    OK = "ok"

    @property
    def rank(self) -> int:
        return {"critical": 0, "warning": 1, "info": 2, "ok": 3}[self.value]

    @property
    def colour(self) -> str:
        return {"critical": "#b00020", "warning": "#b36b00", "info": "#1f5fa8", "ok": "#1b7f3b"}[self.value]


@dataclass
class Finding:
    """One conclusion with its SOP step.

    ``confidence`` is 0..1 (how sure the analysis is, e.g. lower when a fallback metric was used).
    ``evidence`` holds short human-readable facts (``"FB_USED 71 GiB, GR_ENGINE_ACTIVE 0.2 % for 5h"``).
    ``commands`` are what the engineer runs next, in order; ``escalation`` says when to hand off.
    ``runbook`` names the runbook to open next (``xid_triage``), if any.
    """

    severity: Severity
    title: str
    summary: str = ""
    sop_step: str = ""
    commands: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    escalation: str = ""
    confidence: float = 1.0
    category: str = ""
    node: str | None = None
    gpu: str | None = None
    runbook: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)
        if not 0.0 <= float(self.confidence) <= 1.0:
            raise ValueError(f"confidence must be within 0..1, got {self.confidence}")

    # -- serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        d["data"] = _jsonable(self.data)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Finding":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    # -- rendering ---------------------------------------------------------------------
    @property
    def where(self) -> str:
        parts = [
            p
            for p in (self.node and f"node {self.node}", self.gpu is not None and self.gpu != "" and f"GPU {self.gpu}")
            if p
        ]
        return ", ".join(parts)

    def as_text(self) -> str:
        return redact(self._text())

    def _text(self) -> str:
        head = f"[{self.severity.value.upper()}] {self.title}"
        if self.where:
            head += f" ({self.where})"
        lines = [head]
        if self.summary:
            lines.append(f"  {self.summary}")
        for ev in self.evidence:
            lines.append(f"  - {ev}")
        if self.sop_step:
            lines.append(f"  SOP: {self.sop_step}")
        for cmd in self.commands:
            lines.append(f"    $ {cmd}")
        if self.escalation:
            lines.append(f"  Escalate: {self.escalation}")
        if self.runbook:
            lines.append(f"  Next runbook: {self.runbook}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return redact(self._html())

    def _html(self) -> str:
        e = html.escape
        ev = "".join(f"<li>{e(x)}</li>" for x in self.evidence)
        cmds = "".join(f"<pre style='margin:2px 0'><code>{e(c)}</code></pre>" for c in self.commands)
        where = f" <small>({e(self.where)})</small>" if self.where else ""
        return (
            f"<div style='border-left:6px solid {self.severity.colour};padding:4px 10px;margin:6px 0'>"
            f"<b style='color:{self.severity.colour}'>{e(self.severity.value.upper())}</b> "
            f"<b>{e(self.title)}</b>{where}"
            + (f"<div>{e(self.summary)}</div>" if self.summary else "")
            + (f"<ul>{ev}</ul>" if ev else "")
            + (f"<div><b>SOP step:</b> {e(self.sop_step)}</div>" if self.sop_step else "")
            + cmds
            + (f"<div><b>Escalate:</b> {e(self.escalation)}</div>" if self.escalation else "")
            + (f"<div><b>Next runbook:</b> <code>{e(self.runbook)}</code></div>" if self.runbook else "")
            + f"<div><small>confidence {self.confidence:.0%}"
            f"{' · ' + e(self.category) if self.category else ''}</small></div>"
            "</div>"
        )


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        try:
            return x.item()
        except (ValueError, TypeError):
            pass
    if hasattr(x, "isoformat"):
        return x.isoformat()
    if isinstance(x, float) and x != x:  # NaN
        return None
    return x


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then the largest impact (``data["impact"]``, e.g. GiB a zombie holds), then most
    confident, then by title (stable for tests and reports)."""

    def impact(f: Finding) -> float:
        try:
            return float(f.data.get("impact") or 0.0)
        except (TypeError, ValueError):
            return 0.0

    return sorted(
        findings, key=lambda f: (f.severity.rank, -impact(f), -f.confidence, f.title, f.node or "", str(f.gpu or ""))
    )


def top_finding(findings: Iterable[Finding]) -> Finding | None:
    fs = sort_findings(findings)
    return fs[0] if fs else None


def worst_severity(findings: Iterable[Finding]) -> Severity:
    fs = sort_findings(findings)
    return fs[0].severity if fs else Severity.OK


#: version 2 (:mod:`gpulib.core.verdict_doc`, published as docs/schema/findings.v2.schema.json) keeps every field
#: of version 1 and adds ``status``, ``verdict`` and each finding's entities and actions
FINDINGS_SCHEMA_VERSION = 2


def save_findings(
    findings: Iterable[Finding],
    path: str | Path,
    *,
    runbook: str = "",
    parameters: dict | None = None,
    errors: list[str] | None = None,
    usage_errors: list[str] | None = None,
    steps: dict[str, str] | None = None,
    inputs: list[str] | None = None,
) -> Path:
    """Write findings as JSON: ``{"schema": 2, "runbook": ..., "findings": [...], "errors": [...], "verdict": ...}``
    (:mod:`gpulib.core.verdict_doc`);
    ``usage_errors`` (parameters that matched nothing) are written when there are any; ``steps`` (what happened to
    each step of the runbook's definition) and ``inputs`` (the inputs of the steps that ran: what the verdict rests
    on, :meth:`gpulib.run.notebook.Session.inputs`) when the run knows them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "schema": FINDINGS_SCHEMA_VERSION,
        "runbook": runbook,
        "parameters": _jsonable(parameters or {}),
        "worst": worst_severity(findings := list(findings)).value,
        "findings": [f.to_dict() for f in sort_findings(findings)],
        "errors": list(errors or []),
    }
    if usage_errors:
        doc["usage_errors"] = list(usage_errors)
    if steps is not None:
        doc["steps"] = dict(steps)
    if inputs is not None:
        doc["inputs"] = list(inputs)
    doc = upgrade(doc)
    path.write_text(redact(json.dumps(redact_obj(doc), indent=2, default=str)))
    return path


def load_findings(path: str | Path) -> tuple[list[Finding], dict[str, Any]]:
    doc = json.loads(Path(path).read_text())
    return [Finding.from_dict(d) for d in doc.get("findings", [])], doc


class FindingList(list):
    """A list of findings that renders as a severity-sorted block in a notebook."""

    def _repr_html_(self) -> str:
        if not self:
            return "<div><b style='color:#1b7f3b'>OK</b> no findings</div>"
        return "".join(f._repr_html_() for f in sort_findings(self))

    def as_text(self) -> str:
        return "\n\n".join(f.as_text() for f in sort_findings(self)) or "[OK] no findings"
