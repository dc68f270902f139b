"""deploy/prometheus: the generated alert rules, routes table and PrometheusRule are in sync with the data files,
every alert routes to a runbook of the catalogue with parameters it has, the promtool cases under
deploy/prometheus/tests/ pass (and fail on a planted wrong threshold), and runbook_url is a real URL."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpulib.catalogue import catalogue
from gpulib.core.errors import InvalidParameter
from gpulib.sources.signals import promql_any
from gpulib.xid import alerts

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (.ci/system-deps installs it)")


def _rules(doc):
    """The alert rules of a rules document (the recording rules are tests/cost/test_recording.py's)."""
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def test_committed_files_equal_the_generator():
    for rel, text in alerts.generated_files().items():
        assert (PROM / rel).read_text() == text, (
            f"{rel} is stale: run gpuops alerts --base-url {alerts.DEFAULT_BASE_URL}"
        )


def test_every_alert_routes_to_a_catalogue_runbook_with_its_parameters():
    cat = catalogue()
    routes = yaml.safe_load((PROM / "routes.yaml").read_text())["routes"]
    rules = _rules(yaml.safe_load((PROM / "gpu-alerts.yaml").read_text()))
    assert sorted(routes) == sorted(r["alert"] for r in rules)
    for r in rules:
        route = routes[r["alert"]]
        assert route["runbook"] in cat and cat[route["runbook"]].kind == "runbook", r["alert"]
        names = {p.name for p in cat[route["runbook"]].params}
        assert set(route["params"]) <= names, r["alert"]
        assert r["labels"]["runbook"] == route["runbook"]
        url = r["annotations"]["runbook_url"]
        assert url.startswith(f"https://gpuops.example.com/run/{route['runbook']}"), url
        assert "zombie_idle" not in url and ".ipynb" not in url
        assert r["annotations"]["gpuops_command"].startswith(f"gpuops run {route['runbook']}")


def test_runbook_url_handles_both_host_label_spellings():
    r = next(r for r in _rules(alerts.alert_rules("http://127.0.0.1:8080/")) if r["alert"] == "GPUXidCritical")
    assert r["annotations"]["runbook_url"] == (
        "http://127.0.0.1:8080/run/xid_ecc_triage?node={{ or $labels.Hostname "
        "$labels.hostname | urlquery }}&gpu={{ $labels.gpu | urlquery }}"
    )


@pytest.mark.parametrize(
    "bad", ["gpuops.example.com", "ftp://x", "https://x/?a=1", "https://x/#f", "", "https://x/{{ y }}"]
)
def test_base_url_must_be_an_absolute_http_url(bad):
    with pytest.raises(InvalidParameter):
        alerts.alert_rules(bad)


def test_new_alerts_cover_nvlink_and_the_exporter():
    names = {r["alert"] for r in _rules(alerts.alert_rules())}
    assert {"GPUNVLinkErrors", "GPUNVLinkDegraded", "DCGMExporterDown"} <= names


def _promtool_cases() -> list[Path]:
    return sorted((PROM / "tests").glob("*_test.yaml"))


@needs_promtool
def test_committed_rules_pass_promtool_check():
    for f in ("gpu-alerts.yaml", "tests/gpu-alerts.labels-only.yaml"):
        out = subprocess.run([PROMTOOL, "check", "rules", str(PROM / f)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_every_alert_has_a_firing_and_a_quiet_promtool_case():
    fired, quiet = set(), set()
    for path in _promtool_cases():
        for t in yaml.safe_load(path.read_text())["tests"]:
            for case in t.get("alert_rule_test", []):
                (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {r["alert"] for r in _rules(alerts.alert_rules())}
    assert names - fired == set(), "alerts without a firing case"
    assert names - quiet == set(), "alerts without a quiet case"


def _stage_case(case: Path, rules_text: str, root: Path) -> Path:
    """``case`` copied under ``root`` (a folder of its own: two cases cut one rules file differently) beside its rule
    files, each ``rules_text`` (None: the file as committed) cut to what the case can observe
    (:func:`_observable_rules`); returns the copy's path relative to ``root``'s parent."""
    doc = yaml.safe_load(case.read_text())
    for rel in doc["rule_files"]:
        src = (case.parent / rel).resolve()
        dst = root / src.relative_to(PROM)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(_observable_rules(src.read_text() if rules_text is None else rules_text, doc))
    staged = root / case.relative_to(PROM)
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(case, staged)
    return staged.relative_to(root.parent)


def _outcomes(stdout: str) -> dict[str, str]:
    """Each case file's result in the output of one ``promtool test rules`` over several: its ``Unit Testing:``
    line followed by ``SUCCESS`` on stdout; a failing file's ``FAILED:`` and errors go to stderr
    (prometheus/prometheus: cmd/promtool/unittest.go @01049551 ``RulesUnitTest``, ``ruleUnitTest``)."""
    out = {}
    for block in stdout.split("Unit Testing:")[1:]:
        name, _, rest = block.strip().partition("\n")
        out[name.strip()] = "SUCCESS" if rest.strip().startswith("SUCCESS") else "FAILED"
    return out


def test_outcomes_are_attributed_to_each_case_file():
    """promtool 2.42's stdout for a passing then a failing file (its FAILED block went to stderr)."""
    stdout = "Unit Testing:  a/temperature_test.yaml\n  SUCCESS\n\nUnit Testing:  b/memory_test.yaml\n\n\n"
    assert _outcomes(stdout) == {"a/temperature_test.yaml": "SUCCESS", "b/memory_test.yaml": "FAILED"}
    assert _outcomes(stdout.replace("  SUCCESS\n", "")) == {
        "a/temperature_test.yaml": "FAILED",
        "b/memory_test.yaml": "FAILED",
    }


@pytest.fixture(scope="module")
def promtool_cases(tmp_path_factory):
    """One ``promtool test rules`` over every case file, each against its rule files cut to what it can observe
    (:func:`_observable_rules`): promtool evaluates every rule at every step, and the untested alerts' subqueries
    were most of the 56 s of CPU the whole fixture cost (0.6-10 s a case file) without adding a check. The run is
    shared by test_promtool_cases_pass and the unchanged half of test_a_planted_wrong_threshold_fails_a_case
    (xid_test.yaml alone is ~10 s of CPU a run): (returncode, stdout, stderr, {case file name: SUCCESS | FAILED})."""
    tmp = tmp_path_factory.mktemp("promtool-cases")
    cases = {case.name: _stage_case(case, None, tmp / case.stem) for case in _promtool_cases()}
    out = subprocess.run(
        [PROMTOOL, "test", "rules", *map(str, cases.values())], capture_output=True, text=True, timeout=400, cwd=tmp
    )
    by_path = _outcomes(out.stdout)
    return out.returncode, out.stdout, out.stderr, {name: by_path.get(str(rel)) for name, rel in cases.items()}


@needs_promtool
def test_promtool_cases_pass(promtool_cases):
    """Every case file passes, each against its rule files cut to what it can observe (:func:`_observable_rules`)."""
    returncode, stdout, stderr, outcome = promtool_cases
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert set(outcome.values()) == {"SUCCESS"}, outcome  # every file was run and reported


def _observable_rules(text: str, case: dict) -> str:
    """A rules file cut to the rules whose output a promtool case file can observe: every recording rule (a series
    any expression may read), the alerts its ``alert_rule_test`` names and any alert an expression selects by
    ``alertname="..."``; the whole file when an expression reads ``ALERTS`` or ``ALERTS_FOR_STATE`` without naming
    one. promtool compares only the alerts a test names and the series an ``exp_samples`` lists
    (https://prometheus.io/docs/prometheus/latest/configuration/unit_testing_rules/), and an alert rule's only output
    is those two series, so a dropped rule changes no result; a quiet case still names its alert, which is kept."""
    groups = yaml.safe_load(text)["groups"]
    exprs = [e["expr"] for t in case["tests"] for e in t.get("promql_expr_test", [])]
    exprs += [str(r["expr"]) for g in groups for r in g["rules"]]
    if any("ALERTS" in e and "alertname=" not in e for e in exprs):
        return text
    keep = {a["alertname"] for t in case["tests"] for a in t.get("alert_rule_test", [])}
    keep |= {m for e in exprs if "ALERTS" in e for m in re.findall(r'alertname="([^"]+)"', e)}
    cut = [{**g, "rules": [r for r in g["rules"] if "record" in r or r.get("alert") in keep]} for g in groups]
    return yaml.safe_dump({"groups": [g for g in cut if g["rules"]]}, sort_keys=False)


def test_a_cut_rules_file_keeps_what_its_case_observes():
    """The cut of :func:`_observable_rules` on the committed fixture: every recording rule stays, every alert a case
    names stays, the others go, and a case reading ``ALERTS`` without a name keeps the whole file."""
    text = (PROM / "tests" / "gpu-alerts.labels-only.yaml").read_text()
    rules = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    case = {"tests": [{"alert_rule_test": [{"alertname": "GPUXidCritical"}], "promql_expr_test": [{"expr": "up"}]}]}
    kept = [r for g in yaml.safe_load(_observable_rules(text, case))["groups"] for r in g["rules"]]
    assert [r["record"] for r in kept if "record" in r] == [r["record"] for r in rules if "record" in r] != []
    assert [r["alert"] for r in kept if "alert" in r] == ["GPUXidCritical"]
    case["tests"][0]["promql_expr_test"] = [{"expr": 'ALERTS{alertname="GPUNVLinkErrors"}'}]
    assert {
        r["alert"] for g in yaml.safe_load(_observable_rules(text, case))["groups"] for r in g["rules"] if "alert" in r
    } == {
        "GPUXidCritical",
        "GPUNVLinkErrors",
    }
    case["tests"][0]["promql_expr_test"] = [{"expr": "count(ALERTS)"}]
    assert _observable_rules(text, case) == text


@needs_promtool
@pytest.mark.parametrize(
    "old,new,case",
    [
        (
            "DCGM_FI_DEV_GPU_TEMP_CELSIUS) + 0) >= 85",
            "DCGM_FI_DEV_GPU_TEMP_CELSIUS) + 0) >= 87",
            "temperature_test.yaml",
        ),
        ("> 0.9)", "> 0.95)", "memory_test.yaml"),
        ("[1h:15s]", "[1h:2m]", "xid_test.yaml"),  # a subquery coarser than the scrape misses the overwritten 48
        # NVLINK_BANDWIDTH_TOTAL is a bandwidth in MB/s: rate() of it reads steady traffic as "no traffic"
        (
            "max_over_time(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
            "rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
            "nvlink_exporter_test.yaml",
        ),
    ],
)
def test_a_planted_wrong_threshold_fails_a_case(promtool_cases, tmp_path, old, new, case):
    text = (PROM / "tests" / "gpu-alerts.labels-only.yaml").read_text()
    assert old in text
    planted = text.replace(old, new)
    assert _case_rules(planted, case) != _case_rules(text, case)  # the change lands in an alert the case tests
    returncode, stdout, stderr, outcome = promtool_cases
    # the case passes unchanged against the same cut of the rules (test_promtool_cases_pass's run)
    assert outcome[case] == "SUCCESS", stdout[-3000:] + stderr[-3000:]
    out = _run_case(planted, case, tmp_path)
    assert out.returncode != 0 and "FAILED" in out.stdout + out.stderr
    assert list(_outcomes(out.stdout).values()) == ["FAILED"]


def _case_rules(text: str, case: str) -> str:
    """The rules fixture cut to the alerts that ``case`` tests (does a planted change land in one of them?)."""
    tested = {
        a["alertname"]
        for t in yaml.safe_load((PROM / "tests" / case).read_text())["tests"]
        for a in t.get("alert_rule_test", [])
    }
    groups = [
        {**g, "rules": [r for r in g["rules"] if r.get("alert") in tested]} for g in yaml.safe_load(text)["groups"]
    ]
    return yaml.safe_dump({"groups": [g for g in groups if g["rules"]]}, sort_keys=False)


def _run_case(text: str, case: str, workdir: Path) -> subprocess.CompletedProcess:
    """``case`` against the labels-only fixture ``text`` cut as test_promtool_cases_pass cuts it: promtool evaluates
    every rule at every step, and the others' subqueries cost ~25-50x the run (nvlink_exporter_test.yaml: 9.7 s vs
    0.15 s CPU) without adding a check."""
    assert yaml.safe_load((PROM / "tests" / case).read_text())["rule_files"] == ["gpu-alerts.labels-only.yaml"]
    rel = _stage_case(PROM / "tests" / case, text, workdir / "case")
    return subprocess.run(
        [PROMTOOL, "test", "rules", str(rel)], capture_output=True, text=True, timeout=300, cwd=workdir
    )


#: the PrometheusRule v1 schema, transcribed from the CRD's openAPIV3Schema (prometheus-operator/prometheus-operator
#: example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml @01fad0d6, operator 0.82.2);
#: additionalProperties false where the API server would prune an unknown field silently
_DUR = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_STRMAP = {"type": "object", "additionalProperties": {"type": "string"}}
PROMETHEUSRULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": _DUR},
                            "labels": _STRMAP,
                            "limit": {"type": "integer"},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string", "pattern": _DUR},
                                        "keep_firing_for": {"type": "string", "pattern": _DUR, "minLength": 1},
                                        "labels": _STRMAP,
                                        "annotations": _STRMAP,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


def test_prometheusrule_validates():
    import jsonschema

    doc = yaml.safe_load((PROM / "gpu-alerts.prometheusrule.yaml").read_text())
    jsonschema.validate(doc, PROMETHEUSRULE_SCHEMA)
    assert doc["spec"] == yaml.safe_load((PROM / "gpu-alerts.yaml").read_text())
    bad = yaml.safe_load(yaml.safe_dump(doc))
    bad["spec"]["groups"][0]["rules"][0]["for"] = "5 minutes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, PROMETHEUSRULE_SCHEMA)
    bad = yaml.safe_load(yaml.safe_dump(doc))
    bad["spec"]["groups"][0]["rules"][0]["annotation"] = bad["spec"]["groups"][0]["rules"][0].pop("annotations")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, PROMETHEUSRULE_SCHEMA)
    kv = pytest.importorskip("kubernetes_validate")
    # kubernetes-validate has no schema for custom resources: the object metadata is checked on a ConfigMap
    kv.validate(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"], "data": {}}, "1.30.0", strict=True
    )
    with pytest.raises(kv.SchemaNotFoundError):
        kv.validate(doc, "1.30.0", strict=True)


@needs_promtool
def test_prometheusrule_spec_passes_promtool(tmp_path):
    doc = yaml.safe_load((PROM / "gpu-alerts.prometheusrule.yaml").read_text())
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(doc["spec"]))
    out = subprocess.run([PROMTOOL, "check", "rules", str(p)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_memory_high_stays_quiet_on_the_demo_fleets_busy_vllm_gpus(tmp_path, monkeypatch):
    import re

    from gpulib.demo.simulator import FleetSimulator

    monkeypatch.setenv("GPUOPS_END", "2026-11-29T12:00:00Z")
    fields = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    series = []
    used: dict[str, float] = {}
    free: dict[str, float] = {}
    for line in FleetSimulator(exporter="4.8").scrape_text().splitlines():  # the fields above under their 4.8 names
        m = re.match(r"(\w+)(\{.*\}) (\S+)$", line)
        if m and m.group(1) in fields:
            series.append({"series": m.group(1) + m.group(2), "values": f"{float(m.group(3)):g}x30"})
            (used if m.group(1) == fields[0] else free if m.group(1) == fields[1] else {})[m.group(2)] = float(
                m.group(3)
            )
    full = {k for k in used if k in free and used[k] / (used[k] + free[k]) > 0.9}
    assert len(full) >= 4  # the demo's vLLM replicas pre-allocate 90 % of their GPUs' memory
    case = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [{"eval_time": "20m", "alertname": "GPUMemoryHigh", "exp_alerts": []}],
            }
        ],
    }
    (tmp_path / "case.yaml").write_text(yaml.safe_dump(case))
    rules = (PROM / "tests" / "gpu-alerts.labels-only.yaml").read_text()
    # cut to what the case observes (:func:`_observable_rules`): the other alerts' subqueries over the fleet's
    # series were most of the run's CPU and no part of its result
    (tmp_path / "rules.yaml").write_text(_observable_rules(rules, case))
    ok = subprocess.run(
        [PROMTOOL, "test", "rules", "case.yaml"], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stdout[-3000:]
    # the rule before this change (memory share alone) fires on them: the case can fail
    active = re.escape(promql_any("DCGM_FI_PROF_GR_ENGINE_ACTIVE"))  # under either name (signals.csv)
    old = re.sub(r"\) unless on\([^)]*\) " + active + r" >= [0-9.]+", ")", rules)
    assert old != rules
    assert _observable_rules(old, case) != _observable_rules(rules, case)  # the change is in what the case observes
    (tmp_path / "rules.yaml").write_text(_observable_rules(old, case))
    bad = subprocess.run(
        [PROMTOOL, "test", "rules", "case.yaml"], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert (
        bad.returncode != 0
        and "GPUMemoryHigh" in bad.stdout + bad.stderr
        and "vllm-llama70b" in bad.stdout + bad.stderr
    )
