"""mixin/: the committed files are the generator's; the alerts are `gpuops alerts`' own (one source) plus one
absent-metric guard per signal an alert reads; promtool checks and tests the rules; the dashboards pass Grafana's
dashboard schema and our lint (each planted violation is caught); kubectl kustomize renders them as sidecar
ConfigMaps."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpulib.catalogue import catalogue
from gpulib.core.errors import InvalidParameter
from gpulib.mixin import build, lint
from gpulib.mixin.config import check_selector, load_config
from gpulib.mixin.dashboards import build as boards
from gpulib.mixin.rules import GUARD_ALERT, GUARD_GROUP, documents, guarded_signals
from gpulib.sources.signals import aliases, name_in, signals
from gpulib.xid import alerts

ROOT = Path(__file__).resolve().parents[2]
MIXIN = ROOT / "mixin"
PROMTOOL = shutil.which("promtool")
KUBECTL = shutil.which("kubectl")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed")


@pytest.fixture(scope="module")
def cfg():
    return load_config()


@pytest.fixture(scope="module")
def dashboards(cfg):
    return boards(cfg)


def test_committed_mixin_equals_the_generator():
    files = build.generated_files()
    for rel, text in files.items():
        assert (MIXIN / rel).read_text() == text, f"mixin/{rel} is stale: run gpuops mixin --out mixin"
    on_disk = {str(p.relative_to(MIXIN)) for p in (MIXIN / "dashboards_out").glob("*.json")}
    assert on_disk == {k for k in files if k.startswith("dashboards_out/")}


def test_the_alerts_are_those_of_gpuops_alerts(cfg):
    mine, records = documents(cfg)
    shipped = alerts.rules_document(cfg.gpuops_url, cluster_label=cfg.cluster_label)["groups"]
    assert mine["groups"][0] == shipped[0]  # the same rule texts, not a copy kept in step by hand
    assert records["groups"] == shipped[1:]
    committed = yaml.safe_load((MIXIN / "prometheus_alerts.yaml").read_text())
    assert (
        committed["groups"][0]["rules"]
        == yaml.safe_load((ROOT / "deploy/prometheus/gpu-alerts.yaml").read_text())["groups"][0]["rules"]
    )


def test_every_signal_an_alert_reads_has_a_guard_by_node_and_cluster(cfg):
    guards = [r for g in documents(cfg)[0]["groups"] for r in g["rules"] if r["alert"] == GUARD_ALERT]
    by_signal = {r["labels"]["signal"]: r for r in guards}
    # hand-listed: what the shipped alerts read besides temperature (XID gauge, ECC, remap, NVLink, activity, FB)
    assert {
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
    } <= set(by_signal)
    assert "DCGM_EXP_XID_ERRORS_COUNT" not in by_signal  # guard_skip of mixin_config.csv
    for sig, r in by_signal.items():
        assert "absent(" not in r["expr"]  # absent() cannot name the node
        assert all(n in r["expr"] for n in aliases(sig)), sig  # both exporter generations' names
        assert "on (cluster, Hostname, hostname)" in r["expr"]
        assert r["annotations"]["runbook_url"] == "https://gpuops.example.com/run/fleet_overview"
    assert set(by_signal) == set(guarded_signals(cfg))


def test_the_cluster_label_and_url_reach_every_rule():
    c = load_config().with_overrides(gpuops_url="http://gpuops.local:8080", cluster_label="k8s_cluster")
    text = build.generated_files(c)["prometheus_alerts.yaml"] + build.generated_files(c)["prometheus_rules.yaml"]
    assert "by (cluster," not in text and "on (cluster," not in text
    assert "by (k8s_cluster, Hostname, hostname)" in text
    assert "https://gpuops.example.com" not in text and "http://gpuops.local:8080/run/xid_ecc_triage?" in text
    assert "--base-url http://gpuops.local:8080 --cluster-label k8s_cluster" in text


@pytest.mark.parametrize("bad", ['job="a"}', "job=a", 'job=~"x" or up', 'a="b",,c="d"', 'a="b" c="d"'])
def test_a_selector_that_is_not_label_matchers_is_refused(bad):
    with pytest.raises(InvalidParameter):
        check_selector(bad)
    assert check_selector(' job=~".*dcgm.*", namespace!="kube-system"') == 'job=~".*dcgm.*", namespace!="kube-system"'


@needs_promtool
def test_promtool_checks_the_generated_rules():
    for f in ("prometheus_alerts.yaml", "prometheus_rules.yaml"):
        out = subprocess.run([PROMTOOL, "check", "rules", str(MIXIN / f)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr


def _series(node_label: str, node: str, gen: str, fields: list[str]) -> list[dict]:
    return [
        {"series": f'{name_in(f, gen)}{{{node_label}="{node}", gpu="0", UUID="GPU-{node}"}}', "values": "1x90"}
        for f in fields
    ]


def _guard_case(tmp_path: Path, missing_on_new: list[str]) -> Path:
    """Two nodes, one per exporter generation (4.8 names + Hostname, 4.10 names + hostname), each serving
    temperature and every guarded signal except ``missing_on_new`` on the 4.10 node."""
    guarded = list(guarded_signals(load_config()))
    old = _series("Hostname", "old-node", "4.8", ["DCGM_FI_DEV_GPU_TEMP", *guarded])
    new = _series(
        "hostname", "new-node", "4.10", ["DCGM_FI_DEV_GPU_TEMP", *[g for g in guarded if g not in missing_on_new]]
    )
    exp = [
        {
            "exp_labels": {"alertname": GUARD_ALERT, "hostname": "new-node", "severity": "info", "signal": s,
                           "runbook": "fleet_overview"}
        }
        for s in missing_on_new
    ]  # fmt: skip
    doc = yaml.safe_load((MIXIN / "prometheus_alerts.yaml").read_text())
    # the committed guard group alone (the other alerts have their cases in deploy/prometheus/tests/ and their
    # subqueries make an 80-minute case slow), labels only, as deploy/prometheus/tests/ state them
    doc["groups"] = [g for g in doc["groups"] if g["name"] == GUARD_GROUP]
    assert doc["groups"]
    for g in doc["groups"]:
        for r in g["rules"]:
            r.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    case = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": old + new,
                "alert_rule_test": [
                    {"eval_time": "30m", "alertname": GUARD_ALERT, "exp_alerts": []},  # not before guard_for_s (1h)
                    {"eval_time": "80m", "alertname": GUARD_ALERT, "exp_alerts": exp},
                ],
            }
        ],
    }
    path = tmp_path / "guards_test.yaml"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    return path


def _promtool_test(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PROMTOOL, "test", "rules", path.name],
        capture_output=True, text=True, timeout=300, cwd=path.parent,
    )  # fmt: skip


@needs_promtool
def test_promtool_a_guard_fires_for_the_node_that_lacks_the_signal_only(tmp_path):
    out = _promtool_test(_guard_case(tmp_path, ["DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


@needs_promtool
def test_promtool_no_guard_fires_when_both_generations_serve_every_signal(tmp_path):
    out = _promtool_test(_guard_case(tmp_path, []))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


@needs_promtool
def test_promtool_the_guard_case_fails_on_a_wrong_expectation(tmp_path):
    path = _guard_case(tmp_path, ["DCGM_FI_DEV_XID_ERRORS"])
    case = yaml.safe_load(path.read_text())
    case["tests"][0]["alert_rule_test"][1]["exp_alerts"][0]["exp_labels"]["hostname"] = "old-node"
    path.write_text(yaml.safe_dump(case))
    assert _promtool_test(path).returncode != 0


# ------------------------------------------------------------------------------------------------ dashboards


def test_the_dashboards_are_fleet_node_and_namespace(dashboards):
    assert set(dashboards) == {"gpu-fleet", "gpu-node", "gpu-namespace"}
    titles = {k: {p["title"] for p in d["panels"]} for k, d in dashboards.items()}
    assert {"Open incidents: firing alerts with a runbook", "Firing GPU alerts by node"} <= titles["gpu-fleet"]
    assert {"NVLink bandwidth", "Fabric health (1 healthy, 2 unhealthy, 3 limited)"} <= titles["gpu-node"]
    assert {"Idle cost", "Pods holding GPU memory while idle"} <= titles["gpu-namespace"]
    node = dashboards["gpu-node"]
    assert node["graphTooltip"] == 2  # one time axis: shared crosshair and tooltip
    (xid,) = node["annotations"]["list"]
    assert "DCGM_FI_DEV_XID_ERRORS{" in xid["expr"] and "DCGM_FI_DEV_XID_ERROR{" in xid["expr"]


@pytest.mark.parametrize("stem", ["gpu-fleet", "gpu-node", "gpu-namespace"])
def test_each_dashboard_passes_grafanas_schema_and_our_lint(dashboards, stem):
    assert lint.schema_errors(dashboards[stem]) == []
    assert lint.problems(dashboards[stem], catalogue()) == []


def test_the_schema_is_grafanas_and_catches_a_wrong_dashboard(dashboards):
    s = lint.schema()
    assert s["$schema"].startswith("http://json-schema.org/draft-07") and "Dashboard" in s["definitions"]
    bad = copy.deepcopy(dashboards["gpu-fleet"])
    bad["panels"][1]["gridpos"] = bad["panels"][1].pop("gridPos")  # a misspelt field
    bad["graphTooltip"] = 7
    del bad["schemaVersion"]
    errs = lint.schema_errors(bad)
    assert any(e.startswith("panels/1:") for e in errs) and any(e.startswith("graphTooltip:") for e in errs)
    assert any("schemaVersion" in e for e in errs)


def _first_data_panel(board: dict, title: str) -> dict:
    return next(p for p in board["panels"] if p.get("title") == title)


@pytest.mark.parametrize(
    "plant,expect",
    [
        (lambda p: p["fieldConfig"]["defaults"].pop("unit"), "has no unit"),
        (lambda p: p.update(datasource={"type": "prometheus", "uid": "prom-1"}), "does not read the ${datasource}"),
        (lambda p: p["targets"][0].update(expr="sum(nvidia_smi_temperature_gpu)"), "nvidia_smi_temperature_gpu"),
        (lambda p: p["targets"][0].update(expr='up{job="x"} or vector(0)'), "fills missing data"),
        (
            lambda p: p["fieldConfig"]["defaults"]["links"][0].update(url="${gpuops}/run/zombie_idle?node=x"),
            "zombie_idle",
        ),
        (
            lambda p: p["fieldConfig"]["defaults"]["links"][0].update(url="${gpuops}/run/node_health?gpu=1"),
            "gpu is not",
        ),
        (
            lambda p: p["fieldConfig"]["defaults"]["links"][0].update(url="https://elsewhere/run/node_health"),
            "does not",
        ),
    ],
)
def test_the_lint_catches_each_planted_violation(dashboards, plant, expect):
    bad = copy.deepcopy(dashboards["gpu-fleet"])
    plant(_first_data_panel(bad, "Last XID code by GPU"))
    found = lint.problems(bad, catalogue())
    assert any(expect in f for f in found), found


def test_every_query_reads_a_signal_under_all_its_names(dashboards):
    """Both exporter generations: a query that reads a contract signal names every name it has had."""
    contract = {n: s for s in signals() for n in aliases(s)}
    checked = 0
    for board in dashboards.values():
        exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
        exprs += [a["expr"] for a in board.get("annotations", {}).get("list", []) if a.get("expr")]
        for e in exprs:
            for sig in {contract[m] for m in lint.metrics_of(e) if m in contract}:
                assert set(aliases(sig)) <= lint.metrics_of(e), (sig, e[:200])
                checked += 1
    assert checked >= 25


def test_missing_data_stays_missing(dashboards):
    for board in dashboards.values():
        for p in board["panels"]:
            if p["type"] == "row":
                continue
            assert p["fieldConfig"]["defaults"]["noValue"].startswith("no data"), p["title"]
            if p["type"] == "timeseries":
                assert p["fieldConfig"]["defaults"]["custom"]["spanNulls"] is False, p["title"]


def test_panel_ids_are_unique(dashboards):
    for board in dashboards.values():
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not on PATH")
@pytest.mark.parametrize("where", ["mixin", "deploy/grafana"])
def test_kustomize_renders_the_dashboards_as_sidecar_configmaps(where):
    out = subprocess.run([KUBECTL, "kustomize", str(ROOT / where)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    objs = [o for o in yaml.safe_load_all(out.stdout) if o]
    assert {o["kind"] for o in objs} == {"ConfigMap"}
    assert len(objs) == 3
    for o in objs:
        assert o["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert o["metadata"]["namespace"] == "monitoring"
        ((key, text),) = o["data"].items()
        assert json.loads(text) == json.loads((MIXIN / "dashboards_out" / key).read_text())
