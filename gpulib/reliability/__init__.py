"""Reliability domain: one node's history on one time axis with a verdict from data-file rules (``node_health``),
and the fleet's incident rates, time out of service, repeat offenders and before/after changes
(``gpu_reliability_report``)."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562)
_EXPORTS = {
    "NodeHealthInputs": "steps",
    "RateRatio": "rates",
    "node_findings": "findings",
    "node_timeline": "timeline",
    "node_verdict": "verdict",
    "rate_ratio": "rates",
    "timeline_chart": "view",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
