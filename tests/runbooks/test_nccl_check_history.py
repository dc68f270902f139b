"""runbooks/nccl_check.ipynb: the results history and the in-cluster probe manifest.

Expected values: the demo history's latest run is the real capture (346.80 GB/s all_reduce), within 10 % of
the earlier runs' median, so "steady"; a history of three runs at the capture's 346.80 GB/s followed by the
p2p-off run (120.00 GB/s, tests/fixtures/nb_nccl) is a drop to 35 %, below the 10 % tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import gpulib.nccl as nccl
import gpulib.nccl.history as H
import gpulib.nccl.steps as ns
from gpulib.core.errors import InvalidParameter
from gpulib.demo.artifacts import DEMO_NCCL_TESTS, demo_file
from gpulib.demo.nccl_history import runbook_default_history

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "runbooks" / "nccl_check.ipynb"
DEGRADED = Path(__file__).parents[1] / "fixtures" / "nb_nccl" / "all_reduce_2xH200_p2p_off.txt"


@pytest.fixture
def run_nb(run_notebook):
    return run_notebook(NOTEBOOK)


def _seed(tmp_path) -> Path:
    """Three earlier all_reduce runs of the real capture (346.80 GB/s) in <tmp>/lab.csv."""
    res = [r for r in nccl.parse_nccl_tests_all(demo_file(DEMO_NCCL_TESTS).read_text()) if r.collective == "all_reduce"]
    vs = [nccl.verdict(r) for r in res]
    for day in ("2020-01-01", "2020-01-08", "2020-01-15"):
        H.append(
            H.rows_from_run(res, vs, cluster="lab", timestamp=f"{day}T00:00:00Z", instance_type="2xH200"), root=tmp_path
        )
    return tmp_path / "lab.csv"


# ------------------------------------------------------------------ pure helpers (no kernel)


def test_runbook_history_modes(tmp_path):
    res = nccl.parse_nccl_tests_all(DEGRADED.read_text())
    vs = [nccl.verdict(r) for r in res]
    demo, where = ns.runbook_history("", "demo", results=res, verdicts=vs, default_history=runbook_default_history)
    assert len(demo) == 27 and "demo history" in where and "gpulib/data/demo/nccl_history_scenario.csv" in where
    nothing, why = ns.runbook_history("", "demo", results=res, verdicts=vs)  # no default history passed in
    assert nothing is None and "set history_dir" in why
    none, why = ns.runbook_history("", "demo", results=res, verdicts=vs, default_input=False)
    assert none is None and "set history_dir" in why
    with pytest.raises(InvalidParameter, match="record_history=True needs history_dir"):
        ns.runbook_history("", "demo", results=res, verdicts=vs, record=True)
    with pytest.raises(InvalidParameter, match="does not exist"):
        ns.runbook_history(str(tmp_path), "lab", results=res, verdicts=vs)
    p = _seed(tmp_path)
    h, where = ns.runbook_history(str(tmp_path), "lab", results=res, verdicts=vs, record=True, instance_type="2xH200")
    assert where == str(p) and len(h) == 4 and h["busbw_gbs"].tolist()[-1] == 120.0
    assert h["origin"].tolist()[-1] == "runbook nccl_check" and h["status"].tolist()[-1] == "degraded"


def test_runbook_probe_manifest_validates():
    m, checked = ns.runbook_probe_manifest(1, 8, "dgx-h100-0")
    assert [i["kind"] for i in m["items"]] == ["ConfigMap", "Job"]
    assert (
        checked[:2]
        == [
            "ConfigMap/nccl-probe-script: valid for Kubernetes 1.30.0 (strict)",
            "Job/nccl-probe: valid for Kubernetes 1.30.0 (strict)",
        ]
        and len(checked) == 3
    )
    m, checked = ns.runbook_probe_manifest(2, 4)
    assert [i["kind"] for i in m["items"]] == ["ConfigMap", "PyTorchJob"] and len(checked) == 5
    m, _ = ns.runbook_probe_manifest(1, 8, "dgx-h100-0", "registry.internal/gpu-runbooks-nccl-probe:0.1.0")
    assert (
        m["items"][1]["spec"]["template"]["spec"]["containers"][0]["image"]
        == "registry.internal/gpu-runbooks-nccl-probe:0.1.0"
    )


# ------------------------------------------------------------------ notebook executions


@pytest.mark.notebook
def test_demo_history_and_manifest_rendered(shared_runs):
    doc, nb_text = shared_runs.notebook("nccl_check")
    assert doc["errors"] == []
    titles = [f["title"] for f in doc["findings"]]
    assert "NCCL busbw steady over time" in titles
    assert not any(t.startswith("NCCL busbw dropped") for t in titles)
    assert "27 rows from the demo history" in nb_text
    assert "Job/nccl-probe: valid for Kubernetes 1.30.0 (strict)" in nb_text
    # the printed text names the image and says it is public; the probe script is in the printed ConfigMap
    assert "Image: pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime, a public image" in nb_text
    assert "kind: ConfigMap" in nb_text and "- /probe/nccl_probe.py" in nb_text
    assert "kubectl apply --dry-run=server -f nccl-probe.yaml" in nb_text
    assert "kubernetes.io/hostname: dgx-h100-0" in nb_text  # the Job is pinned to the runbook's node
    assert not any(f["title"].startswith(("No /dev/shm", "Multi-node job")) for f in doc["findings"])


@pytest.mark.notebook
def test_recorded_degraded_run_is_a_drop(run_nb, tmp_path):
    hist = tmp_path / "hist"
    p = _seed(hist)
    doc, nb_text = run_nb(
        nccl_tests_file=str(DEGRADED),
        node="",
        history_dir=str(hist),
        cluster="lab",
        instance_type="2xH200",
        record_history=True,
        probe_nodes=2,
    )
    assert doc["errors"] == []
    drop = next(f for f in doc["findings"] if f["title"].startswith("NCCL busbw dropped"))
    assert drop["title"] == "NCCL busbw dropped on vm (2xH200) (all_reduce)" and drop["severity"] == "warning"
    assert drop["data"]["latest"] == 120.0 and drop["data"]["median"] == 346.8
    assert len(H.load(p)) == 4  # this run was appended
    # probe_nodes=2: the PyTorchJob without RDMA is flagged for both pods
    assert [f["title"] for f in doc["findings"]].count("Multi-node job without RDMA resources") == 2
    assert "PyTorchJob/nccl-probe Worker pod template: valid for Kubernetes 1.30.0 (strict)" in nb_text
