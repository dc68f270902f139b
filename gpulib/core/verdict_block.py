"""The verdict block a runbook page opens with: severity, cause and next command, then Meaning, Impact, Diagnosis,
Mitigation (the headings of the kube-prometheus runbooks, https://runbooks.prometheus-operator.dev/).

Impact is who is hit: the pods a finding names (``data["pods"]``, ``data["pod"]`` with ``data["namespace"]``) and
their namespaces, the teams that own them; else the node and GPU it is scoped to. A heading with nothing to say is
left out. Commands are ``<pre><code>`` blocks (copyable as they are; a copy button where the page runs scripts:
https://developer.mozilla.org/en-US/docs/Web/API/Clipboard/writeText). With more than one critical or warning
finding the block opens with one line per finding.
"""

from __future__ import annotations

import html
from typing import Any, Iterable

from gpulib.core.findings import Finding, Severity
from gpulib.core.money import money

#: the copy button: a script-free page shows the plain code block above it
_COPY = (
    "<button type='button' title='copy' style='font-size:11px;margin:0 0 6px 0' "
    "onclick=\"navigator.clipboard.writeText(this.previousElementSibling.innerText)\">copy</button>"
)


def command_html(commands: Iterable[str]) -> str:
    """One ``<pre><code>`` block per command, each with its copy button."""
    return "".join(f"<pre><code>{html.escape(c)}</code></pre>{_COPY}" for c in commands)


def pods_hit(f: Finding) -> list[str]:
    """``namespace/pod`` of every pod the finding names, first-seen order."""
    data: dict[str, Any] = f.data or {}
    out: list[str] = []
    for p in data.get("pods") or []:
        if isinstance(p, dict) and p.get("pod"):
            out.append(f"{p.get('namespace') or 'default'}/{p['pod']}")
        elif isinstance(p, str) and p:
            out.append(p)
    pod = data.get("pod")
    if isinstance(pod, str) and pod:
        out.append(pod if "/" in pod or not data.get("namespace") else f"{data['namespace']}/{pod}")
    return list(dict.fromkeys(out))


def impact_html(f: Finding) -> str:
    """The pods and teams (namespaces) hit; else the scope; empty when the finding names neither."""
    e = html.escape
    pods = pods_hit(f)
    if pods:
        teams = list(dict.fromkeys(p.split("/", 1)[0] for p in pods))
        shown = ", ".join(e(p) for p in pods[:8]) + (f" and {len(pods) - 8} more" if len(pods) > 8 else "")
        return (
            f"<p><b>{len(pods)} pod(s) hit:</b> {shown}<br><b>teams (namespaces):</b> {e(', '.join(teams))}"
            + (f"<br><small>on {e(f.where)}</small>" if f.where else "")
            + "</p>"
        )
    if f.where:
        return f"<p>{e(f.where)}: no pod named in the evidence.</p>"
    return ""


def _opening(fs: list[Finding]) -> str:
    hot = [f for f in fs if f.severity in (Severity.CRITICAL, Severity.WARNING)]
    if len(hot) < 2:
        return ""
    counts = " · ".join(
        f"{sum(f.severity == s for f in hot)} {s.value}"
        for s in (Severity.CRITICAL, Severity.WARNING)
        if any(f.severity == s for f in hot)
    )
    lines = "".join(
        f"<li><b style='color:{f.severity.colour}'>{html.escape(f.severity.value.upper())}</b> "
        f"{html.escape(f.title)}" + (f" <small>({html.escape(f.where)})</small>" if f.where else "") + "</li>"
        for f in hot
    )
    return f"<p><b>{counts}</b></p><ul style='margin-top:0'>{lines}</ul>"


def _by_money(fs: list[Finding], most: int = 5) -> str:
    """A report's front: the actions with a monthly saving, largest first, with the namespace that owns each."""
    priced = [f for f in fs if float((f.data or {}).get("monthly_saving") or 0) > 0]
    priced.sort(key=lambda f: -float(f.data["monthly_saving"]))
    if not priced:
        return ""
    rows = "".join(
        f"<li><b>{html.escape(money(f.data['monthly_saving'], f.data.get('currency') or 'USD'))}/month</b> · "
        + (f"{html.escape(str(f.data['namespace']))} · " if f.data.get("namespace") else "")
        + f"{html.escape(f.title)}</li>"
        for f in priced[:most]
    )
    return f"<p><b>Top actions by money</b> ({len(priced)} with a saving)</p><ol style='margin-top:0'>{rows}</ol>"


def verdict_html(top: Finding | None, rerun: str, others: Iterable[Finding] = (), *, report: bool = False) -> str:
    """The block for the top finding (``None``: nothing found) and the run's other findings; a ``report`` opens
    with its actions ranked by money."""
    e = html.escape
    if top is None:
        return (
            "<h3 id='verdict'>Verdict: <span style='color:#1b7f3b'>OK</span></h3><p>No finding: every check of this "
            f"runbook ran and found nothing to act on.</p><p><small>Run: <code>{e(rerun)}</code></small></p>"
        )
    sev = top.severity
    nxt = top.commands[0] if top.commands else (f"gpuops run {top.runbook}" if top.runbook else "")
    out = (
        (_by_money([top, *others]) if report else "")
        + f"<h3 id='verdict'>Verdict: <span style='color:{sev.colour}'>{e(sev.value.upper())}</span> · {e(top.title)}"
        + (f" <small>({e(top.where)})</small>" if top.where else "")
        + "</h3>"
        + _opening([top, *others])
        + (f"<p><b>Next:</b></p>{command_html([nxt])}" if nxt else "")
    )
    if top.summary:
        out += f"<h4>Meaning</h4><p>{e(top.summary)}</p>"
    impact = impact_html(top)
    if impact:
        out += f"<h4>Impact</h4>{impact}"
    if top.evidence:
        out += "<h4>Diagnosis</h4><ul>" + "".join(f"<li>{e(x)}</li>" for x in top.evidence) + "</ul>"
    if top.sop_step or top.commands:
        out += "<h4>Mitigation</h4>" + (f"<p>{e(top.sop_step)}</p>" if top.sop_step else "")
        out += command_html(top.commands)
    if top.escalation:
        out += f"<h4>Escalate</h4><p>{e(top.escalation)}</p>"
    return out
