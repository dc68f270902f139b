"""One rule per concept: the fleet overview and the utilization report call the same pods idle/zombie, the
scheduling checks and the cost report agree on request/limit problems, one settings loader and one money text.

Before the rules were unified (two idle/zombie rules, two request/limit checks) these disagreed on the demo
fleet with the window ending 2026-12-01T06:45:00Z:

* 24h window: ``notebooks/jupyter-alice-0`` was "Idle" in the fleet overview (it became a zombie during the
  window, so its window mean stayed above 5 %) and a zombie in the report (a held-idle run of hours);
* 7d window: seven serving pods (triton-bert, vllm-qwen7b, image-resize, whisper-api) were zombies by the
  report's rule on raw 30 s samples but not in the report itself, which pulls 5-minute max samples; the fleet
  overview now classifies on the report's samples (:func:`gpulib.cost.idle_samples`);
* a pod whose containers ask 2 GPUs/limit 1 and 1 GPU/limit 2 was invalid for the scheduling check and fine
  for the cost check (which compared the pod's sums).
"""

from __future__ import annotations

import functools

import pytest

from gpulib.core.errors import InvalidParameter, UnknownSetting
from gpulib.core.findings import Severity
from gpulib.core.knowledge import settings
from gpulib.core.money import money

END = "2026-12-01T06:45:00Z"


@pytest.fixture(scope="module")
def demo_0645():
    """The demo source at END. Its ``series`` answers a query it was asked before (same field, window, step,
    aggregation) with a copy of the first answer: the fleet overview (:func:`gpulib.cost.idle_samples`) and the
    report (:func:`gpulib.cost.steps.load_report_data`) pull the same series, and each rule still runs on its own
    copy of them."""
    from gpulib.sources import connect

    src = connect("demo", end=END)
    pull, answers = src.series, {}

    def series(*args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        if key not in answers:
            answers[key] = pull(*args, **kwargs)
        return answers[key].copy()

    src.series = series
    return src


@functools.cache  # one computation per (source, window): several tests read the same verdicts, none changes them
def _fleet_verdicts(src, window):
    import gpulib.fleet.findings as fleet_findings
    import gpulib.fleet.steps as fleet_steps

    return {f.title.split()[-1]: f for f in fleet_findings.idle_findings(fleet_steps.idle_inputs(src, window))}


@functools.cache  # as above, the report's zombies per (source, window)
def _report_zombies(src, window):
    """The zombies of the utilization report, through the report's own data path (notebook cell for cell)."""
    from gpulib.cost import analyze_cost
    from gpulib.cost.steps import load_report_data

    d = load_report_data(src, window)
    rep = analyze_cost(d.nodes, d.pods, d.gr_engine_active, d.fb_used, gpu_util=d.gpu_util, window=window)
    z = rep.zombies
    zombie_titles = {f.title for f in rep.findings if f.title.startswith("Zombie pod ")}
    return set(z["namespace"] + "/" + z["pod"]), zombie_titles


@pytest.mark.parametrize("window", ["1h", "24h", "7d"])
def test_fleet_overview_and_report_call_the_same_pods_zombies(demo_0645, window):
    fleet = _fleet_verdicts(demo_0645, window)
    fleet_zombies = {pod for pod, f in fleet.items() if f.title.startswith("Zombie")}
    report_zombies, titles = _report_zombies(demo_0645, window)
    assert fleet_zombies == report_zombies
    assert titles == {f"Zombie pod {p} holds GPU memory while idle" for p in report_zombies}
    assert all(fleet[p].severity == Severity.WARNING for p in fleet_zombies)


def test_the_pods_the_two_rules_disagreed_on(demo_0645):
    day = _fleet_verdicts(demo_0645, "24h")
    assert day["notebooks/jupyter-alice-0"].title == "Zombie GPU workload notebooks/jupyter-alice-0"
    assert "for " in day["notebooks/jupyter-alice-0"].evidence[2]  # how long it held memory idle
    week = _fleet_verdicts(demo_0645, "7d")
    assert "inference/triton-bert-7c8d9b6f5-abcd1" not in week or not week[
        "inference/triton-bert-7c8d9b6f5-abcd1"
    ].title.startswith("Zombie")


def test_classify_idle_rule_on_a_handmade_series():
    import pandas as pd

    from gpulib.cost import Thresholds, classify_idle, prepare_samples

    ts = pd.date_range("2026-12-01T00:00Z", periods=80, freq="30s")

    def rows(pod, act, fb):
        return pd.DataFrame(
            {
                "timestamp": ts,
                "value": act,
                "node": "n1",
                "gpu": pod[-1],
                "gpu_i_profile": "",
                "gpu_i_id": "",
                "pod": pod,
                "namespace": "ml",
                "container": "c",
            }
        ), pd.DataFrame({"timestamp": ts, "value": fb, "node": "n1", "gpu": pod[-1], "gpu_i_id": ""})

    parts = [
        rows("held0", [0.01] * 80, [4096] * 80),  # 40 min held idle: zombie
        rows("spiky1", [0.01] * 40 + [0.5] + [0.01] * 39, [4096] * 80),  # spike breaks the run: 20 min each
        rows("light2", [0.08] * 80, [100] * 80),  # below 10 % mean, little memory: idle
        rows("busy3", [0.7] * 80, [9000] * 80),
    ]
    act = pd.concat([p[0] for p in parts], ignore_index=True)
    fb = pd.concat([p[1] for p in parts], ignore_index=True)
    th = Thresholds.from_table()
    v = classify_idle(prepare_samples(act, fb), th).set_index("pod")["state"].to_dict()
    assert v == {"held0": "zombie", "spiky1": "idle", "light2": "idle", "busy3": "busy"}


# ------------------------------------------------------------------------------------- request/limit
_SPLIT = {
    "kind": "Pod",
    "metadata": {"name": "split", "namespace": "ml"},
    "spec": {
        "nodeName": "n1",
        "containers": [
            {"name": "a", "resources": {"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 1}}},
            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}},
        ],
    },
    "status": {"phase": "Running"},
}


def test_scheduling_and_cost_report_the_same_request_limit_problems():
    import gpulib.fleet.scheduling as scheduling
    from gpulib.kube.frames import pods_frame
    from gpulib.kube.requests import request_limit_issues

    sched = scheduling.request_limit_problems([_SPLIT])
    cost = request_limit_issues(pods_frame({"items": [_SPLIT]}))
    assert [f.data["container"] for f in sched] == ["a", "b"]
    assert list(cost["container"]) == ["a", "b"] and set(cost["problem"]) == {"GPU request != limit"}
    from gpulib.kube.requests import request_limit_findings

    assert [f.title for f in request_limit_findings(cost)] == [f.title for f in sched]
    assert {f.severity for f in sched} == {Severity.CRITICAL}


def test_lesson_uses_the_same_check():
    from gpulib.learn.lessons import pod_resources_outcome

    out = pod_resources_outcome({"requests": {"nvidia.com/mig-1g.5gb": 2}, "limits": {"nvidia.com/mig-1g.5gb": 1}})
    assert out["check"] == "MIG request != limit"


# ------------------------------------------------------------------------------------- settings and money
@pytest.mark.parametrize(
    "table",
    [
        "cost_policy",
        "report_policy",
        "scheduling_settings",
        "operator_settings",
        "remediation_policy",
        "alert_settings",
        "nccl_thresholds",
        "nccl_job_defaults",
        "vllm_deploy",
        "model_memory_overheads",
        "thresholds",
    ],
)
def test_one_error_text_for_every_settings_table(table):
    import re

    s = settings(table)
    with pytest.raises(UnknownSetting) as exc:
        s["no_such_key"]
    text = str(exc.value)
    assert re.match(rf"gpulib/data/[a-z_]+/{table}\.csv has no key 'no_such_key'; known keys: ", text), text
    assert sorted(s)[0] in text and isinstance(exc.value, InvalidParameter) and isinstance(exc.value, KeyError)


def test_settings_are_typed():
    assert settings("cost_policy")["hours_per_month"] == 730 and isinstance(
        settings("cost_policy")["hours_per_month"], int
    )
    assert settings("thresholds")["idle_activity_max"] == pytest.approx(0.10)
    assert settings("report_policy").text("series_step") == "5m"
    assert "kube-system" in settings("scheduling_settings").items_list("system_namespaces")
    with pytest.raises(Exception, match="not a number"):
        settings("cost_policy").number("default_pricing_provider")


@pytest.mark.parametrize(
    "amount, currency, text",
    [
        (1234.5, "USD", "1,234 USD"),
        (1235.5, "usd", "1,236 USD"),
        (12.345, "EUR", "12.35 EUR"),
        (-250, "USD", "-250 USD"),
        (float("nan"), "USD", "n/a"),
        (None, "USD", "n/a"),
        (1_000_000, "JPY", "1,000,000 JPY"),
    ],
)
def test_money_text(amount, currency, text):
    assert money(amount, currency) == text
    assert "$" not in money(amount, currency)


def test_scheduling_and_cost_agree_on_non_gpu_pods_on_gpu_nodes():
    """Before: the cost report exempted nvidia-device-plugin but not logging and counted only Running pods; the
    scheduling check exempted logging but not nvidia-device-plugin and counted Pending pods bound to a node."""
    import pandas as pd

    import gpulib.fleet.scheduling as scheduling
    from gpulib.cost.analysis import non_gpu_pods_on_gpu_nodes

    def pod(ns, name, phase="Running", gpu=0):
        return {
            "namespace": ns,
            "pod": name,
            "node": "g1",
            "phase": phase,
            "gpu_request": gpu,
            "gpu_limit": gpu,
            "mig_requests": {},
            "mig_limits": {},
            "owner_kind": "Deployment",
            "owner_name": name,
        }

    pods = pd.DataFrame(
        [
            pod("logging", "fluentd"),
            pod("nvidia-device-plugin", "nvdp-helper"),
            pod("web", "pending-api", phase="Pending"),
            pod("web", "api"),
            pod("ml", "train", gpu=1),
        ]
    )
    nodes = pd.DataFrame(
        [
            {
                "node": "g1",
                "gpu_capacity": 8,
                "gpu_allocatable": 8,
                "mig_capacity": {},
                "mig_allocatable": {},
                "gpu_product": "NVIDIA-H100-80GB-HBM3",
                "taints": [],
            }
        ]
    )
    cost = non_gpu_pods_on_gpu_nodes(pods, pd.Series(["g1"]))
    sched = scheduling.non_gpu_pods_on_gpu_nodes(nodes, pods)
    assert (
        sorted(cost["namespace"] + "/" + cost["pod"]) == sorted(sched[0].data["pods"]) == ["web/api", "web/pending-api"]
    )


def test_no_module_loads_a_settings_table_itself():
    """Every key/value table is read through core.knowledge.settings(): no module builds its own dict from one."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "gpulib"
    tables = [p.stem for p in (root / "data").rglob("*.csv") if p.read_text().startswith("key,value")]
    assert {"cost_policy", "report_policy", "thresholds", "operator_settings"} <= set(tables)
    pattern = re.compile(r"load_table\(\s*[\"'](" + "|".join(map(re.escape, tables)) + r")(\.csv)?[\"']")
    hits = [
        f"{p.relative_to(root)}:{i}"
        for p in root.rglob("*.py")
        if p.name != "knowledge.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line) and "def thresholds_frame" not in "".join(p.read_text().splitlines()[max(0, i - 4) : i])
    ]  # a lesson shows the table
    assert hits == [], hits


@pytest.mark.parametrize("window", ["24h", "7d"])
def test_fleet_overview_gives_idle_and_zombie_pods_their_own_sop_from_data(demo_0645, window):
    """The scenario's ``idle`` pods (reserved, unused) are "Idle" with cost_sop.csv's idle_allocated SOP in the fleet
    overview, its ``zombie`` pod (a StatefulSet's: scaling the owner, not deleting the pod) "Zombie" with zombie_owned,
    and the report calls exactly the zombie a zombie; expected pods from gpulib/data/demo/demo_fleet.yaml."""
    from pathlib import Path

    import yaml

    from gpulib.core.knowledge import load_table

    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "gpulib/data/demo/demo_fleet.yaml").read_text())
    persona = {f"{w['namespace']}/{w['pod']}": w["persona"] for n in spec["nodes"] for w in n.get("workloads", [])}
    idle_pods = {p for p, v in persona.items() if v == "idle"}
    zombie_pods = {p for p, v in persona.items() if v == "zombie"}
    sop = load_table("cost_sop").set_index("key")["sop_step"]
    fleet = _fleet_verdicts(demo_0645, window)
    for p in idle_pods:
        assert fleet[p].title == f"Idle GPU workload {p}" and fleet[p].sop_step == sop["idle_allocated"], p
    for p in zombie_pods:
        assert fleet[p].title == f"Zombie GPU workload {p}" and fleet[p].sop_step == sop["zombie_owned"], p
    assert sop["idle_allocated"] != sop["zombie_owned"]
    assert _report_zombies(demo_0645, window)[0] == zombie_pods
