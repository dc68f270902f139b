"""Lesson ``learn_monitoring``: the DCGM fields that matter and which are off by default, the health thresholds
(``thresholds.csv``), the Prometheus alert rules and what each catches, and which GPUs the thresholds flag now;
defined once in :data:`RUNBOOK`, rendered by ``runbooks/learn/learn_monitoring.ipynb``."""

from __future__ import annotations

from gpulib.core.knowledge import threshold
from gpulib.core.runbook import LESSON, Param, Runbook, Step
from gpulib.learn import frames
from gpulib.learn.lessons import (
    alert_catalog,
    alerts_file_status,
    dcgm_fields_frame,
    md_table,
    question,
    show_md,
    thresholds_frame,
)
from gpulib.learn.session import next_step, source_params

__all__ = ["RUNBOOK"]

#: the uncorrectable-ECC counter a default dcgm-exporter leaves out (gpulib/data/nvidia/dcgm_fields.csv)
DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"


def gather_fields(c) -> None:
    c.fields_on, c.fields_off = dcgm_fields_frame(True), dcgm_fields_frame(False)


def show_fields(c, ui) -> None:
    show_md(
        md_table(
            c.fields_on, {"field": "field", "unit": "unit", "mig_supported": "per MIG instance", "meaning": "meaning"}
        )
    )
    show_md("**Off by default** (add them to the counters CSV, or the alerts and triage that need them stay blind):")
    show_md(md_table(c.fields_off, {"field": "field", "unit": "unit", "meaning": "meaning"}))
    off = DBE in set(c.fields_off["field"])
    question(
        "Your fleet runs dcgm-exporter with its default counters. A GPU starts logging uncorrectable (double-bit) "
        "ECC errors. Will an alert catch it, and what do you change?",
        (
            f"No: {DBE} is off in the default counters CSV, so the rule reading it sees no series. Add the ECC and "
            "row-remap fields to the counters ConfigMap dcgm-exporter mounts."
            if off
            else f"Yes: {DBE} is exported by default here."
        ),
        "dcgm_fields.csv enabled_by_default: an alert on a field nobody exports is silent, not green. Check what "
        "the exporter exports before trusting a rule.",
    )


def gather_thresholds(c) -> None:
    c.thresholds = thresholds_frame()
    c.warn = c.figures["gpu_temp_warn_c"] = threshold("gpu_temp_warn_c")
    c.crit = threshold("gpu_temp_crit_c")


def show_thresholds(c, ui) -> None:
    show_md(md_table(c.thresholds, floatfmt="g"))


def gather_rules(c) -> None:
    c.rules = alert_catalog()
    c.temp_rule = c.rules.set_index("alert").loc["GPUTemperatureHigh"]
    c.figures["temp_alert_expr"] = c.temp_rule["expr"]
    c.blind = frames.blind_alerts(c.rules)


def show_rules(c, ui) -> None:
    show_md(
        md_table(
            c.rules,
            {
                "alert": "alert",
                "severity": "severity",
                "for": "for",
                "expr": "expression",
                "catches": "what it catches",
                "needs_non_default_fields": "needs fields off by default",
            },
        )
    )
    show_md("Committed file: " + alerts_file_status())
    question(
        "GPUTemperatureHigh fires for one GPU at 3 a.m. Do you wake someone up, and what do you look at first?",
        f"It fires at {c.warn:g} C for {c.temp_rule['for']}: a warning, not a page on its own. Look at whether the "
        f"GPU's clocks throttle and whether its neighbours are hot too (airflow); page when it reaches {c.crit:g} C "
        "or slows a production job.",
        f"expr: {c.temp_rule['expr']}. The 'for' clause keeps a short spike from firing; the critical threshold "
        "(thresholds.csv gpu_temp_crit_c) is where hardware protection starts.",
    )
    question(
        "Which of these alerts would you not rely on for a default install, and why?",
        (", ".join(c.blind) or "none") + ": a default install does not export the fields they read.",
        "They read fields that are off in the default counters CSV (the last column above): they can never fire "
        "until those fields are exported.",
    )


def gather_temps(c) -> None:
    t = frames.whole_gpus(c.src.summary("DCGM_FI_DEV_GPU_TEMP", c.window, "max"))
    c.temps, c.hot = t, frames.at_or_above(t, c.warn)
    c.figures["gpus_at_or_above_warn"] = int(len(c.hot))


def show_temps(c, ui) -> None:
    n_hot, t = c.figures["gpus_at_or_above_warn"], c.temps
    show_md(
        f"GPUs at or above {c.warn:g} C in the last {c.window}: **{n_hot}** of {len(t)}; at or above {c.crit:g} C: "
        f"**{len(frames.at_or_above(t, c.crit))}**."
    )
    if n_hot:
        show_md(
            md_table(c.hot, {"node": "node", "gpu": "GPU", "model": "model", "value": "max temp C"}, floatfmt=".0f")
        )
    question(
        "The table shows which GPUs reached the warning temperature. Do you drain them now or watch them, and what "
        "decides?",
        f"Watch first ({n_hot} here): see whether the hot GPUs share a node or a rack (cooling) and whether their "
        f"clocks throttle. Drain a GPU that reaches {c.crit:g} C or keeps throttling a job; fix cooling for a node "
        "whose GPUs are all hot.",
        "DCGM_FI_DEV_GPU_TEMP max per GPU against thresholds.csv: one hot GPU is a GPU problem, a hot node is a "
        "cooling problem, and draining moves the load without fixing either.",
    )


RUNBOOK = Runbook(
    name="learn_monitoring",
    domain="learn",
    kind=LESSON,
    start=lambda c: {"warn": None},
    params=(*source_params(), Param("window", "1h", "window for the live check against the thresholds")),
    steps=(
        Step("DCGM fields", gather_fields, show_fields, inputs=("dcgm_fields.csv",)),
        Step("Thresholds", gather_thresholds, show_thresholds, inputs=("thresholds.csv",)),
        Step("Alert rules", gather_rules, show_rules, needs=("warn",)),
        Step(
            "Temperatures against the thresholds",
            gather_temps,
            show_temps,
            needs=("src", "warn"),
            inputs=("DCGM_FI_DEV_GPU_TEMP",),
        ),
        next_step("fleet_overview", "xid_ecc_triage"),
    ),
)
