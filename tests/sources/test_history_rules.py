"""gpulib/sources/history_rules.py: the node history's recording rules ship in the generated rule files, follow
Prometheus' level:metric:operations names, and every rule has promtool cases
(deploy/prometheus/tests/history_recording_test.yaml) that fail on a planted wrong rule: Ready ``unknown`` left out,
a carried-over XID gauge read as a new XID, the exporter's zero series counted, a dcgm-exporter generation's name
left out, a new pod's first count missed, the events rules not aligned to the 5-minute marks."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpulib.sources import history_rules
from gpulib.xid import alerts

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"
CASES = PROM / "tests" / "history_recording_test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/system-deps installs it)")
NAMES = (history_rules.EVENTS_GROUP, history_rules.INPUTS_GROUP)


def _groups(doc) -> list[dict]:
    return [g for g in doc["groups"] if g["name"] in NAMES]


def _history_only(text: str) -> str:
    """The rules fixture with the history groups alone (the alert group's subqueries would cost ~50x the run
    without adding a check; tests/xid/test_alerts.py::test_promtool_cases_pass runs them with the whole fixture)."""
    return yaml.safe_dump({"groups": _groups(yaml.safe_load(text))}, sort_keys=False)


def _promtool_cases(rules_text: str, workdir: Path) -> subprocess.CompletedProcess:
    (workdir / "gpu-alerts.labels-only.yaml").write_text(_history_only(rules_text))
    shutil.copy(CASES, workdir / CASES.name)
    return subprocess.run(
        [PROMTOOL, "test", "rules", CASES.name], capture_output=True, text=True, timeout=300, cwd=workdir
    )


def test_the_history_groups_ship_in_the_rule_file_and_the_prometheusrule():
    rules = _groups(yaml.safe_load((PROM / "gpu-alerts.yaml").read_text()))
    spec = _groups(yaml.safe_load((PROM / "gpu-alerts.prometheusrule.yaml").read_text())["spec"])
    assert rules == spec == _groups(alerts.rules_document())
    assert [g["interval"] for g in rules] == ["5m", "1h"]  # the history's step (prom_history.STEP_S); presence
    assert {r["record"] for g in rules for r in g["rules"]} == {*history_rules.RULE.values(), history_rules.PRESENCE}


def test_rule_names_follow_level_metric_operations():
    for g in history_rules.history_groups():
        for r in g["rules"]:
            assert re.fullmatch(r"(node|gpu):[a-z_]+:[a-z0-9_]+", r["record"]), r["record"]


def test_the_rules_read_every_name_of_the_signal_contract():
    """The XID gauge was renamed by dcgm-exporter 4.9 (gpulib/data/sources/signals.csv): the change rule and the
    presence rule read both names, so a mixed fleet records both."""
    by = {
        (r["record"], r.get("labels", {}).get("input")): r["expr"]
        for g in history_rules.history_groups()
        for r in g["rules"]
    }
    for key in ((history_rules.RULE["xid_gauge"], None), (history_rules.PRESENCE, "DCGM_FI_DEV_XID_ERRORS")):
        assert re.search(r"\bDCGM_FI_DEV_XID_ERRORS\b", by[key]) and re.search(r"\bDCGM_FI_DEV_XID_ERROR\b", by[key])


@needs_promtool
def test_every_history_rule_has_promtool_cases(tmp_path):
    tested = {
        m
        for t in yaml.safe_load(CASES.read_text())["tests"]
        for case in t.get("promql_expr_test", [])
        for m in re.findall(r"(?:node|gpu):\w+:\w+", case["expr"])
    }
    assert {r["record"] for g in history_rules.history_groups() for r in g["rules"]} <= tested
    out = _promtool_cases((PROM / "tests" / "gpu-alerts.labels-only.yaml").read_text(), tmp_path)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]


@needs_promtool
@pytest.mark.parametrize(
    "old,new",
    [
        ('status=~"false|unknown"', 'status=~"false"'),  # an unreachable node (Ready unknown) is not NotReady
        # a carried-over gauge value read as an XID
        ("(DCGM_FI_DEV_XID_ERRORS != DCGM_FI_DEV_XID_ERRORS offset 5m)", "(DCGM_FI_DEV_XID_ERRORS > 0)"),
        # the 4.10 name left out: a mixed fleet loses its new exporters' XIDs
        (" or (DCGM_FI_DEV_XID_ERROR != DCGM_FI_DEV_XID_ERROR offset 5m)", ""),
        ('DCGM_EXP_XID_ERRORS_COUNT{xid!=""}', "DCGM_EXP_XID_ERRORS_COUNT"),  # the exporter's zero series recorded
        # a pod created in the last 5 minutes compared with a minute ago: its first count is missed
        (
            "unless kube_pod_container_status_restarts_total offset 5m",
            "unless kube_pod_container_status_restarts_total offset 1m",
        ),
        # the events rules evaluated where the group's phase puts them, not at the 5-minute marks
        ("[299999ms:5m]", "[1m:1m]"),
    ],
)
def test_a_planted_wrong_rule_fails_a_case(tmp_path, old, new):
    text = (PROM / "tests" / "gpu-alerts.labels-only.yaml").read_text()
    assert old in text
    planted = text.replace(old, new)
    assert _history_only(planted) != _history_only(text)  # the change lands in a history rule
    out = _promtool_cases(planted, tmp_path)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr
