"""Prometheus recording rules for the utilization report: the report's per-step inputs, computed in the store.

The report reads DCGM activity and framebuffer use at ``series_step`` (``report_policy.csv``, 5 min), each point
the ``series_agg`` (``max``) of the raw samples in that step, and calls a step idle or held-idle with the
thresholds of the one idle/zombie rule (:func:`gpulib.cost.usage.classify_idle`, ``thresholds.csv``). These
rules record exactly those per-step values, once per ``series_step``, so the report can ask for totals
(``sum_over_time`` / ``count_over_time`` / ``max_over_time`` over a window) instead of pulling every point.

Rule names follow Prometheus' ``level:metric:operations`` convention
(https://prometheus.io/docs/practices/rules/): the level ``gpu`` is one GPU or MIG instance and the pod on it
(the labels of :data:`KEEP`), ``max5m`` is the ``max_over_time`` of the step.

Because a step's activity is its maximum, a step is idle only when every raw sample in it is idle: the idle
GPU-hours are a lower bound of the per-sample count (one busy sample makes the whole step active). The idle series
is named for that (``idle_throughout_step``) and :func:`idle_definition` is the sentence the report's Method
section prints.

* ``gpu:dcgm_activity:max5m`` -- activity as a 0..1 ratio: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, else
  ``DCGM_FI_DEV_GPU_UTIL / 100`` on a GPU that has no GR_ENGINE_ACTIVE series (``gpulib.cost.usage.select_activity``);
* ``gpu:dcgm_fb_used_mib:max5m`` -- ``DCGM_FI_DEV_FB_USED`` (MiB);
* ``gpu:dcgm_idle_throughout_step:max5m`` -- 1 when the step's maximum activity is below ``idle_activity_max``,
  i.e. every raw sample of the step is idle (an idle step of :func:`gpulib.cost.usage.series_usage`), else 0;
* ``gpu:dcgm_held_idle:max5m`` -- 1 when memory is held (``FB_USED >= zombie_fb_used_min_mib``) and activity is
  below ``zombie_activity_max`` (a step of a :func:`gpulib.cost.usage.zombie_runs` run), else 0.

The pod/namespace join: dcgm-exporter labels a GPU with the pod using it; scraped through a ServiceMonitor
without ``honorLabels`` those labels arrive as ``exported_pod`` / ``exported_namespace`` / ``exported_container``
and ``pod`` is the exporter's own pod (NVIDIA/dcgm-exporter: internal/pkg/rendermetrics/render_metrics.go
@ d5e5f510). Every rule maps them back the way :func:`gpulib.sources.dcgm.normalise_labels` does (an
``exported_*`` label wins; the exporter's own pod means "no pod") and keeps only :data:`KEEP`, so a pod has one
series whichever way it was scraped. Each rule is computed from the raw fields, not from another recorded rule,
so a rule evaluator that writes remotely (Thanos Ruler, vmalert, Mimir's ruler) gives the same values.
"""

from __future__ import annotations

from typing import Any

from gpulib.core.knowledge import settings
from gpulib.core.timeutil import format_duration, parse_window
from gpulib.cost.usage import FB_USED, GPU_UTIL, GR_ENGINE_ACTIVE, Thresholds
from gpulib.sources.signals import promql_each

__all__ = [
    "KEEP",
    "REPORT_GROUP",
    "ACTIVITY",
    "FB",
    "IDLE",
    "HELD_IDLE",
    "rule_name",
    "idle_definition",
    "recording_group",
    "rule_resolution",
]

REPORT_GROUP = "gpu-runbooks.report"
#: the recorded metrics (the middle part of a rule name; :func:`rule_name` adds level and operation)
ACTIVITY, FB, IDLE, HELD_IDLE = "dcgm_activity", "dcgm_fb_used_mib", "dcgm_idle_throughout_step", "dcgm_held_idle"

#: labels a recorded series keeps: its cluster (kubernetes-mixin's clusterLabel default, kubernetes-monitoring/
#: kubernetes-mixin: config.libsonnet @ aa38e2bf; absent on a single-cluster Prometheus), one GPU / MIG instance
#: (both host spellings) and the pod on it
KEEP = "cluster, Hostname, hostname, gpu, UUID, modelName, GPU_I_PROFILE, GPU_I_ID, pod, namespace, container"
#: the exporter's own pod (dcgm.py _EXPORTER_POD), RE2 syntax: a case-insensitive prefix match
_EXPORTER_POD = "(?i)(nvidia-)?dcgm-exporter.*"


def rule_resolution() -> float:
    """Seconds between two recorded points: ``series_step`` of ``report_policy.csv``."""
    return parse_window(settings("report_policy").text("series_step"), name="series_step").total_seconds()


def _agg() -> str:
    return settings("report_policy").text("series_agg") or "max"


def rule_name(metric: str) -> str:
    """``gpu:<metric>:<series_agg><series_step>``, e.g. ``gpu:dcgm_activity:max5m``."""
    return f"gpu:{metric}:{_agg()}{format_duration(rule_resolution())}"


def idle_definition(thresholds: Thresholds | None = None) -> str:
    """What one idle GPU-hour counts, in the words of the report's Method section, from the rule's own settings."""
    th = thresholds or Thresholds.from_table()
    agg, step = _agg(), format_duration(rule_resolution())
    if agg == "max":
        when = (
            f"a {step} step counts as idle only when every raw sample in it is below {th.idle_activity_max:.0%} "
            "activity (the step's maximum is below it), so one busy sample makes the whole step active and the "
            "idle GPU-hours are a lower bound of the per-sample count"
        )
    else:
        when = f"a {step} step counts as idle when the {agg} of its raw samples is below {th.idle_activity_max:.0%}"
    return f"{when} (as the recording rule {rule_name(IDLE)} records it)."


def joined(expr: str) -> str:
    """``expr`` (an instant vector of dcgm-exporter labels) with the pod/namespace join applied and only
    :data:`KEEP` left (``max by``: two scrapes of one GPU, e.g. an HA pair, give one series)."""
    out = expr
    for dst in ("pod", "namespace", "container"):
        out = f'label_replace({out}, "{dst}", "$1", "exported_{dst}", "(.+)")'
    for dst in ("namespace", "container", "pod"):  # pod last: the other two test it
        out = f'label_replace({out}, "{dst}", "", "pod", "{_EXPORTER_POD}")'
    return f"max by ({KEEP}) ({out})"


def _step_of(field: str) -> str:
    """The step's aggregate of ``field`` under every name it has had (dcgm-exporter 4.9+ renamed the DCGM fields:
    gpulib/data/sources/signals.csv), each in the canonical unit, one series per GPU."""
    return joined(promql_each(f"{_agg()}_over_time({{m}}[{format_duration(rule_resolution())}])", field))


def activity_expr() -> str:
    """The step's activity ratio: GR_ENGINE_ACTIVE, else GPU_UTIL / 100 on GPUs without it, clipped to 0..1."""
    return f"clamp(({_step_of(GR_ENGINE_ACTIVE)}) or ({_step_of(GPU_UTIL)} / 100), 0, 1)"


def fb_expr() -> str:
    return _step_of(FB_USED)


def recording_group(thresholds: Thresholds | None = None) -> dict[str, Any]:
    """The rule group (Prometheus rule-file ``groups`` entry), evaluated every ``series_step``."""
    th = thresholds or Thresholds.from_table()
    act, fb = activity_expr(), fb_expr()
    return {
        "name": REPORT_GROUP,
        "interval": format_duration(rule_resolution()),
        "rules": [
            {"record": rule_name(ACTIVITY), "expr": act},
            {"record": rule_name(FB), "expr": fb},
            {"record": rule_name(IDLE), "expr": f"({act}) < bool {th.idle_activity_max:g}"},
            {
                "record": rule_name(HELD_IDLE),
                "expr": f"(({act}) < bool {th.zombie_activity_max:g}) * (({fb}) >= bool {th.zombie_fb_used_min_mib:g})",
            },
        ],
    }


#: the package's name for :func:`rule_name` (``from gpulib.cost import recording_rule_name``)
recording_rule_name = rule_name
