"""Interview prep: a model answer per part of the framework, built from the demo fleet's figures, and the
follow-up questions an interviewer asks, answers collapsed until opened.

Templates: ``gpulib/data/learn/interview_answers.csv``; follow-ups: ``gpulib/data/learn/interview_followups.csv``
(each row with its source). Money is written ``12,345 USD`` (a ``$`` pair would open a MathJax span in Markdown).
"""

from __future__ import annotations

import html
from typing import Any, Mapping

import pandas as pd

from gpulib.core.knowledge import load_table

__all__ = ["PARTS", "model_answer", "follow_ups", "follow_up_html"]

PARTS = ("resource_management", "inference_deployment", "monitoring_cost", "incident_experience")


def model_answer(part: str, figures: Mapping[str, Any]) -> str:
    """The part's model answer (situation, decision, result, next check) filled with ``figures``."""
    t = load_table("learn/interview_answers").set_index("part")
    if part not in t.index:
        from gpulib.core.errors import InvalidParameter

        raise InvalidParameter(f"part={part!r}: use one of {', '.join(PARTS)}")
    crit = list(figures.get("critical_incidents") or [])
    values = {
        "currency": "USD",
        **dict(figures),
        "n_critical": len(crit),
        "first_critical": crit[0] if crit else "none",
    }
    try:
        return str(t.loc[part, "template"]).format(**values)
    except KeyError as exc:
        from gpulib.core.errors import InvalidParameter

        raise InvalidParameter(
            f"the {part} model answer needs the figure {exc.args[0]!r}, which was not computed",
            hint="the step above that computes it failed: see its error box",
        ) from None


def follow_ups(part: str | None = None) -> pd.DataFrame:
    """Follow-up questions (part, question, answer, source), optionally of one part."""
    t = load_table("learn/interview_followups")
    return t[t["part"] == part].reset_index(drop=True) if part else t


def follow_up_html(part: str) -> str:
    """The part's follow-up questions, each answer in a closed ``<details>`` block with its source."""
    e = html.escape
    out = []
    for r in follow_ups(part).itertuples():
        out.append(
            "<div style='border-left:4px solid #1f5fa8;padding:4px 10px;margin:6px 0'>"
            f"<p><b>Follow-up.</b> {e(r.question)}</p><details><summary>Show a model answer</summary>"
            f"<p>{e(r.answer)}</p><p><small>Source: {e(r.source)}</small></p></details></div>"
        )
    return "".join(out)
