"""Prometheus alert rules generated from the same data files as the triage (``gpulib/data/thresholds.csv``,
``gpulib/data/alert_settings.csv``, ``gpulib/data/xid_catalog.csv``); the committed
``deploy/prometheus/gpu-alerts.yaml`` must equal :func:`alert_rules_yaml` (a test checks it).
"""
from __future__ import annotations

from typing import Any

from gpulib.core.knowledge import load_table, threshold
from gpulib.xid.triage import DBE_VOL, DRAIN_BUCKETS, GPU_TEMP, REMAP_FAILURE, UNC_REMAP, XID_COUNT, XID_GAUGE, _setting


# --------------------------------------------------------------------------------- alert rules
def critical_xids() -> list[int]:
    """XID codes whose NVIDIA immediate bucket takes the GPU out of service (the alert's critical set)."""
    cat = load_table("xid_catalog")
    m = cat["immediate_action"].isin(sorted(DRAIN_BUCKETS)) & (cat["unused_on_datacenter"] == "no")
    return sorted(int(c) for c in cat.loc[m, "code"])


def _dur(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h" if s % 3600 == 0 else (f"{s // 60}m" if s % 60 == 0 else f"{s}s")


_HOST = "{{ $labels.Hostname }}{{ $labels.hostname }}"
_RUN = "gpuops run xid_ecc_triage -p node " + _HOST + " -p gpu {{ $labels.gpu }}"
_RUNBOOK = "runbooks/xid_ecc_triage.ipynb"


def _alert(name: str, expr: str, for_s: float | None, severity: str, summary: str, description: str,
           runbook: str = _RUNBOOK, command: str = _RUN) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_s:
        rule["for"] = _dur(for_s)
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description, "runbook_url": runbook,
                           "gpuops_command": command}
    return rule


def alert_rules() -> dict[str, Any]:
    """The Prometheus rules document, every threshold read from thresholds.csv / alert_settings.csv / the XID catalog."""
    crit = critical_xids()
    crit_re = "|".join(map(str, crit))
    crit_eq = " or ".join(f"{XID_GAUGE} == {c}" for c in crit)
    win = _dur(_setting("xid_alert_window_s"))
    ecc_win = _dur(_setting("ecc_increase_window_s"))
    warn, critc, memw = threshold("gpu_temp_warn_c"), threshold("gpu_temp_crit_c"), threshold("memory_temp_warn_c")
    fb_ratio = _setting("fb_used_ratio_warn")
    from gpulib.cost import Thresholds  # the thresholds of the one idle/zombie rule (gpulib.cost.usage.classify_idle)

    zt = Thresholds.from_table()
    z_act, z_fb, z_for = zt.zombie_activity_max, zt.zombie_fb_used_min_mib, zt.zombie_min_duration_s
    where = "on " + _HOST + " GPU {{ $labels.gpu }}"
    rules = [
        _alert("DCGMExporterDown", 'up{job=~".*dcgm.*"} == 0', _setting("exporter_down_for_s"), "warning",
               "dcgm-exporter target {{ $labels.instance }} is down",
               "Prometheus cannot scrape dcgm-exporter, so no GPU metric (XID, ECC, temperature) arrives from this "
               "target. Check the nvidia-dcgm-exporter pod on the node.",
               command="kubectl -n gpu-operator get pods -l app=nvidia-dcgm-exporter -o wide"),
        _alert("GPUMetricsAbsent", f"absent({GPU_TEMP})", _setting("metrics_absent_for_s"), "warning",
               f"No {GPU_TEMP} series at all",
               "absent() returns one label-less series, so this alert cannot name the node; use DCGMExporterDown "
               "for per-target detail. Check the dcgm-exporter DaemonSet and its ServiceMonitor.",
               command="kubectl -n gpu-operator get ds nvidia-dcgm-exporter"),
        _alert("GPUTemperatureHigh", f"{GPU_TEMP} >= {warn:g}", _setting("temp_warn_for_s"), "warning",
               "GPU at {{ $value }} C " + where,
               f"GPU temperature has stayed at or above {warn:g} C (thresholds.csv gpu_temp_warn_c). Check airflow, "
               "fans and clock-event (thermal throttle) reasons."),
        _alert("GPUTemperatureCritical", f"{GPU_TEMP} >= {critc:g}", _setting("temp_crit_for_s"), "critical",
               "GPU at {{ $value }} C (hardware slowdown range) " + where,
               f"GPU temperature at or above {critc:g} C (thresholds.csv gpu_temp_crit_c, HW slowdown on A100/H100)."),
        _alert("GPUMemoryTemperatureHigh", f"DCGM_FI_DEV_MEMORY_TEMP >= {memw:g}", _setting("temp_warn_for_s"), "warning",
               "HBM at {{ $value }} C " + where, f"HBM temperature at or above {memw:g} C (thresholds.csv memory_temp_warn_c)."),
        _alert("GPUXidCritical", f"({crit_eq}) and changes({XID_GAUGE}[{win}]) > 0", None, "critical",
               "XID {{ $value }} " + where + " needs the GPU taken out of service",
               f"{XID_GAUGE} is a gauge holding the LAST XID code (sticky, not a count). It changed in the last {win} "
               "to a code whose NVIDIA resolution bucket is reset GPU / reboot node / DBE / NVLink workflow "
               f"(codes {', '.join(map(str, crit))}). A repeat of the same code does not show here: also check the "
               "kernel log. Run the XID triage runbook for the SOP step."),
        _alert("GPUXidError", f"{XID_GAUGE} > 0 unless ({crit_eq}) and changes({XID_GAUGE}[{win}]) > 0", None, "warning",
               "XID {{ $value }} " + where,
               f"{XID_GAUGE} (last XID code, sticky gauge) changed in the last {win} to a non-critical code "
               "(application XIDs such as 13/31/43/45): notify the pod owner; drain only if it repeats across "
               "different workloads."),
        _alert("GPUXidCriticalCount", f'{XID_COUNT}{{xid=~"{crit_re}"}} > 0', None, "critical",
               "XID {{ $labels.xid }} seen {{ $value }} times " + where,
               f"{XID_COUNT} counts XIDs per code in a sliding window. It is off by default: enable it in the "
               "dcgm-exporter counters CSV."),
        _alert("GPUEccUncorrectable", f"increase({DBE_VOL}[{ecc_win}]) > 0", None, "critical",
               "Uncorrectable (DBE) ECC errors " + where,
               f"{DBE_VOL} increased in the last {ecc_win}. ECC counters are commented out in dcgm-exporter's "
               "default counters CSV: enable DCGM_FI_DEV_ECC_DBE_VOL_TOTAL or this alert never fires. SOP: drain, "
               "reset, dcgmi diag -r 3; repeated DBE is an RMA case."),
        _alert("GPURowRemapFailure", f"{REMAP_FAILURE} > 0", None, "critical",
               "Row remapping failed " + where + " (RMA)",
               "The GPU could not remap a failing memory row: cordon, drain and open an RMA."),
        _alert("GPUUncorrectableRemappedRows", f"increase({UNC_REMAP}[{ecc_win}]) > 0", None, "warning",
               "New uncorrectable-error row remap " + where,
               "A row was remapped after an uncorrectable error; reset the GPU at a convenient time so it takes effect."),
        _alert("GPUMemoryHigh", f"DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > {fb_ratio:g}",
               _setting("fb_used_for_s"), "warning", "GPU memory {{ $value | humanizePercentage }} used " + where,
               f"Framebuffer use above {fb_ratio:.0%} (alert_settings.csv fb_used_ratio_warn); the next allocation may fail.",
               runbook="runbooks/fleet_overview.ipynb", command="gpuops run fleet_overview"),
        _alert("GPUMemoryHeldIdle",
               f"(DCGM_FI_DEV_FB_USED > {z_fb:g}) and (DCGM_FI_PROF_GR_ENGINE_ACTIVE < {z_act:g})", z_for, "warning",
               "GPU holds memory but is idle " + where + " (pod {{ $labels.namespace }}/{{ $labels.pod }})",
               f"FB_USED above {z_fb:g} MiB while GR_ENGINE_ACTIVE below {z_act:g} for {_dur(z_for)} "
               "(thresholds.csv zombie_*, the rule of gpulib.cost.usage.classify_idle): likely a zombie or idle reserved GPU.",
               runbook="runbooks/fleet_overview.ipynb", command="gpuops run fleet_overview"),
    ]
    return {"groups": [{"name": "gpu-runbooks.gpu", "rules": rules}]}


GENERATED_HEADER = ("# GENERATED by gpulib.xid.alerts.alert_rules() from gpulib/data/thresholds.csv,\n"
                    "# gpulib/data/alert_settings.csv and gpulib/data/xid_catalog.csv. Do not edit by hand:\n"
                    "#   python3 -c 'import gpulib.xid.alerts as a; a.write_alert_rules()'\n")


def alert_rules_yaml() -> str:
    import yaml

    return GENERATED_HEADER + yaml.safe_dump(alert_rules(), sort_keys=False, width=1000, allow_unicode=True)


def write_alert_rules(path: str = "deploy/prometheus/gpu-alerts.yaml") -> str:
    from pathlib import Path

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(alert_rules_yaml())
    return str(p)
