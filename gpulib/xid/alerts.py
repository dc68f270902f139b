"""The Prometheus alert rules, their routes table (alert -> runbook + parameters) and the PrometheusRule object.

One generator, from the data files (``thresholds.csv``, ``alert_settings.csv``, ``xid_catalog.csv``):
``deploy/prometheus/gpu-alerts.yaml`` (rules), ``deploy/prometheus/routes.yaml`` (what ``gpuops serve`` runs
for each alert), ``deploy/prometheus/gpu-alerts.prometheusrule.yaml`` (the same rules as a prometheus-operator
``PrometheusRule``: https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.PrometheusRule)
and ``deploy/prometheus/tests/gpu-alerts.labels-only.yaml`` (the rules without annotations, which the
``promtool test rules`` cases load so a case states labels only). The lessons read :func:`alert_rules` too.
The rule files and the PrometheusRule also carry the utilization report's recording rules
(:func:`gpulib.cost.recording_group`, group ``gpu-runbooks.report``: :func:`rules_document`).

Template notes (alert templates are Go text/template with Prometheus' functions:
https://prometheus.io/docs/prometheus/latest/configuration/template_reference/):
``or`` returns its first non-empty argument, so ``{{ or $labels.Hostname $labels.hostname }}`` takes either
spelling of dcgm-exporter's host label (``Hostname`` up to 4.x, ``hostname`` after NVIDIA/dcgm-exporter
commit d5e5f510); ``urlquery`` escapes a value for a URL; ``reReplaceAll`` strips every character a node
name or GPU id cannot hold, so a printed command never carries a shell metacharacter from a label.

DCGM_FI_DEV_XID_ERRORS holds only the *last* XID code ("Value of the last XID error encountered",
NVIDIA/dcgm-exporter etc/default-counters.csv). NVIDIA's double-bit-ECC sequence is XID 48 followed by
63/64 (row remap / page retirement) or 45 (contexts killed):
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html . So the critical alert looks for a
critical code anywhere in its window with a subquery (``max_over_time((...)[W:step])``), not at the
current value; a series is *fresh* when the gauge changed in the window or the GPU had no series a window
ago, so a sticky old code does not fire again while a new GPU series already holding one does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import load_table, settings, threshold
from gpulib.cost import (
    Thresholds,  # the thresholds of the one idle/zombie rule (gpulib.cost.usage.classify_idle)
    recording_group,
)
from gpulib.sources.history_rules import history_groups
from gpulib.sources.promql_scope import LABEL_NAME
from gpulib.sources.signals import aliases, promql_any, promql_each
from gpulib.xid.triage import DRAIN_BUCKETS

XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
UNC_REMAP = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
NVLINK_BW = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
NVLINK_COUNTERS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
)
NVLINK_RECOVERY = "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"

#: labels naming one GPU in dcgm-exporter's output (both host spellings; pod labels change, these do not)
GPU_ID = "UUID, gpu, Hostname, hostname"
HOST_ID = "Hostname, hostname"
#: alert label -> template expression giving it (route parameter sources)
NODE_TMPL = "or $labels.Hostname $labels.hostname"
GPU_TMPL = "$labels.gpu"
_NODE_SAFE = "{{ " + NODE_TMPL + ' | reReplaceAll "[^a-z0-9.-]" "" }}'
_GPU_SAFE = "{{ " + GPU_TMPL + ' | reReplaceAll "[^A-Za-z0-9/-]" "" }}'
WHERE = "on {{ " + NODE_TMPL + " }} GPU {{ $labels.gpu }}"

DEFAULT_BASE_URL = "https://gpuops.example.com"
DEPLOY_DIR = Path("deploy/prometheus")


def _setting(key: str) -> float:
    """A number of ``alert_settings.csv`` (:func:`gpulib.core.knowledge.settings`)."""
    return settings("alert_settings").number(key)


def _dur(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h" if s % 3600 == 0 else (f"{s // 60}m" if s % 60 == 0 else f"{s}s")


def critical_xids() -> list[int]:
    """XID codes whose NVIDIA immediate bucket takes the GPU out of service (the alert's critical set)."""
    cat = load_table("xid_catalog")
    m = cat["immediate_action"].isin(sorted(DRAIN_BUCKETS)) & (cat["unused_on_datacenter"] == "no")
    return sorted(int(c) for c in cat.loc[m, "code"])


def repeat_xids() -> list[int]:
    """XID codes with a repeat or solo rule in ``xid_alert_repeat.csv`` (gpuops serve counts their occurrences per
    GPU, :mod:`gpulib.serve.storms`): the count alert ``GPUXidRepeatCount`` watches them."""
    codes = set()
    for c in load_table("xid_alert_repeat")["codes"].astype(str):
        codes |= {int(x) for x in c.split(";") if x.strip().isdigit()}
    return sorted(codes)


@dataclass
class AlertSpec:
    """One alert: the rule plus the runbook it routes to and which alert labels fill which parameters."""

    name: str
    expr: str
    for_s: float | None
    severity: str
    summary: str
    description: str
    runbook: str = "xid_ecc_triage"
    #: runbook parameter -> template expression over the alert's labels
    params: dict[str, str] = field(default_factory=lambda: {"node": NODE_TMPL, "gpu": GPU_TMPL})

    def runbook_url(self, base: str) -> str:
        q = "&".join(f"{k}={{{{ {v} | urlquery }}}}" for k, v in self.params.items())
        return f"{base}/run/{self.runbook}" + (f"?{q}" if q else "")

    def command(self) -> str:
        safe = {"node": _NODE_SAFE, "gpu": _GPU_SAFE}
        return " ".join(["gpuops run", self.runbook] + [f"-p {k} {safe[k]}" for k in self.params])

    def rule(self, base: str, annotations: bool = True) -> dict[str, Any]:
        r: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        if self.for_s:
            r["for"] = _dur(self.for_s)
        r["labels"] = {"severity": self.severity, "runbook": self.runbook}
        if annotations:
            r["annotations"] = {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": self.runbook_url(base),
                "gpuops_command": self.command(),
            }
        return r


def _node_params() -> dict[str, str]:
    return {"node": NODE_TMPL}


def _any_code(xid: str, codes: list[int]) -> str:
    """``xid`` (an integer code) is one of ``codes``: one comparison per run of consecutive codes (``xid >= 143 <=
    151`` filters 143 to 151; https://prometheus.io/docs/prometheus/latest/querying/operators/#comparison-binary-operators)
    instead of one per code, so a rule evaluates the gauge's selectors once per run: the critical set's 30 codes are
    18 runs, evaluated at every step of the alert's subquery."""
    runs: list[list[int]] = []
    for c in sorted(set(codes)):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return " or ".join(f"{xid} == {r[0]}" if len(r) == 1 else f"{xid} >= {r[0]} <= {r[-1]}" for r in runs)


def specs() -> list[AlertSpec]:
    """Every alert, each threshold read from the data files."""
    crit = critical_xids()
    crit_re = "|".join(map(str, crit))
    xid = promql_any(XID_GAUGE)  # the gauge under either name it has had (gpulib/data/sources/signals.csv)
    crit_any = _any_code(xid, crit)
    win = _dur(_setting("xid_alert_window_s"))
    step = _dur(_setting("xid_subquery_step_s"))
    ecc_win = _dur(_setting("ecc_increase_window_s"))
    nv_win = _dur(_setting("nvlink_error_window_s"))
    nv_n = _setting("nvlink_crc_errors_warn")
    busy = _setting("nvlink_degraded_busy_min")
    warn, critc, memw = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c"), threshold("memory_temp_warn_c")
    fb_ratio, idle = _setting("fb_used_ratio_warn"), threshold("idle_activity_max")
    zt = Thresholds.from_table()
    z_act, z_fb, z_for = zt.zombie_activity_max, zt.zombie_fb_used_min_mib, zt.zombie_min_duration_s
    seen_crit = f"max_over_time(({crit_any})[{win}:{step}])"
    xid_then = promql_each("{m} offset " + win, XID_GAUGE)
    fresh = f"({promql_each('changes({m}[' + win + '])', XID_GAUGE)} > 0 or ({xid} unless on({GPU_ID}) ({xid_then})))"
    nvlink_err = " or ".join(
        [f"{promql_each('increase({m}[' + nv_win + '])', NVLINK_RECOVERY)} > 0"]
        + [f"{promql_each('increase({m}[' + nv_win + '])', c)} > {nv_n:g}" for c in NVLINK_COUNTERS]
    )
    # a bandwidth in MB/s (NVIDIA/DCGM: dcgmlib/src/dcgm_fields.cpp @0fb66990, DCGM_FIELD_UNIT_BW_MBPS), not a
    # running total: "moved no traffic in the window" is its maximum over the window being 0
    nvlink_peak = promql_each("max_over_time({m}[" + nv_win + "])", NVLINK_BW)
    temp, active = promql_any(GPU_TEMP), promql_any(ACTIVE)
    fleet: dict[str, str] = {}
    return [
        AlertSpec(
            "DCGMExporterDown",
            'up{job=~".*dcgm.*"} == 0',
            _setting("exporter_down_for_s"),
            "warning",
            "dcgm-exporter target {{ $labels.instance }} is down",
            "Prometheus cannot scrape dcgm-exporter, so no GPU metric (XID, ECC, temperature) arrives from this "
            "target. Check the nvidia-dcgm-exporter pod on the node.",
            runbook="fleet_overview",
            params=fleet,
        ),
        AlertSpec(
            "GPUMetricsAbsent",
            " and ".join(f"absent({name})" for name in aliases(GPU_TEMP)),
            _setting("metrics_absent_for_s"),
            "warning",
            f"No {GPU_TEMP} series at all",
            "absent() returns one label-less series, so this alert cannot name the node; use DCGMExporterDown "
            "for per-target detail. Check the dcgm-exporter DaemonSet and its ServiceMonitor.",
            runbook="fleet_overview",
            params=fleet,
        ),
        AlertSpec(
            "GPUTemperatureHigh",
            f"{temp} >= {warn:g}",
            _setting("temp_warn_for_s"),
            "warning",
            "GPU at {{ $value }} C " + WHERE,
            f"GPU temperature has stayed at or above {warn:g} C (thresholds.csv gpu_temp_warn_c). Check airflow, "
            "fans and clock-event (thermal throttle) reasons.",
        ),
        AlertSpec(
            "GPUTemperatureCritical",
            f"{temp} >= {critc:g}",
            _setting("temp_crit_for_s"),
            "critical",
            "GPU at {{ $value }} C (hardware slowdown range) " + WHERE,
            f"GPU temperature at or above {critc:g} C (thresholds.csv gpu_temp_crit_c, HW slowdown on A100/H100).",
        ),
        AlertSpec(
            "GPUMemoryTemperatureHigh",
            f"{promql_any('DCGM_FI_DEV_MEMORY_TEMP')} >= {memw:g}",
            _setting("temp_warn_for_s"),
            "warning",
            "HBM at {{ $value }} C " + WHERE,
            f"HBM temperature at or above {memw:g} C (thresholds.csv memory_temp_warn_c).",
        ),
        AlertSpec(
            "GPUXidCritical",
            f"{seen_crit} and {fresh}",
            None,
            "critical",
            "XID {{ $value }} " + WHERE + " needs the GPU taken out of service",
            f"A code whose NVIDIA resolution bucket is reset GPU / reboot node / DBE / NVLink workflow (codes "
            f"{', '.join(map(str, crit))}) was in {XID_GAUGE} at some point of the last {win}, even if a later XID "
            "(63/64/45 after a double-bit ECC 48) overwrote it. The gauge holds only the last code and a repeat "
            "of the same code is invisible: also check the kernel log. Run the XID triage runbook for the SOP step.",
        ),
        AlertSpec(
            "GPUXidError",
            f"(({xid} > 0 unless ({crit_any})) and {fresh}) unless on({GPU_ID}) {seen_crit}",
            None,
            "warning",
            "XID {{ $value }} " + WHERE,
            f"{XID_GAUGE} (last XID code, sticky gauge) changed in the last {win} to a non-critical code "
            "(application XIDs such as 13/31/43/45) and no critical code was seen in that window. gpuops serve "
            "holds XID 13/31/43 until a repeat on the same GPU within 24 h (NVIDIA's rule), opens a lone XID 45 "
            "at once; the triage then follows NVIDIA's workflow from the kernel log.",
        ),
        AlertSpec(
            "GPUXidCriticalCount",
            f'{XID_COUNT}{{xid=~"{crit_re}"}} > 0',
            None,
            "critical",
            "XID {{ $labels.xid }} seen {{ $value }} times " + WHERE,
            f"{XID_COUNT} counts XIDs per code in a sliding window, so it also sees a code overwritten between "
            "two scrapes. It is off by default: enable it in the dcgm-exporter counters CSV.",
        ),
        AlertSpec(
            "GPUXidRepeatCount",
            f'{XID_COUNT}{{xid=~"{"|".join(map(str, repeat_xids()))}"}} > 0',
            None,
            "warning",
            "XID {{ $labels.xid }} seen {{ $value }} times " + WHERE,
            f"{XID_COUNT} counts XIDs per code in the exporter's sliding window, so it sees a repeat of the same "
            f"code that leaves {XID_GAUGE} unchanged. gpuops serve counts these firings per GPU over NVIDIA's 24 h "
            "repeat window (gpulib/data/xid/xid_alert_repeat.csv). Off by default: enable it in the dcgm-exporter "
            "counters CSV.",
        ),
        AlertSpec(
            "GPUEccUncorrectable",
            f"increase({DBE_VOL}[{ecc_win}]) > 0 or ({DBE_VOL} > 0 unless on({GPU_ID}) ({DBE_VOL} offset {ecc_win}))",
            None,
            "critical",
            "Uncorrectable (DBE) ECC errors " + WHERE,
            f"{DBE_VOL} increased in the last {ecc_win}, or a new GPU series already counts DBEs (the volatile "
            "counter restarts at driver load, so a non-zero first value happened since then). ECC counters are "
            "commented out in dcgm-exporter's default counters CSV: enable DCGM_FI_DEV_ECC_DBE_VOL_TOTAL or this "
            "alert never fires. SOP: drain, reset, dcgmi diag -r 3; repeated DBE is an RMA case.",
        ),
        AlertSpec(
            "GPURowRemapFailure",
            f"{promql_any(REMAP_FAILURE)} > 0",
            None,
            "critical",
            "Row remapping failed " + WHERE + " (RMA)",
            "The GPU could not remap a failing memory row: cordon, drain and open an RMA.",
        ),
        AlertSpec(
            "GPUUncorrectableRemappedRows",
            f"{promql_each('increase({m}[' + ecc_win + '])', UNC_REMAP)} > 0",
            None,
            "warning",
            "New uncorrectable-error row remap " + WHERE,
            "A row was remapped after an uncorrectable error; reset the GPU at a convenient time so it takes effect.",
        ),
        AlertSpec(
            "GPUNVLinkErrors",
            nvlink_err,
            None,
            "warning",
            "NVLink errors " + WHERE,
            f"NVLink recovery errors, or more than {nv_n:g} CRC/replay errors, in the last {nv_win} "
            "(alert_settings.csv nvlink_*): a marginal link; NCCL bandwidth drops first. These counters are "
            "commented out in dcgm-exporter's default counters CSV. Run the NCCL check on the node.",
            runbook="nccl_check",
            params=_node_params(),
        ),
        AlertSpec(
            "GPUNVLinkDegraded",
            f"({nvlink_peak} == 0 and on({GPU_ID}) {active} > {busy:g}) and on({HOST_ID}) "
            f"(max by ({HOST_ID}) ({nvlink_peak}) > 0)",
            _setting("nvlink_degraded_for_s"),
            "warning",
            "Busy GPU moves no NVLink traffic " + WHERE,
            f"The GPU is busy (GR_ENGINE_ACTIVE above {busy:g}) and its NVLink bandwidth has stayed at 0 for "
            f"{nv_win} while another GPU of the node does move traffic: a link or peer path is down and "
            "collectives fall back to PCIe. Run the NCCL check on the node.",
            runbook="nccl_check",
            params=_node_params(),
        ),
        AlertSpec(
            "GPUMemoryHigh",
            f"(DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > {fb_ratio:g}) "
            f"unless on({GPU_ID}) {active} >= {idle:g}",
            _setting("fb_used_for_s"),
            "warning",
            "GPU memory {{ $value | humanizePercentage }} used " + WHERE,
            f"Framebuffer use above {fb_ratio:.0%} (alert_settings.csv fb_used_ratio_warn) on a GPU that is not "
            f"busy (GR_ENGINE_ACTIVE below {idle:g}, thresholds.csv idle_activity_max): vLLM pre-allocates most "
            "of the memory by design, so a busy GPU with full memory is not alerted.",
            runbook="fleet_overview",
            params=fleet,
        ),
        AlertSpec(
            "GPUMemoryHeldIdle",
            f"(DCGM_FI_DEV_FB_USED > {z_fb:g}) and ({active} < {z_act:g})",
            z_for,
            "warning",
            "GPU holds memory but is idle " + WHERE + " (pod {{ $labels.namespace }}/{{ $labels.pod }})",
            f"FB_USED above {z_fb:g} MiB while GR_ENGINE_ACTIVE below {z_act:g} for {_dur(z_for)} "
            "(thresholds.csv zombie_*): likely a zombie or idle reserved GPU.",
            runbook="fleet_overview",
            params=fleet,
        ),
    ]


def check_base_url(base: str) -> str:
    """An absolute http(s) URL without query or fragment (what ``runbook_url`` is built from)."""
    parts = urlsplit(base or "")
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or parts.query
        or parts.fragment
        or any(c in base for c in " \"'<>{}")
    ):
        raise InvalidParameter(
            f"--base-url {base!r} is not an absolute http(s) URL",
            hint="give the address gpuops serve is reached at, e.g. https://gpuops.example.com",
        )
    return base.rstrip("/")


GROUP = "gpu-runbooks.gpu"


#: the label that names a series' cluster in a store holding several (kubernetes-mixin's ``clusterLabel``, default
#: ``cluster``: kubernetes-monitoring/kubernetes-mixin: config.libsonnet @ aa38e2bf)
CLUSTER_LABEL = "cluster"
_GROUPING = re.compile(r"\b(by|on)(\s*)\(([^)]*)\)")


def check_cluster_label(label: str) -> str:
    if not LABEL_NAME.match(label or ""):
        raise InvalidParameter(
            f"cluster label {str(label)[:60]!r} is not a Prometheus label name",
            hint="letters, digits and underscores, not starting with a digit (kubernetes-mixin's default: cluster)",
        )
    return label


def with_cluster(expr: str, label: str = CLUSTER_LABEL) -> str:
    """``expr`` with the cluster label in every ``by (...)`` and ``on (...)`` list, so an aggregation or a match
    never joins two clusters' series that share a node name (``without``/``ignoring`` keep it already)."""

    def add(m: re.Match) -> str:
        names = [n.strip() for n in m.group(3).split(",") if n.strip()]
        return m.group(0) if label in names else f"{m.group(1)}{m.group(2)}({', '.join([label, *names])})"

    return _GROUPING.sub(add, expr)


def _scoped(groups: list[dict], label: str) -> list[dict]:
    check_cluster_label(label)
    return [{**g, "rules": [{**r, "expr": with_cluster(r["expr"], label)} for r in g["rules"]]} for g in groups]


def alert_rules(
    base_url: str = DEFAULT_BASE_URL, *, annotations: bool = True, cluster_label: str = CLUSTER_LABEL
) -> dict[str, Any]:
    """The alert rules (one group), as the lessons list them."""
    base = check_base_url(base_url)
    return {"groups": _scoped([{"name": GROUP, "rules": [s.rule(base, annotations) for s in specs()]}], cluster_label)}


def rules_document(
    base_url: str = DEFAULT_BASE_URL, *, annotations: bool = True, cluster_label: str = CLUSTER_LABEL
) -> dict[str, Any]:
    """The shipped Prometheus rules document: the alert group, then the utilization report's recording rules
    (:func:`gpulib.cost.recording_group`, the report's per-step inputs at ``series_step``); every grouping carries
    ``cluster_label`` (:func:`with_cluster`). Then the node history's recording rules
    (:func:`gpulib.sources.history_rules.history_groups`: its per-step changes and its inputs' presence)."""
    alerts = alert_rules(base_url, annotations=annotations, cluster_label=cluster_label)["groups"]
    return {"groups": alerts + _scoped([recording_group(), *history_groups()], cluster_label)}


def routes() -> dict[str, Any]:
    """alert -> runbook and parameter sources, for ``gpuops serve`` (``deploy/prometheus/routes.yaml``).

    A parameter's ``labels`` are tried in order; the first non-empty one fills the parameter.
    """
    out = {}
    for s in specs():
        out[s.name] = {
            "runbook": s.runbook,
            "params": {
                k: {"labels": ["Hostname", "hostname"] if v == NODE_TMPL else [v.split(".")[-1]]}
                for k, v in s.params.items()
            },
        }
    return {"routes": out}


def prometheus_rule(
    base_url: str = DEFAULT_BASE_URL, namespace: str = "monitoring", cluster_label: str = CLUSTER_LABEL
) -> dict[str, Any]:
    """The rules as a prometheus-operator PrometheusRule (kube-prometheus selects rules by these labels)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "gpu-runbooks",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "gpu-runbooks", "prometheus": "k8s", "role": "alert-rules"},
        },
        "spec": rules_document(base_url, cluster_label=cluster_label),
    }


def _header(what: str, base: str, cluster_label: str = CLUSTER_LABEL) -> str:
    flag = "" if cluster_label == CLUSTER_LABEL else f" --cluster-label {cluster_label}"
    return (
        f"# GENERATED by gpulib.xid.alerts ({what}) from gpulib/data/core/thresholds.csv,\n"
        "# gpulib/data/xid/alert_settings.csv, gpulib/data/xid/xid_catalog.csv and\n"
        "# gpulib/data/cost/report_policy.csv (recording rules). Do not edit by hand:\n"
        f"#   gpuops alerts --base-url {base}{flag}\n"
    )


GENERATED_HEADER = _header("rules", DEFAULT_BASE_URL)


def _dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, width=1000, allow_unicode=True)


def generated_files(base_url: str = DEFAULT_BASE_URL, cluster_label: str = CLUSTER_LABEL) -> dict[str, str]:
    """relative path -> text of every generated file."""
    base, cl = check_base_url(base_url), check_cluster_label(cluster_label)
    return {
        "gpu-alerts.yaml": _header("rules", base, cl) + _dump(rules_document(base, cluster_label=cl)),
        "routes.yaml": _header("routes", base, cl) + _dump(routes()),
        "gpu-alerts.prometheusrule.yaml": _header("PrometheusRule", base, cl)
        + _dump(prometheus_rule(base, cluster_label=cl)),
        "tests/gpu-alerts.labels-only.yaml": _header("rules without annotations, for promtool tests", base, cl)
        + _dump(rules_document(base, annotations=False, cluster_label=cl)),
    }


def alert_rules_yaml(base_url: str = DEFAULT_BASE_URL) -> str:
    return generated_files(base_url)["gpu-alerts.yaml"]


def write_alert_rules(
    out: str | Path = DEPLOY_DIR, base_url: str = DEFAULT_BASE_URL, cluster_label: str = CLUSTER_LABEL
) -> list[str]:
    """Write every generated file under ``out``; returns their paths."""
    root = Path(out)
    written = []
    for rel, text in generated_files(base_url, cluster_label).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        written.append(str(p))
    return written


#: names the package exports (``from gpulib.xid import alert_routes``)
alert_routes = routes
alert_specs = specs
alert_generated_files = generated_files
