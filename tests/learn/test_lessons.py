"""Onboarding lessons: helpers on hand-checked inputs, and proof that the lessons render computed figures
(a changed data file or demo scenario changes what the executed lesson shows)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

import gpulib
import gpulib.learn.lessons as learn
import gpulib.nccl as nccl
import gpulib.nvidia as nvidia
from gpulib.catalogue import find_notebook
from gpulib.core.errors import InvalidParameter
from gpulib.execute import execute

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(p.stem for p in (ROOT / "runbooks" / "learn").glob("*.ipynb"))


# ----------------------------------------------------------------------------------- rendering
def test_md_table_escapes_pipes_and_tags_and_maps_headers():
    df = pd.DataFrame({"cmd": ["dmesg | grep xid"], "name": ["nvidia.com/mig-<profile>"], "x": [1.23456]})
    out = learn.md_table(df, {"cmd": "command", "x": "value"}, floatfmt=".2f").splitlines()
    assert out[0] == "| command | value |"
    assert out[2] == "| dmesg \\| grep xid | 1.23 |"
    assert "&lt;profile&gt;" in learn.md_table(df, ["name"])
    with pytest.raises(InvalidParameter, match="nope"):
        learn.md_table(df, ["nope"])


def test_question_hides_the_answer_in_a_details_block():
    sc = learn.question("How many?", 4, "because", show=False)
    html = sc._repr_html_()
    q_at, d_at = html.index("How many?"), html.index("<details>")
    assert q_at < d_at < html.index("<b>4</b>") < html.index("</details>")
    assert "because" in html[d_at:]


def test_runbook_ref_names_the_command_and_notebook():
    ref = learn.runbook_ref("fleet_overview", window="6h")
    assert "`gpuops run fleet_overview -p window 6h`" in ref and "runbooks/fleet_overview.ipynb" in ref
    assert "not in this checkout" in learn.runbook_ref("no_such_runbook")


# -------------------------------------------------------------------------------- computations
def test_mig_fit_count_h100_beside_3g40gb():
    # H100-80GB: 8 memory slots, 7 compute slices; 3g.40gb takes 4 slots and 3 slices (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/,
    # tests/fixtures/mig/h100_80gb_lgipp.txt) -> 4 slots and 4 slices left -> four 1g.10gb (1 slot, 1 slice each).
    assert learn.mig_fit_count("H100-80GB", "1g.10gb", ["3g.40gb"]) == 4
    # alone: seven 1g.10gb (max 7 per GPU)
    assert learn.mig_fit_count("H100-80GB", "1g.10gb") == 7


def test_model_sizes_and_load_times_by_hand():
    s = learn.model_sizes(("bfloat16", "int4"), ("Llama-3-70B",)).set_index("dtype")
    assert s.loc["bfloat16", "size_gb"] == pytest.approx(70.55 * 2)  # models.csv params_b x 2 bytes
    assert s.loc["int4", "size_gb"] == pytest.approx(70.55 * 0.5)
    assert s.loc["bfloat16", "size_gib"] == pytest.approx(141.1e9 / 2**30)
    lt = learn.load_times(141.1).set_index("medium")
    assert lt.loc["shared filesystem PVC over 100 GbE", "seconds"] == pytest.approx(
        141.1 / 12.5
    )  # 100 Gbit/s = 12.5 GB/s
    with pytest.raises(InvalidParameter):
        learn.load_times(0)
    with pytest.raises(InvalidParameter, match="fp3"):
        learn.model_sizes(("fp3",))


def test_storage_tiers_mark_assumptions():
    t = learn.storage_tiers()
    assert set(t["tier"]) == {"hot", "warm", "cold"}
    assert (t.loc[t["basis"] == "assumption", "inferred"] == "yes").all()
    assert t["source"].str.len().gt(0).all()


def test_xid_sop_48_resets_gpu_79_reboots_node_31_restarts_app():
    a, b, c = learn.xid_sop(48), learn.xid_sop(79), learn.xid_sop(31)
    assert (a["recovery"], b["recovery"], c["recovery"]) == ("GPU reset", "node reboot", "restart the workload")
    assert a["takes_gpu_out"] and b["takes_gpu_out"] and not c["takes_gpu_out"]
    assert any("nvidia-smi -r" in x for x in a["commands"]) and any("reboot" in x for x in b["commands"])


def _nodes() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"node": "whole", "gpu_allocatable": 8, "mig_allocatable": {}},
            {"node": "mig", "gpu_allocatable": 0, "mig_allocatable": {"nvidia.com/mig-1g.5gb": 2}},
        ]
    )


def test_pod_resources_outcome_applies_api_rules():
    ok = learn.pod_resources_outcome({"limits": {"nvidia.com/gpu": 1}}, _nodes())
    assert ok["parsed"] == "nvidia.com/gpu: 1" and ok["check"].startswith("ok") and ok["schedulable_on"] == "whole"
    # the API server rejects both (extended resources: a limit must be set and must equal the request), so the
    # lesson must not show them as accepted and schedulable
    for spec, problem in (
        ({"requests": {"nvidia.com/gpu": 1}}, "GPU request without a limit"),
        ({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}, "GPU request != limit"),
    ):
        out = learn.pod_resources_outcome(spec, _nodes())
        assert out["check"] == problem
        assert out["parsed"].startswith("rejected") and out["schedulable_on"].startswith("none")
    half = learn.pod_resources_outcome({"limits": {"nvidia.com/gpu": "0.5"}})
    assert half["parsed"] == "rejected" and "fractional" in half["check"]
    mig = learn.pod_resources_outcome({"limits": {"nvidia.com/mig-1g.5gb": 3}}, _nodes())
    assert mig["schedulable_on"].startswith("none")  # the MIG node advertises only 2
    assert learn.pod_resources_outcome({"limits": {"nvidia.com/mig-1g.5gb": 2}}, _nodes())["schedulable_on"] == "mig"


def test_alert_catalog_matches_committed_rules_and_flags_blind_alerts():
    committed = yaml.safe_load((ROOT / "deploy" / "prometheus" / "gpu-alerts.yaml").read_text())
    names = [r["alert"] for g in committed["groups"] for r in g["rules"] if "alert" in r]
    cat = learn.alert_catalog()
    assert list(cat["alert"]) == names
    blind = cat.set_index("alert")["needs_non_default_fields"]
    # ECC DBE counters are commented out in dcgm-exporter's default-counters.csv
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in blind["GPUEccUncorrectable"]
    assert blind["GPUTemperatureHigh"] == ""
    assert "in sync" in learn.alerts_file_status(ROOT / "deploy" / "prometheus" / "gpu-alerts.yaml")


def test_alerts_file_status_detects_drift(tmp_path):
    p = tmp_path / "gpu-alerts.yaml"
    p.write_text((ROOT / "deploy" / "prometheus" / "gpu-alerts.yaml").read_text().replace(">= 85", ">= 84"))
    assert "differs" in learn.alerts_file_status(p)
    assert "not found" in learn.alerts_file_status(tmp_path / "missing.yaml")


def test_smi_section_from_the_h200_capture():
    misc = learn.lesson_text("2xh200_smi_misc.txt")
    topo = nvidia.parse_topology(learn.smi_section(misc, "nvidia-smi topo -m"))
    assert topo.links.loc["GPU0", "GPU1"] == "NV18"  # the capture's topo -m line
    assert "GPU 1: NVIDIA H200" in learn.smi_section(misc, "nvidia-smi -L")
    with pytest.raises(InvalidParameter, match="dmon"):
        learn.smi_section(misc, "nvidia-smi dmon")


def test_manifests_validate_and_shm_check():
    import kubernetes_validate

    hpa = yaml.safe_load(learn.hpa_manifest("vllm", "vllm_num_requests_waiting", 5, min_replicas=2, max_replicas=4))
    kubernetes_validate.validate(hpa, "1.30", strict=True)
    assert hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "5"
    with pytest.raises(InvalidParameter):
        learn.hpa_manifest("vllm", "m", 5, min_replicas=3, max_replicas=2)
    job = yaml.safe_load(learn.pytorchjob_yaml("ft", workers=3, gpus_per_worker=4))
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 2
    assert specs["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert [f.title for f in nccl.check_pod_spec(learn.pytorchjob_worker_spec(shm=False))] == [
        "No /dev/shm volume in the pod"
    ]
    assert list(nccl.check_pod_spec(learn.pytorchjob_worker_spec(shm=True))) == []


def test_lesson_records_errors_and_figures(tmp_path, monkeypatch):
    """A lesson run (gpulib.learn.session.LessonEngine under the runbooks' Session) writes the figures its steps
    recorded to figures.json and a step without data as an error of findings.json, with no finding."""
    from gpulib.run.catalogue import definition
    from gpulib.run.notebook import start

    monkeypatch.setenv(learn.FINDINGS_ENV, str(tmp_path / "findings.json"))
    ns = {**definition("learn_storage").defaults(), "scenario": str(tmp_path / "missing.yaml")}
    s = start(definition("learn_storage"), ns)
    assert s.src is None and "missing.yaml" in s.errors[0]
    s.run_all()
    assert s.outcomes["Demo fleet"] == "not checked" and s.outcomes["Load times"] == "ran"
    assert s.finish() == []
    assert json.loads((tmp_path / "figures.json").read_text()) == ns["figures"] and "cold_load_s" in ns["figures"]
    doc = json.loads((tmp_path / "findings.json").read_text())
    assert doc["errors"] == s.errors and doc["findings"] == []


def test_every_lesson_links_a_runbook_and_has_self_checks():
    """Each lesson's definition (gpulib/learn/<topic>.py) ends with the runbooks it prepares for and asks at least
    one self-check (the notebook renders the definition: tests/run/test_definitions.py). The code moved out of the
    notebooks, so the definitions are what this reads now, not the cells."""
    from tests.helpers.lesson_runs import run_lesson

    for name in LESSONS:
        run = run_lesson(name)
        assert run.steps[-1] == "Next" and any("**Runbook:** `gpuops run " in t for t in run.markdown), name
        assert run.checks, name


# ------------------------------------------------------- executed lessons follow data and scenario
def _copy_package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    shutil.copytree(ROOT / "gpulib", root / "gpulib", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _run(name: str, out: Path, params: dict | None = None):
    res = execute(find_notebook(name), params or {}, out, progress=False)
    assert res.failed is None, res.failed
    assert res.errors == [], res.errors
    return res, json.loads((res.out_dir / "figures.json").read_text()), res.html.read_text()


@pytest.mark.notebook
def test_changed_threshold_and_mig_profile_change_the_executed_lessons(tmp_path, monkeypatch, demo_end):
    pkg = _copy_package(tmp_path)
    th = pkg / "gpulib" / "data" / "core" / "thresholds.csv"
    df = pd.read_csv(th)
    assert df.set_index("key").loc["gpu_temp_warn_c", "value"] == 85  # the packaged value
    df.loc[df["key"] == "gpu_temp_warn_c", "value"] = 80
    df.to_csv(th, index=False)
    prof = pkg / "gpulib" / "data" / "mig" / "mig_profiles.csv"
    mp = pd.read_csv(prof, keep_default_na=False)
    sel = (mp["gpu_model"] == "H100-80GB") & (mp["profile"] == "3g.40gb")
    assert list(mp.loc[sel, "compute_slices"]) == [3]
    mp.loc[sel, "compute_slices"] = 4  # hypothetical: a 3g.40gb that takes 4 of the 7 compute slices
    mp.to_csv(prof, index=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("GPUOPS_HOME", str(ROOT))
    monkeypatch.setenv("GPUOPS_END", demo_end.isoformat())

    _, fig, html = _run("learn_monitoring", tmp_path / "mon")
    assert fig["gpu_temp_warn_c"] == 80
    # the rule reads the field under every name dcgm-exporter gave it (gpulib/data/sources/signals.csv)
    assert fig["temp_alert_expr"] == "((DCGM_FI_DEV_GPU_TEMP or DCGM_FI_DEV_GPU_TEMP_CELSIUS) + 0) >= 80"
    assert "80 C for 10m" in html and "85 C for 10m" not in html
    assert "differs from what the data files generate now" in html  # committed YAML still says 85

    _, fig, html = _run("learn_sharing", tmp_path / "mig")
    # 8 - 4 memory slots and 7 - 4 compute slices left -> three 1g.10gb instead of four
    assert fig["h100_1g10_beside_3g40"] == 3


def _scenario_without(tmp_path: Path, node: str) -> tuple[Path, int]:
    doc = yaml.safe_load((ROOT / "gpulib" / "data" / "demo" / "demo_fleet.yaml").read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] != node]
    p = tmp_path / "fleet.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p, sum(n["gpus"] for n in doc["nodes"])


@pytest.mark.notebook
def test_interview_figures_follow_the_demo_scenario(tmp_path, monkeypatch, demo_end, shared_runs):
    monkeypatch.setenv("GPUOPS_END", demo_end.isoformat())
    # the kernel imports this checkout's gpulib (not another installed copy)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    full = yaml.safe_load((ROOT / "gpulib" / "data" / "demo" / "demo_fleet.yaml").read_text())
    demo = shared_runs.run("learn_interview_prep")  # its defaults: the session's `gpuops demo` run of it
    assert demo.failed is None and demo.errors == [], (demo.failed, demo.errors)
    base, base_html = json.loads((demo.out_dir / "figures.json").read_text()), demo.html.read_text()
    assert base["gpus"] == sum(n["gpus"] for n in full["nodes"])
    assert any("XID 79" in t and "dgx-h100-1" in t for t in base["critical_incidents"])  # the scenario's incident
    assert "XID 48: GPU reset · XID 79: node reboot" in base_html

    # a100-80-1 holds only the idle reserved-capacity-holder pod: without it the fleet has fewer GPUs and less idle time
    scen, gpus = _scenario_without(tmp_path, "a100-80-1")
    _, mod, mod_html = _run("learn_interview_prep", tmp_path / "mod", {"scenario": str(scen)})
    assert mod["gpus"] == gpus == base["gpus"] - 8
    assert mod["idle_gpu_hours"] < base["idle_gpu_hours"]
    assert mod["idle_cost"] < base["idle_cost"]
    assert mod["potential_monthly_saving"] < base["potential_monthly_saving"]
    assert f"{mod['gpus']} GPUs" in mod_html and f"{base['gpus']} GPUs" not in mod_html
    # the rendered figure is what gpulib.cost.analysis computes on that scenario
    rep = learn.cost_report(gpulib.connect("demo", scenario=str(scen)), "24h")
    assert mod["idle_gpu_hours"] == pytest.approx(rep.usage["idle_allocated_gpu_hours"].sum(), abs=0.01)


def test_optional_module_names_the_gap(monkeypatch):
    shown: list[str] = []
    monkeypatch.setattr(learn, "_display_html", shown.append)
    assert learn.optional_module("mig") is importlib.import_module("gpulib.mig") and shown == []
    assert learn.optional_module("no_such_module_xyz") is None
    assert "gpulib.no_such_module_xyz is not in" in shown[0]


def test_money_in_markdown_has_no_dollar_sign_that_starts_math():
    """Two `$` on one Markdown line open a MathJax span and eat the bold markers between them."""
    line = f"idle **{learn.money(1234.4)}** · spend **{learn.money(98765.0)}**"
    assert "$" not in line and "1,234 USD" in line and "98,765 USD" in line
    # learn.money is the one formatter (gpulib.core.money): cents below 100, the ISO code upper-cased
    assert learn.money(10.0, "eur") == "10.00 EUR"


def test_k8s_lesson_names_the_gpus_that_have_3g40gb():
    from pathlib import Path

    # the lesson's text lives in its definition (gpulib/learn/kube_resources.py) since its cells only render it
    text = Path(__file__).resolve().parents[2].joinpath("gpulib/learn/kube_resources.py").read_text()
    assert "H100/H200-80GB profile" not in text
    prof = pd.read_csv(Path(__file__).resolve().parents[2] / "gpulib/data/mig/mig_profiles.csv")
    have = set(prof.loc[prof["profile"] == "3g.40gb", "gpu_model"])
    assert have == {"A100-80GB", "H100-80GB"} and "H200-141GB" not in have
    from tests.helpers.lesson_runs import run_lesson

    why = [c.why for c in run_lesson("learn_k8s_gpu_resources").checks if "mig-3g.40gb" in c.question]
    assert len(why) == 1 and all(m.split("-")[0] in why[0] for m in have), why


def test_inference_lesson_command_follows_vllm_deploys_max_num_seqs_rule():
    """vllm_deploy caps --max-num-seqs at the full-length requests the KV cache holds (no preemption at full
    context); the lesson's command must not teach vLLM's default (1024 on H100) instead."""
    import gpulib.vllm.memory as vmem

    cmd = learn.vllm_serve_command("Llama-3-8B", "H100-80GB", 8192)
    seqs = int(cmd.split("--max-num-seqs ")[1].split()[0])
    fit = vmem.budget("Llama-3-8B", "H100-80GB", max_model_len=8192).kv_tokens // 8192
    assert seqs <= fit < 1024 and cmd.startswith("vllm serve ")


def test_interview_prep_has_model_answers_from_the_demo_and_follow_ups_hidden(demo_end):
    """Each of the four parts has a model answer built from the demo fleet's figures, and follow-up questions
    (queueing, DRA, RDMA/GPUDirect, MIG vs time-slicing) whose answers sit in a closed <details> block."""
    figs = {
        "gpus": 48,
        "allocated_pct_devices": 71.4,
        "llama70b_h200_tp2_concurrency": 3.2,
        "idle_gpu_hours": 1357.0,
        "idle_cost": 6952.0,
        "potential_monthly_saving": 139042.0,
        "monthly_cost": 278487.0,
        "active_pct": 76.0,
        "zombie_pods": 5,
        "currency": "USD",
        "critical_incidents": ["XID 79 on dgx-h100-1 GPU 5"],
    }
    parts = ["resource_management", "inference_deployment", "monitoring_cost", "incident_experience"]
    for part in parts:
        text = learn.model_answer(part, figs)
        assert text and "{" not in text
    assert "48 GPUs" in learn.model_answer("resource_management", figs)
    assert "139,042 USD" in learn.model_answer("monitoring_cost", figs) and "$" not in learn.model_answer(
        "monitoring_cost", figs
    )
    assert "XID 79" in learn.model_answer("incident_experience", figs)
    ups = learn.follow_ups()
    assert set(ups["part"]) == set(parts)
    text = " ".join(ups["question"]) + " ".join(ups["answer"])
    for topic in ("Kueue", "Volcano", "KAI", "DRA", "GPUDirect RDMA", "time-slicing"):
        assert topic in text, topic
    html = learn.follow_up_html("resource_management")
    assert html.count("<details") == (ups["part"] == "resource_management").sum()
    assert "<details open" not in html


def test_lesson_row_pickers_on_hand_built_frames():
    """gpulib/learn/frames.py: the rows the lessons ask about (expected values read off the frames by hand)."""
    import pandas as pd

    import gpulib.learn as L

    ck = pd.DataFrame({"item": ["a", "b", "c"], "monthly_saving": [5.0, 12.0, 7.0]})
    assert L.best_row(ck, "monthly_saving")["item"] == "b"
    pods = pd.DataFrame(
        {
            "pod": ["p1", "p2", "p3", "p4"],
            "workload": ["vllm-a", "vllm-a", "train-llama70b", "vllm-b"],
            "gpu_request": [1, 1, 8, 2],
            "node": ["n1", "n2", "n3", "n1"],
        }
    )
    assert list(L.workload_pods(pods, contains="llama70b")["pod"]) == ["p3"]
    dep = L.deployments(L.workload_pods(pods, prefix="vllm"))
    assert dep.to_dict("records") == [
        {"workload": "vllm-a", "replicas": 2, "gpus": 1, "node": "n1"},
        {"workload": "vllm-b", "replicas": 1, "gpus": 2, "node": "n1"},
    ]
    inv = pd.DataFrame({"mig": ["", "1g.10gb x7", ""], "requested": [8, 3, 2], "allocatable": [8, 7, 1]})
    assert L.mig_node_count(inv) == 1 and L.overcommitted_nodes(inv) == 1
    nodes = pd.DataFrame({"node": ["a", "b", "c"], "mig_strategy": ["mixed", None, ""]})
    assert list(L.mig_nodes(nodes)["node"]) == ["a"]
    temps = pd.DataFrame(
        {"gpu": ["0", "1", "2", "3"], "gpu_i_id": [None, "", "1", None], "value": [70.0, 88.0, 95.0, 91.0]}
    )
    whole = L.whole_gpus(temps)
    assert list(whole["gpu"]) == ["0", "1", "3"]
    assert list(L.at_or_above(whole, 85)["gpu"]) == ["3", "1"] and len(L.at_or_above(whole, 90)) == 1
    assert L.gpus_with_sbe(pd.DataFrame({"index": ["0", "1"], "ecc_sbe_aggregate": [0, 3]})) == [1]
    assert L.tier_row(pd.DataFrame({"tier": ["hot", "cold"], "seconds": [1, 9]}), "cold")["seconds"] == 9
