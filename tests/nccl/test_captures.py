"""The real captures (gpulib/data/captures/, described in its README): the one-rank 1xH200 run (h200_1rank_*) and
the NCCL INFO lines of the 2xH200 run split from the probe's stdout (2xh200_nccl_info_from_stdout.log).

Expected values are read by hand from the fixture files (line numbers in the comments), not from the code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpulib.nccl as N
import gpulib.nvidia as nvidia
from gpulib.core.findings import Severity

CAP = Path(__file__).parents[2] / "gpulib" / "data" / "captures"
GIB4 = 4294967296


@pytest.fixture(scope="module")
def one_gpu():
    return N.parse_nccl_tests_all((CAP / "h200_1rank_nccl_probe.txt").read_text())


def test_1xh200_three_complete_single_rank_sweeps(one_gpu):
    assert [r.collective for r in one_gpu] == ["all_reduce", "all_gather", "reduce_scatter"]
    for r in one_gpu:
        assert len(r.table) == 30 and r.complete and r.out_of_bounds == 0 and not r.errors
        assert r.table["size_bytes"].iloc[0] == 8 and r.table["size_bytes"].iloc[-1] == GIB4
        assert r.nranks == 1 and r.avg_busbw == 0
        assert r.ranks[["host", "device", "busId", "model"]].iloc[0].tolist() == ["vm", 0, "0000:00:06", "NVIDIA H200"]
        # busbw = algbw x 0 for one rank: every printed busbw is 0.00
        assert (r.table["oop_busbw"] == 0).all() and (r.table["ip_busbw"] == 0).all()
        assert (r.table[["oop_wrong", "ip_wrong"]] == 0).all().all()
        assert r.header["maxBytes"] == GIB4 and r.header["iters"] == 20 and r.header["warmup_iters"] == 5


def test_1xh200_out_of_place_gather_scatter_is_a_device_copy(one_gpu):
    by = {r.collective: r.table.set_index("size_bytes") for r in one_gpu}
    # last rows of the all_gather / reduce_scatter blocks: 2008.5 us -> 2138.4 GB/s, 2009.7 us -> 2137.2 GB/s
    assert by["all_gather"].loc[GIB4, "oop_time_us"] == pytest.approx(2008.5)
    assert by["all_gather"].loc[GIB4, "oop_algbw"] == pytest.approx(2138.4)
    assert by["reduce_scatter"].loc[GIB4, "oop_algbw"] == pytest.approx(2137.2)
    # algbw = size / time: 4294967296 B / 2008.5 us = 2138.4 GB/s
    assert GIB4 / (2008.5 * 1e3) == pytest.approx(by["all_gather"].loc[GIB4, "oop_algbw"], rel=1e-3)
    # one rank in place is a no-op in NCCL: the 4 GiB in-place call takes ~28 us, like the 8 B one
    assert by["all_gather"].loc[GIB4, "ip_time_us"] == pytest.approx(27.87)
    assert by["all_reduce"].loc[GIB4, "oop_time_us"] < 40 and by["all_reduce"].loc[8, "oop_time_us"] < 40


def test_1xh200_copy_rate_matches_torch_copy_reference(one_gpu):
    misc = (CAP / "h200_1rank_call1_misc.txt").read_text()
    assert "2127.6 GB/s copied" in misc and "4255.3 GB/s read+write" in misc
    ag = one_gpu[1].table.set_index("size_bytes").loc[GIB4, "oop_algbw"]
    assert ag == pytest.approx(2127.6, rel=0.02)  # within 2 % of the plain copy_ rate


def test_1xh200_json_agrees_with_table(one_gpu):
    doc = json.loads((CAP / "h200_1rank_nccl_probe.json").read_text())
    assert doc["world_size"] == 1 and doc["header"]["nccl_version"] == "2.28.9"
    assert doc["header"]["nvls_enable"] == "0" and doc["env"]["NCCL_NVLS_ENABLE"] == "0"
    for res, parsed in zip(doc["results"], one_gpu):
        assert res["collective"] == parsed.collective and len(res["rows"]) == len(parsed.table)
        for row, (_, prow) in zip(res["rows"], parsed.table.iterrows()):
            assert row["size_bytes"] == prow["size_bytes"]
            assert row["oop"]["time_us"] == pytest.approx(prow["oop_time_us"], rel=5e-3, abs=0.01)
            assert row["oop"]["busbw"] == 0.0


def test_1xh200_verdict_is_unknown_single_rank(one_gpu):
    for r in one_gpu:
        v = N.verdict(r)
        assert v.status == "unknown" and v.band is None
        assert any("single rank" in x for x in v.reasons)


def test_1xh200_topology_and_empty_nvlink_status():
    t = nvidia.parse_topology((CAP / "h200_1rank_smi_topo_m.txt").read_text())
    assert t.gpus == ["GPU0"] and t.nics.empty
    assert t.links.loc["GPU0", "GPU0"] == "X"
    assert t.affinity.iloc[0][["cpu_affinity", "numa_affinity"]].tolist() == ["0-15", "0"]
    assert (CAP / "h200_1rank_smi_nvlink_s.txt").read_text() == ""  # nvidia-smi nvlink -s printed nothing (rc 0)
    assert "nvlink -s rc=0" in (CAP / "h200_1rank_call1_misc.txt").read_text()


def test_1xh200_nccl_debug_file_log():
    s = N.summarize_log((CAP / "h200_1rank_nccl_info.log").read_text())
    assert (s.version, s.cuda, s.nranks, s.nnodes) == ("2.28.9", "cuda13.0", 1, 1)
    assert s.transports == [] and not s.nvls and s.env == {"NCCL_NVLS_ENABLE": "0"}
    f = N.diagnose_log((CAP / "h200_1rank_nccl_info.log").read_text())
    assert all(x.severity in (Severity.INFO, Severity.OK) for x in f)


# ------------------------------------------------------------------ 2xH200: NCCL INFO lines from stdout


def test_2xh200_split_log_is_every_nccl_line_of_stdout():
    stdout = (CAP / "2xh200_nccl_probe.txt").read_text().splitlines()
    log = (CAP / "2xh200_nccl_info_from_stdout.log").read_text().splitlines()
    assert log == [ln for ln in stdout if " NCCL INFO " in ln or " NCCL WARN " in ln]
    assert len(log) == 325 and all(ln.startswith(("vm:707:", "vm:708:")) for ln in log)


def test_2xh200_split_log_diagnosis():
    text = (CAP / "2xh200_nccl_info_from_stdout.log").read_text()
    s = N.summarize_log(text)
    # "NCCL version 2.28.9+cuda13.0" (x2), "nranks 2", Channel NN/0 ... via P2P/CUMEM (24 per rank),
    # "0 nvls channels", "NCCL_NVLS_ENABLE set by environment to 0."
    assert (s.version, s.cuda, s.nranks, s.nnodes) == ("2.28.9", "cuda13.0", 2, 1)
    assert s.transports == ["P2P/CUMEM"] and s.channels == 24
    assert s.nvls is False and s.env == {"NCCL_NVLS_ENABLE": "0"} and s.network == "Socket"
    f = N.diagnose_log(text, node="vm")
    assert all(x.severity in (Severity.INFO, Severity.OK) for x in f)
    summary = next(x for x in f if x.title == "NCCL communicator summary")
    assert "NCCL 2.28.9 (cuda13.0)" in summary.evidence and "transports: P2P/CUMEM" in summary.evidence
    assert any("NVLS: no" in e for e in summary.evidence)
    sigs = {x.data.get("signature") for x in f}
    assert {"ib_no_device", "net_plugin_missing"} <= sigs  # "NET/IB : No device found." on a single node: INFO
    # the same verdict-free diagnosis whether the lines come alone or mixed with the tables
    mixed = N.summarize_log((CAP / "2xh200_nccl_probe.txt").read_text())
    assert (mixed.version, mixed.transports, mixed.channels, mixed.env) == (s.version, s.transports, s.channels, s.env)


def test_the_configmap_probe_ran_on_a_real_h200_without_gpulib():
    """The probe as the Job runs it (script and bus-factor table from the ConfigMap, PYTHONPATH unset, the
    Job's torchrun command): the real run's log and report, read back through gpulib's parsers."""
    steps = (CAP / "h200_cm_probe_steps.txt").read_text()
    assert "outside stdlib+torch: none" in steps
    assert "gpulib is not importable" in steps and "exit code 0" in steps
    assert "Job image: pytorch/pytorch:" in steps and "/probe/nccl_probe.py" in steps
    parsed = N.parse_nccl_tests_all((CAP / "h200_cm_probe_stdout.txt").read_text())
    assert [r.collective for r in parsed] == ["all_reduce", "all_gather", "reduce_scatter"]
    doc = json.loads((CAP / "h200_cm_probe.json").read_text())
    assert doc["world_size"] == 1 and doc["header"]["nccl_version"] == "2.28.9"
    assert doc["header"]["max_bytes"] == 64 * 2**20 and doc["env"]["NCCL_NVLS_ENABLE"] == "0"
    for res, p in zip(doc["results"], parsed):
        assert res["collective"] == p.collective and len(res["rows"]) == len(p.table) == 24
    for r in parsed:  # one rank: no band to judge against, never "ok"
        assert N.verdict(r).status == "unknown"
