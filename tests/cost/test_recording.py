"""gpulib/cost/recording.py: the utilization report's recording rules ship in the generated rule files, follow
Prometheus' level:metric:operations names, read their thresholds and step from the data files, and every rule has
promtool cases (deploy/prometheus/tests/report_recording_test.yaml) that fail on a planted wrong rule."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpulib.cost import Thresholds, recording
from gpulib.xid import alerts

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"
CASES = PROM / "tests" / "report_recording_test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/system-deps installs it)")


def _group(doc):
    (g,) = [g for g in doc["groups"] if g["name"] == recording.REPORT_GROUP]
    return g


def _recording_only(text: str) -> str:
    """The rules fixture with its recording group alone: the cases read only gpu:* records, and promtool evaluates
    every group at every step, so the alert group's subqueries cost ~50x the recording group's (10 s vs 0.2 s CPU)
    without adding a check. The whole fixture runs through these cases in
    tests/xid/test_alerts.py::test_promtool_cases_pass."""
    return yaml.safe_dump({"groups": [_group(yaml.safe_load(text))]}, sort_keys=False)


def _promtool_cases(rules_text: str, workdir: Path) -> subprocess.CompletedProcess:
    (workdir / "gpu-alerts.labels-only.yaml").write_text(_recording_only(rules_text))
    shutil.copy(CASES, workdir / CASES.name)
    return subprocess.run(
        [PROMTOOL, "test", "rules", CASES.name], capture_output=True, text=True, timeout=300, cwd=workdir
    )


def test_the_recording_group_ships_in_the_rule_file_and_the_prometheusrule():
    rules = _group(yaml.safe_load((PROM / "gpu-alerts.yaml").read_text()))
    spec = _group(yaml.safe_load((PROM / "gpu-alerts.prometheusrule.yaml").read_text())["spec"])
    assert rules == spec == recording.recording_group()
    assert rules["interval"] == "5m"  # report_policy.csv series_step
    assert [r["record"] for r in rules["rules"]] == [
        "gpu:dcgm_activity:max5m",
        "gpu:dcgm_fb_used_mib:max5m",
        "gpu:dcgm_idle_throughout_step:max5m",
        "gpu:dcgm_held_idle:max5m",
    ]
    # the lessons' alert catalogue stays the alerts only
    assert all("alert" in r for g in alerts.alert_rules()["groups"] for r in g["rules"])


def test_rule_names_follow_level_metric_operations():
    for r in recording.recording_group()["rules"]:
        assert re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z0-9_]+", r["record"]), r["record"]


def test_thresholds_come_from_the_data_files():
    th = Thresholds.from_table(idle_activity_max=0.2, zombie_activity_max=0.03, zombie_fb_used_min_mib=2048)
    by = {r["record"]: r["expr"] for r in recording.recording_group(th)["rules"]}
    assert by["gpu:dcgm_idle_throughout_step:max5m"].endswith("< bool 0.2")
    assert "< bool 0.03) * (" in by["gpu:dcgm_held_idle:max5m"]
    assert by["gpu:dcgm_held_idle:max5m"].endswith(">= bool 2048)")


def test_the_idle_series_is_named_and_described_for_what_it_counts():
    """The idle series is 1 only when the step's *maximum* activity is below the threshold (every raw
    sample of the step idle), so its name and the report's Method text say so, not "idle at some point"."""
    th = Thresholds.from_table()
    name = recording.rule_name(recording.IDLE)
    assert name == "gpu:dcgm_idle_throughout_step:max5m"
    (rule,) = [r for r in recording.recording_group(th)["rules"] if r["record"] == name]
    # what the rule computes: the step's max of the raw activity, compared with idle_activity_max
    assert "max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[5m])" in rule["expr"]
    assert rule["expr"].endswith(f"< bool {th.idle_activity_max:g}")
    # what the Method section says it counts
    text = recording.idle_definition(th)
    assert name in text
    assert "every raw sample" in text and "5m step" in text and f"below {th.idle_activity_max:.0%}" in text
    assert "lower bound" in text  # a step with one busy sample is not idle: fewer idle hours than per sample


def test_the_join_keeps_one_gpu_and_its_pod():
    expr = recording.joined("X")
    assert expr.startswith(f"max by ({recording.KEEP}) (")
    for lab in ("exported_pod", "exported_namespace", "exported_container"):
        assert f'"{lab}", "(.+)"' in expr


@needs_promtool
def test_every_recording_rule_has_promtool_cases(tmp_path):
    tested = {
        m
        for t in yaml.safe_load(CASES.read_text())["tests"]
        for case in t.get("promql_expr_test", [])
        for m in re.findall(r"gpu:\w+:\w+", case["expr"])
    }
    assert {r["record"] for r in recording.recording_group()["rules"]} <= tested
    # the recording group alone passes its cases: the planted-rule failures below come from the planted change
    out = _promtool_cases((PROM / "tests" / "gpu-alerts.labels-only.yaml").read_text(), tmp_path)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]


@needs_promtool
@pytest.mark.parametrize(
    "old,new",
    [
        ("< bool 0.05)", "< bool 0.01)"),  # zombie_activity_max: the stuck pod at 0.02 is no longer held idle
        ('"exported_pod", "(.+)"', '"exported_pod", "(x)"'),  # the exported_pod join left out
        # the step's mean instead of its max: a spike inside a step no longer counts
        ("max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[5m])", "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[5m])"),
        ('"pod", "", "pod", "(?i)(nvidia-)?dcgm-exporter.*"', '"pod", "", "pod", "none"'),  # exporter pod kept
        ("GPU_I_ID, pod", "pod"),  # MIG instances of one GPU merged
    ],
)
def test_a_planted_wrong_rule_fails_a_case(tmp_path, old, new):
    text = (PROM / "tests" / "gpu-alerts.labels-only.yaml").read_text()
    assert old in text
    planted = text.replace(old, new)
    assert _recording_only(planted) != _recording_only(text)  # the change lands in a recording rule
    out = _promtool_cases(planted, tmp_path)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr
