"""One Finding per action of the savings plan (:mod:`gpulib.cost.plan`), SOP text from ``cost_sop.csv``.

A zombie (memory held, activity near 0: a stuck process) and idle allocated GPUs (reserved, unused: a
capacity decision) are different problems and get different SOPs. Every finding carries the saving in
the plan, the saving alone, the confidence and the signal the action rests on.
"""

from __future__ import annotations

import pandas as pd

from gpulib.core.findings import Finding, Severity
from gpulib.core.money import money
from gpulib.core.sop import sop
from gpulib.core.timeutil import format_duration
from gpulib.cost.model import ACTIONS, CostReport
from gpulib.cost.usage import GR_ENGINE_ACTIVE

__all__ = ["action_finding", "sop_kind", "verdict_sop"]


#: owners that recreate a deleted pod (https://kubernetes.io/docs/concepts/workloads/controllers/deployment/)
_SCALED_OWNERS = ("deployment", "statefulset", "replicaset")


def _zombie_kind(owner_kind, workload) -> str:
    if str(owner_kind or "").lower() in _SCALED_OWNERS and workload:
        return "zombie_owned"  # deleting the pod would bring it back: scale its owner
    return "zombie"


def sop_kind(row: pd.Series) -> str:
    """``zombie`` | ``idle_allocated`` | the action name: the row of ``cost_sop.csv`` an action uses."""
    if row["action"] == "reclaim":
        if row["pod"] != "":
            return _zombie_kind(row.get("owner_kind"), row.get("workload"))
        return "idle_allocated"
    return str(row["action"])


def verdict_sop(
    state: str, ns: str, pod: str, workload: str = "", owner_kind: str = "", *, low_load: bool = False
) -> tuple[str, str, list[str]]:
    """(``cost_sop.csv`` kind, SOP step, shell-quoted commands) for a pod that the one idle/zombie rule
    (:func:`gpulib.cost.usage.classify_idle`) calls ``zombie`` (stuck: delete it or scale its owner) or ``idle``
    (reserved, unused: ``idle_allocated``, a capacity decision), as the report's actions use them. An idle pod
    with ``low_load`` (it served work in the window, or its sibling replicas are busy) gets ``rightsize``: scaling
    its owner to zero would take a service down, and right-sizing is weighed against serving metrics by the
    report (docs/cost-method.md)."""
    kind = _zombie_kind(owner_kind, workload) if state == "zombie" else "rightsize" if low_load else "idle_allocated"
    t = sop("cost_sop", kind, ns=ns, pod=pod, wl=workload or pod, kind_l=str(owner_kind or "deployment").lower())
    return kind, t.sop_step, t.commands


def action_finding(row: pd.Series, rep: CostReport) -> Finding:
    """The finding for one chosen action (``rep.actions`` row)."""
    cur = rep.currency
    action = row["action"]
    kind = sop_kind(row)
    ns, wl, pod = row["namespace"], row["workload"], row["pod"]
    t = sop(
        "cost_sop",
        kind,
        ns=ns,
        wl=wl,
        pod=pod,
        kind_l=str(row["owner_kind"] or "deployment").lower(),
        node=row["node"],
        n="<n>",
    )
    saving = float(row["monthly_saving"])
    alone = float(row.get("saving_alone", saving))
    if kind in ("zombie", "zombie_owned"):
        title, sev = f"Zombie pod {ns}/{pod} holds GPU memory while idle", Severity.WARNING
    elif kind == "idle_allocated":
        title, sev = f"Idle allocated GPUs: {ns}/{wl}", Severity.WARNING
    elif action == "scale_down":
        title, sev = f"GPU node {row['node']} was never allocated", Severity.INFO
    else:
        title, sev = f"{ACTIONS[action]}: {ns}/{wl}", Severity.INFO
    if saving <= 0:
        sev = Severity.INFO
    evidence = [
        str(row["detail"]),
        f"{row['gpus']:.2f} GPU-equivalents, {money(float(row['monthly_cost']), cur)}/month",
        f"estimated saving {money(saving, cur)}/month ({ACTIONS[action].lower()}), confidence {float(row['confidence']):.0%}",
        f"signal: {row['signal']}",
    ]
    if kind in ("zombie", "zombie_owned"):
        evidence.append(
            f"so far in the window {money(float(row['window_cost']), cur)}; "
            f"from now on {money(saving, cur)}/month while it stays held"
        )
    if abs(alone - saving) > 0.005:
        evidence.append(
            f"{money(alone, cur)}/month alone; {money(saving, cur)}/month after the workload's other actions"
        )
    summary = f"{ACTIONS[action]} saves about {money(saving, cur)} per month" + (
        " from now on (the GPU's price while the zombie holds it)."
        if kind in ("zombie", "zombie_owned")
        else f" (window {format_duration(rep.window_hours * 3600)} extrapolated to a month)."
    )
    conf = float(row["confidence"]) * (1.0 if rep.activity_field == GR_ENGINE_ACTIVE else 0.8)
    return Finding(
        severity=sev,
        title=title,
        summary=summary,
        sop_step=t.sop_step,
        commands=t.commands,
        evidence=evidence,
        escalation=t.escalation,
        confidence=conf,
        category="cost",
        node=row["node"] or None,
        runbook="gpu_utilization_report",
        data={
            "action": action,
            "kind": kind,
            "monthly_saving": round(saving, 2),
            "saving_alone": round(alone, 2),
            "window_cost": None if row["window_cost"] != row["window_cost"] else round(float(row["window_cost"]), 2),
            "monthly_cost": round(float(row["monthly_cost"]), 2),
            "currency": cur,
            "namespace": ns,
            "workload": wl,
            "pod": pod,
            "gpus": round(float(row["gpus"]), 3),
            "signal": row["signal"],
            "confidence": round(conf, 2),
        },
    )
