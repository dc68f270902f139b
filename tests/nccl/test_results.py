"""Tests for gpulib.nccl (results, bands, log, env) and gpulib.nvidia.topology: parsers, bus factors, expected bands,
verdicts, log diagnosis, env checks.

Expected numbers are worked out by hand from the fixture text (see tests/fixtures/nccl/README.md)
or from NVIDIA/nccl-tests: doc/PERFORMANCE.md @ a0b82b22 (nccl-tests formulas and published figures), not copied from
the code's output.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpulib.nccl as N
import gpulib.nvidia as nvidia
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity
from gpulib.core.knowledge import load_table

FIX = Path(__file__).parents[1] / "fixtures" / "nccl"


def read(name: str) -> str:
    return (FIX / name).read_text()


# ------------------------------------------------------------------ bus factors (NVIDIA/nccl-tests: doc/PERFORMANCE.md
# @ a0b82b22)


@pytest.mark.parametrize(
    "coll,n,factor",
    [
        ("all_reduce", 8, 1.75),  # 2(n-1)/n = 14/8
        ("all_reduce", 2, 1.0),
        ("all_gather", 16, 15 / 16),
        ("reduce_scatter", 4, 0.75),
        ("broadcast", 8, 1.0),
        ("alltoall", 8, 7 / 8),
        ("all_reduce_perf", 4, 1.5),  # binary names are accepted
    ],
)
def test_bus_factor(coll, n, factor):
    assert N.bus_factor(coll, n) == pytest.approx(factor)


def test_bus_factor_rejects_unknown_and_bad_n():
    with pytest.raises(InvalidParameter, match="allreduc3"):
        N.bus_factor("allreduc3", 8)
    with pytest.raises(InvalidParameter, match="nranks"):
        N.bus_factor("all_reduce", 0)


def test_data_tables_have_sources():
    for name in (
        "nccl_bus_factors",
        "nccl_link_bandwidth",
        "nccl_expected_busbw",
        "nccl_thresholds",
        "nccl_env_vars",
        "nccl_signatures",
    ):
        df = load_table(name)
        assert len(df) > 0 and df["source"].astype(str).str.strip().ne("").all(), name


# ------------------------------------------------------------------ nccl-tests parser


def test_current_format_8xA100():
    r = N.parse_nccl_tests(read("all_reduce_8xA100_current.txt"))
    assert r.collective == "all_reduce"
    assert r.complete and r.errors == []
    assert r.layout == "current"
    assert r.avg_busbw == pytest.approx(84.9254)
    assert r.out_of_bounds == 0
    assert len(r.table) == 11  # 8 B .. 8 GiB, step factor 8
    last = r.table.iloc[-1]
    assert last["size_bytes"] == 8589934592 and last["count"] == 2147483648
    assert (last["type"], last["redop"], last["root"]) == ("float", "sum", -1)
    assert last["oop_time_us"] == 64683 and last["oop_algbw"] == 132.80 and last["oop_busbw"] == 232.40
    assert last["ip_busbw"] == 235.94 and last["ip_wrong"] == 0
    assert list(r.ranks["rank"]) == list(range(8))
    assert r.ranks.loc[3, "busId"] == "0000:4e:00"
    assert r.ranks.loc[0, "model"] == "NVIDIA A100-SXM4-80GB" and r.ranks.loc[0, "host"] == "dgx-a100-07"
    assert r.nranks == 8
    assert r.header["nGpus"] == 8 and r.header["nccl_library"] == 21903


def test_legacy_error_column_and_no_root():
    r = N.parse_nccl_tests(read("all_reduce_8xA100_degraded_legacy.txt"))
    assert r.collective == "all_reduce"  # from the command line
    assert r.layout == "redop"
    assert r.table["root"].isna().all()
    assert (r.table["oop_wrong"] == 0).all()  # "0e+00" floats
    assert r.table["oop_busbw"].tolist() == [21.90, 22.60, 22.90, 23.00]
    assert r.ranks.loc[0, "busId"] == "0x07" and r.ranks.loc[0, "model"] == "A100-SXM4-40GB"
    assert r.ranks["pid"].tolist() == [3120] * 8


def test_oldest_format_no_redop_root_column_and_na():
    r = N.parse_nccl_tests(read("broadcast_legacy_no_redop.txt"), collective="broadcast")
    assert r.collective == "broadcast" and r.layout == "legacy"
    assert r.table["root"].tolist() == [0, 0, 0, 0]
    assert r.table["redop"].isna().all()
    assert r.table["oop_wrong"].isna().all() and r.table["ip_wrong"].isna().all()  # N/A
    assert r.table["ip_busbw"].iloc[-1] == 10.73
    assert r.complete


def test_mpi_prefixed_with_interleaved_info_lines():
    r = N.parse_nccl_tests(read("all_gather_16rank_mpi_prefixed.txt"))
    assert r.collective == "all_gather"
    assert len(r.table) == 8 and r.complete
    assert r.table["size_bytes"].tolist() == [2**k for k in range(25, 33)]
    # count is per rank: 33554432 B / 4 B / 16 ranks
    assert r.table["count"].iloc[0] == 524288
    assert r.nranks == 16 and r.ranks["host"].nunique() == 2
    assert r.table["redop"].eq("none").all()


def test_srun_prefixed_reduce_scatter():
    r = N.parse_nccl_tests(read("reduce_scatter_4rank_srun.txt"))
    assert r.collective == "reduce_scatter" and r.complete
    assert r.table["size_bytes"].tolist() == [1048576 * 4**k for k in range(6)]
    assert r.avg_busbw == pytest.approx(206.193)
    assert r.ranks.loc[2, "model"] == "NVIDIA GH200 120GB"


def test_crash_is_incomplete_with_errors():
    r = N.parse_nccl_tests(read("crash_shm_unhandled_system_error.txt"))
    assert not r.complete
    assert r.table.empty and list(r.table.columns[:5]) == ["size_bytes", "count", "type", "redop", "root"]
    assert r.avg_busbw is None
    assert any("unhandled system error" in e for e in r.errors)
    assert any("Test failure common.cu:891" in e for e in r.errors)
    assert len(r.warnings) == 2 and "shared memory segment" in r.warnings[1]
    assert N.verdict(r).status == "broken"


def test_cut_table():
    r = N.parse_nccl_tests(read("all_reduce_cut_table.txt"))
    assert not r.complete and r.errors == []
    assert r.avg_busbw is None
    assert r.table["size_bytes"].tolist() == [1048576, 2097152, 4194304, 8388608]  # the cut 16 MiB row is dropped
    v = N.verdict(r)
    assert any("incomplete" in x for x in v.reasons)


def test_multi_collective_capture():
    rs = N.parse_nccl_tests_all(read("multi_collective_capture.txt"))
    assert [r.collective for r in rs] == ["all_reduce", "all_gather"]
    assert [len(r.table) for r in rs] == [11, 8]
    assert N.parse_nccl_tests(read("multi_collective_capture.txt")).collective == "all_reduce"


def test_single_gpu_has_zero_busbw_and_unknown_verdict():
    r = N.parse_nccl_tests(read("all_reduce_single_gpu.txt"), collective="all_reduce")
    assert r.nranks == 1 and r.avg_busbw == 0
    assert r.table["ip_algbw"].iloc[0] == pytest.approx(2.6e6)
    v = N.verdict(r)
    assert v.status == "unknown" and any("single rank" in x for x in v.reasons)


def test_infer_nranks_without_rank_lines():
    text = "\n".join(ln for ln in read("all_reduce_8xA100_current.txt").splitlines() if "Rank" not in ln)
    r = N.parse_nccl_tests(text)
    assert r.ranks.empty
    assert r.nranks == 8  # busbw/algbw = 1.75 -> 2/(2-1.75) = 8


def test_bytes_input_and_non_text_rejected():
    r = N.parse_nccl_tests(read("all_reduce_cut_table.txt").encode())
    assert len(r.table) == 4
    with pytest.raises(InvalidParameter):
        N.parse_nccl_tests(12345)  # type: ignore[arg-type]


def test_per_iteration_and_timestamp_columns():
    text = (
        "# Collective test starting: all_reduce_perf\n"
        "#  Rank  0 Group  0 Pid   1 on h device  0 [0000:18:00] NVIDIA H200\n"
        "#  Rank  1 Group  0 Pid   1 on h device  1 [0000:2a:00] NVIDIA H200\n"
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    "
        "i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    "
        "i_cv%           timestamp\n"
        "     1048576        262144     float     sum      -1    20.00   52.43   52.43       0    19.10    "
        "22.40    22.10     3.20    19.50   53.77   53.77       0    19.00    21.00    20.90     2.10  "
        "2025-01-02 03:04:05\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 53.1 \n"
    )
    r = N.parse_nccl_tests(text)
    row = r.table.iloc[0]
    assert row["oop_i_p99_us"] == 22.10 and row["ip_i_cv_pct"] == 2.10
    assert row["ip_busbw"] == 53.77 and row["timestamp"] == "2025-01-02 03:04:05"


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parsers_never_raise_on_arbitrary_text(text):
    r = N.parse_nccl_tests(text)
    assert isinstance(r.table, pd.DataFrame)
    N.parse_nccl_tests_all(text)
    nvidia.parse_topology(text)
    N.diagnose_log(text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(p.name for p in FIX.glob("*.txt"))), st.integers(0, 20000), st.integers(0, 400))
def test_parsers_never_raise_on_cut_or_spliced_fixtures(name, cut, junk_at):
    text = read(name)
    cut_text = text[:cut] + "\n" + text[junk_at : junk_at + 50] + "garbage 1 2 3 N/A\n" + text[cut:]
    r = N.parse_nccl_tests(cut_text)
    N.check_busbw(r)
    N.verdict(r)
    nvidia.parse_topology(cut_text)
    N.diagnose_log(cut_text)


# ------------------------------------------------------------------ consistency


def test_check_busbw_consistent_table():
    r = N.parse_nccl_tests(read("all_reduce_8xA100_current.txt"))
    c = N.check_busbw(r)
    assert len(c) == 22 and c["ok"].all()
    # 8 GiB out-of-place: 8589934592 B / 64683 us = 132.80 GB/s; x 1.75 = 232.40
    row = c[(c["size_bytes"] == 8589934592) & (c["side"] == "oop")].iloc[0]
    assert row["algbw_expected"] == pytest.approx(132.80, abs=0.01)
    assert row["busbw_expected"] == pytest.approx(232.40, abs=0.01)


def test_check_busbw_flags_edited_table():
    r = N.parse_nccl_tests(read("all_reduce_inconsistent_busbw.txt"))
    c = N.check_busbw(r)
    assert not c["ok"].any()  # busbw printed == algbw, but factor for 8 ranks is 1.75
    v = N.verdict(r, gpu_model="H200")
    assert any("disagree" in x for x in v.reasons)


# ------------------------------------------------------------------ topology


def test_topology_tabs_ansi_nic_legend():
    t = nvidia.parse_topology(read("topo_8xH100_tabs_nics.txt"))
    assert t.gpus == [f"GPU{i}" for i in range(8)]
    assert t.nics["nic"].tolist() == [f"NIC{i}" for i in range(10)]
    assert t.nics["name"].tolist()[4] == "mlx5_4"
    assert t.links.shape == (18, 18)
    assert t.link(0, 7) == "NV18" and t.link("GPU3", "GPU3") == "X"
    assert t.link("GPU4", "NIC5") == "PIX" and t.link("GPU0", "NIC9") == "SYS"
    assert t.nvlink_count(2, 5) == 18
    assert t.interconnect == "NVLink" and t.min_nvlinks == 18
    aff = t.affinity.set_index("gpu")
    assert aff.loc["GPU5", "cpu_affinity"] == "56-111,168-223" and aff.loc["GPU5", "numa_affinity"] == "1"
    assert aff.loc["GPU0", "gpu_numa_id"] == "N/A"
    assert t.nearest_nics(4) == ["mlx5_5"]


def test_topology_spaces_without_gpu_numa_id():
    t = nvidia.parse_topology(read("topo_8xA100_spaces.txt"))
    assert len(t.gpus) == 8 and t.min_nvlinks == 12
    assert t.link("GPU6", "NIC3") == "PXB"
    assert t.affinity["gpu_numa_id"].isna().all()
    assert t.affinity.set_index("gpu").loc["GPU7", "numa_affinity"] == "1"
    assert t.nearest_nics("GPU2") == ["mlx5_1"]


def test_topology_old_pcie_named_nic():
    t = nvidia.parse_topology(read("topo_old_pcie_mlx4.txt"))
    assert t.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert t.nics["nic"].tolist() == ["mlx4_0"]
    assert t.link(0, 1) == "PIX" and t.link(0, 3) == "SYS"
    assert t.interconnect == "PCIe" and t.min_nvlinks == 0
    assert t.affinity.set_index("gpu").loc["GPU3", "cpu_affinity"] == "10-19,30-39"


def test_topology_no_matrix_and_unknown_device():
    t = nvidia.parse_topology("nvidia-smi: command not found\n")
    assert t.gpus == [] and t.links.empty and t.interconnect == "single"
    t2 = nvidia.parse_topology(read("topo_2xH200_synthetic.txt"))
    with pytest.raises(InvalidParameter, match="GPU5"):
        t2.link(0, 5)


# ------------------------------------------------------------------ expected bands and verdicts


def test_published_band_wins():
    b = N.expected_busbw("all_reduce", gpu_model="NVIDIA A100-SXM4-80GB", gpus_per_node=8)
    assert (b.low, b.high, b.inferred) == (230, 235, False)
    assert "nccl-tests#175" in b.source


def test_nvls_band_only_for_all_reduce_above_4_gpus():
    assert N.expected_busbw("all_reduce", gpu_model="H200", gpus_per_node=8, nvls=True).low == 470
    # all_gather does not use NVLS: the ring figure applies
    assert N.expected_busbw("all_gather", gpu_model="H200", gpus_per_node=8, nvls=True).low == 361


def test_derived_band_from_topology_2xH200():
    t = nvidia.parse_topology(read("topo_2xH200_synthetic.txt"))
    # 2 x H200 now has a measured band (nccl_expected_busbw.csv); an H100 pair on NV18 has none -> derived
    b = N.expected_busbw("all_reduce", topology=t, gpu_model="NVIDIA H100 80GB HBM3")
    # NV18 x 25 GB/s = 450 GB/s; x 0.76 .. 0.82 (NVLink4's published ring busbw share of the link: 343.28 GB/s on the
    # project's 2x H200 to 367.61 GB/s on 8x H200, stas00/ml-engineering: network/README.md @ 744d01e1) = 342 .. 369
    assert b.inferred and b.link_peak == 450
    assert (b.low, b.high) == (pytest.approx(342.0), pytest.approx(369.0))


def test_derived_band_pcie_and_multinode():
    t = nvidia.parse_topology(read("topo_old_pcie_mlx4.txt"))
    b = N.expected_busbw("all_reduce", topology=t, gpu_model="A100")
    assert b.link_peak == 31 and b.low == pytest.approx(13.6, abs=0.05)  # 31 x 0.44
    m = N.expected_busbw("all_reduce", gpu_model="A100", gpus_per_node=8, nodes=2, nic_gbit=200, nics_per_node=4)
    assert (m.low, m.high) == (86, 96)  # published (stas00/ml-engineering: network/README.md @ 744d01e1)
    d = N.expected_busbw("all_reduce", gpu_model="H200", gpus_per_node=8, nodes=2, nic_gbit=400, nics_per_node=8)
    # NIC cap: 8 x 50 GB/s x 0.92 x 0.90 = 331.2 low; NVLink ring 369 high stays
    assert d.low == pytest.approx(331.2) and d.high == pytest.approx(369.0)
    assert N.expected_busbw("all_reduce", gpu_model="H200", gpus_per_node=8, nodes=2) is None
    assert N.expected_busbw("alltoall", gpu_model="H200", gpus_per_node=8) is None
    assert N.expected_busbw("all_reduce", gpu_model="Tesla T4") is None


def test_verdict_issue_example_23gbs_on_8xA100_is_degraded():
    r = N.parse_nccl_tests(read("all_reduce_8xA100_degraded_legacy.txt"))
    t = nvidia.parse_topology(read("topo_8xA100_spaces.txt"))
    v = N.verdict(r, topology=t, gpu_model="A100")
    assert v.status == "degraded" and v.measured_busbw == 23.00 and v.size_bytes == 8589934592
    text = " ".join(v.reasons)
    assert "NCCL_P2P_DISABLE" in text and "nvidia-smi nvlink -e" in text and "topo -m" in text
    assert v.finding.severity == Severity.WARNING
    assert "nvidia-smi nvlink -e" in v.finding.commands


def test_verdict_healthy_and_broken():
    ok = N.verdict(N.parse_nccl_tests(read("all_reduce_8xA100_current.txt")))
    assert ok.status == "healthy" and ok.measured_busbw == 235.94 and ok.finding.severity == Severity.OK
    bad = N.verdict(N.parse_nccl_tests(read("all_reduce_wrong_results.txt")))
    assert bad.status == "broken" and any("3 wrong element" in x for x in bad.reasons)
    assert bad.finding.severity == Severity.CRITICAL and "dcgmi diag -r 3" in bad.finding.commands


def test_verdict_multinode_uses_hosts():
    r = N.parse_nccl_tests(read("all_gather_16rank_mpi_prefixed.txt"))
    assert N.verdict(r).status == "unknown"  # 2 hosts, no NIC data -> no band
    v = N.verdict(r, nic_gbit=400, nics_per_node=8)
    assert v.status == "degraded" and v.band.low == pytest.approx(331.2)


# ------------------------------------------------------------------ NCCL logs


def _by_sig(findings):
    return {f.data.get("signature"): f for f in findings if f.data.get("signature")}


def test_log_summary_healthy_p2p():
    s = N.summarize_log(read("log_2xH200_p2p_healthy.txt"))
    assert s.version == "2.21.5" and s.cuda == "cuda12.4"
    assert s.transports == ["P2P/CUMEM"] and s.nranks == 2 and s.nnodes == 1
    assert s.channels == 4 and s.trees == 2 and not s.nvls
    assert s.env == {"NCCL_NVLS_ENABLE": "0"}
    f = N.diagnose_log(read("log_2xH200_p2p_healthy.txt"))
    assert all(x.severity in (Severity.INFO, Severity.OK) for x in f)


def test_log_shm():
    f = N.diagnose_log(read("log_shm_too_small.txt"))
    sig = _by_sig(f)
    assert sig["shm_too_small"].severity == Severity.CRITICAL and sig["shm_too_small"].data["count"] == 2
    assert "emptyDir" in sig["shm_too_small"].sop_step and "df -h /dev/shm" in sig["shm_too_small"].commands
    assert "unhandled_system_error" in sig


def test_log_multinode_socket_timeout():
    f = N.diagnose_log(read("log_multinode_socket_timeout.txt"))
    sig = _by_sig(f)
    assert {"ib_no_device", "peer_closed", "watchdog_timeout", "net_plugin_missing"} <= set(sig)
    assert sig["ib_no_device"].severity == Severity.WARNING  # 2 nodes: sockets matter
    assert "Timeout(ms)=600000" in sig["watchdog_timeout"].evidence[0]
    titles = [x.title for x in f]
    assert "Inter-node traffic goes over TCP sockets" in titles and "NCCL_P2P_DISABLE=1 is set" in titles


def test_log_ib_failures_and_unknown_warn():
    f = N.diagnose_log(read("log_ib_failures.txt"))
    sig = _by_sig(f)
    assert {"ibv_reg_mr", "ib_retry_exceeded", "graph_search_failed"} <= set(sig)
    assert "ulimit -l" in sig["ibv_reg_mr"].commands
    other = [x for x in f if x.title == "Unrecognised NCCL warnings"]
    assert len(other) == 1 and "nobody has catalogued" in other[0].evidence[0]
    assert N.summarize_log(read("log_ib_failures.txt")).transports == ["NET/IB"]


# ------------------------------------------------------------------ environment and pods


def test_env_unknown_debug_and_ifname():
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "ens",
        "NCCL_IB_GID_INDX": "3",
        "NCCL_ALGO": "Ring",
        "NCCL_NVLS_ENABLE": "0",
        "PATH": "/usr/bin",
    }
    f = N.check_environment(
        env, interfaces=["lo", "eth0"], shm_bytes=64 * 2**20, memlock_bytes=8192 * 1024, multi_node=True
    )
    titles = {x.title: x for x in f}
    assert "Unknown NCCL variable NCCL_IB_GID_INDX" in titles
    assert "NCCL_IB_GID_INDEX" in titles["Unknown NCCL variable NCCL_IB_GID_INDX"].summary
    assert "Debugging variable NCCL_DEBUG left set" in titles and "Debugging variable NCCL_ALGO left set" in titles
    assert titles["NCCL_SOCKET_IFNAME matches no interface"].severity == Severity.CRITICAL
    assert "/dev/shm is small for NCCL" in titles
    assert titles["memlock limit is not unlimited"].severity == Severity.WARNING
    assert not any("NCCL_NVLS_ENABLE" in t for t in titles)


@pytest.mark.parametrize(
    "spec,ifaces,ok",
    [
        ("eth", ["eth0"], True),
        ("=eth0", ["eth0"], True),
        ("=eth", ["eth0"], False),
        ("^docker,lo", ["lo", "docker0"], False),
        ("^docker,lo", ["lo", "ens5"], True),
        ("ib,eth", ["ib0"], True),
    ],
)
def test_socket_ifname_semantics(spec, ifaces, ok):
    f = N.check_environment({"NCCL_SOCKET_IFNAME": spec}, interfaces=ifaces)
    assert (not any("NCCL_SOCKET_IFNAME" in x.title for x in f)) is ok


def test_env_clean_and_bad_input():
    assert (
        list(
            N.check_environment(
                {"NCCL_IB_HCA": "mlx5_0:1"}, hcas=["mlx5_0"], shm_bytes=2**33, memlock_bytes="unlimited"
            )
        )
        == []
    )
    f = N.check_environment({"NCCL_IB_HCA": "mlx5_9"}, hcas=["mlx5_0"])
    assert f[0].title == "NCCL_IB_HCA matches no RDMA device"
    with pytest.raises(InvalidParameter):
        N.check_environment(["NCCL_DEBUG=INFO"])  # type: ignore[arg-type]


def _pod(volumes=None, mounts=None, resources=None, **spec):
    c = {"name": "trainer", "volumeMounts": mounts or [], "resources": {"limits": resources or {"nvidia.com/gpu": 8}}}
    return {"metadata": {"name": "train-0"}, "spec": {"containers": [c], "volumes": volumes or [], **spec}}


def test_pod_spec_checks():
    f = N.check_pod_spec(_pod())
    assert [x.title for x in f] == ["No /dev/shm volume in the pod"]
    good = _pod(
        volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
        mounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
    )
    assert list(N.check_pod_spec(good)) == []
    small = _pod(
        volumes=[{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}],
        mounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
    )
    assert [x.title for x in N.check_pod_spec(small)] == ["/dev/shm sizeLimit is small for NCCL"]
    disk = _pod(volumes=[{"name": "dshm", "emptyDir": {}}], mounts=[{"name": "dshm", "mountPath": "/dev/shm/"}])
    assert [x.title for x in N.check_pod_spec(disk)] == ["/dev/shm volume is not memory-backed"]
    mn = N.check_pod_spec(good, multi_node=True)
    assert [x.title for x in mn] == ["Multi-node job without RDMA resources"]
    rdma = _pod(
        volumes=good["spec"]["volumes"],
        mounts=good["spec"]["containers"][0]["volumeMounts"],
        resources={"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1},
    )
    assert [x.title for x in N.check_pod_spec(rdma, multi_node=True)] == ["RDMA without IPC_LOCK capability"]
    assert [x.title for x in N.check_pod_spec(_pod(hostIPC=True))] == ["hostIPC: /dev/shm is the node's"]


def test_collect_environment_shape():
    e = N.collect_environment()
    assert set(e) == {"env", "interfaces", "hcas", "shm_bytes", "memlock_bytes"}
    N.check_environment(
        e["env"], interfaces=e["interfaces"], shm_bytes=e["shm_bytes"], memlock_bytes=e["memlock_bytes"]
    )
