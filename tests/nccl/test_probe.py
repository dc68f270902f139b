"""Tests for gpulib.nccl.probe: the pure parts on CPU, the real sweep on 2+ GPUs (marked ``gpu``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpulib.nccl as N
import gpulib.nccl.probe as P

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "text,value",
    [
        ("8", 8),
        ("64K", 65536),
        ("32M", 33554432),
        ("4G", 4294967296),
        ("4GiB", 4294967296),
        ("1g", 1073741824),
        (128, 128),
    ],
)
def test_parse_size(text, value):
    assert P.parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "4X", "-1", "G4", "1.5.2M"])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError, match="size"):
        P.parse_size(bad)


def test_size_sweep_full_range():
    sizes = P.size_sweep(8, 4 << 30)
    assert len(sizes) == 30 and sizes[0] == 8 and sizes[-1] == 4 << 30  # 2^3 .. 2^32
    with pytest.raises(ValueError):
        P.size_sweep(64, 8)


def test_shapes_follow_nccl_tests():
    # all_reduce: count = size / 4
    assert P.shape_for("all_reduce", 1024, 2) == P.Shape(1024, 256, 256, 256)
    # all_gather over 8 ranks: per-rank count 24 / 4 / 8 = 0 elements -> nothing to run
    assert P.shape_for("all_gather", 24, 8).count == 0
    # all_gather 100 B over 3 ranks: 25 floats -> 8 per rank, printed size 8 x 3 x 4 = 96 B
    assert P.shape_for("all_gather", 100, 3) == P.Shape(96, 8, 8, 24)
    assert P.shape_for("reduce_scatter", 100, 3) == P.Shape(96, 8, 24, 8)
    with pytest.raises(ValueError):
        P.shape_for("alltoall", 64, 2)


def test_bandwidth_math():
    # 1e9 bytes in 1e6 us (1 s) = 1 GB/s
    assert P.algbw_gbs(10**9, 10**6) == pytest.approx(1.0)
    # 4 GiB all_reduce in 12000 us: 4294967296 / 12e6 = 357.91 GB/s; factor 2(n-1)/n = 1 for n = 2
    a = P.algbw_gbs(4 << 30, 12000.0)
    assert a == pytest.approx(357.914, abs=1e-3)
    assert P.busbw_gbs("all_reduce", a, 2) == pytest.approx(a)
    assert P.busbw_gbs("all_reduce", 100.0, 8) == pytest.approx(175.0)
    assert P.busbw_gbs("all_gather", 100.0, 8) == pytest.approx(87.5)
    assert P.algbw_gbs(8, 0.0) == 0.0


@pytest.mark.parametrize("t,s", [(12345.6, "  12346"), (123.44, "  123.4"), (5.678, "   5.68")])
def test_time_format_matches_nccl_tests(t, s):
    assert P.format_time(t) == s


def test_avg_busbw_over_both_sides():
    rows = [{"oop": {"busbw": 1.0}, "ip": {"busbw": 3.0}}, {"oop": {"busbw": 5.0}, "ip": {"busbw": 7.0}}]
    assert P.avg_busbw(rows) == 4.0


def _report():
    def side(t, size, wrong=0):
        a = size / (t * 1e3)
        return {"time_us": t, "algbw": a, "busbw": a, "wrong": wrong}  # n = 2 all_reduce: factor 1

    rows = [
        {
            "size_bytes": s,
            "count": s // 4,
            "type": "float",
            "redop": "sum",
            "root": -1,
            "oop": side(t, s),
            "ip": side(t * 0.99, s),
        }
        for s, t in ((8, 9.87), (1 << 20, 20.5), (1 << 30, 3021.0), (4 << 30, 11980.0))
    ]
    return {"collective": "all_reduce", "nranks": 2, "rows": rows, "avg_busbw": P.avg_busbw(rows), "out_of_bounds": 0}


DEVICES = [
    {
        "rank": r,
        "pid": 4242 + r,
        "host": "h200-probe",
        "device": r,
        "busId": f"0000:{0x19 + r:02x}:00",
        "model": "NVIDIA H200",
    }
    for r in range(2)
]
HEADER = {"torch": "2.5.1", "nccl_version_code": 22105, "min_bytes": 8, "max_bytes": 4 << 30, "iters": 20, "warmup": 5}


def test_table_roundtrip_through_parser():
    text = P.format_result(_report(), DEVICES, HEADER)
    r = N.parse_nccl_tests(text)
    assert r.collective == "all_reduce" and r.complete and r.layout == "current"
    assert r.table["size_bytes"].tolist() == [8, 1 << 20, 1 << 30, 4 << 30]
    # 4 GiB in 11980 us: 4294967296 / 11.98e6 = 358.51 GB/s
    assert r.table["oop_busbw"].iloc[-1] == pytest.approx(358.51, abs=0.006)
    assert r.table["oop_time_us"].iloc[-1] == 11980
    assert r.ranks["busId"].tolist() == ["0000:19:00", "0000:1a:00"] and r.nranks == 2
    assert r.avg_busbw == pytest.approx(_report()["avg_busbw"], rel=1e-5)
    assert N.check_busbw(r)["ok"].all()
    v = N.verdict(r)  # 2 x H200 -> the measured 2xH200 band 343.3-346.8 GB/s (nccl_expected_busbw.csv)
    assert v.status == "healthy" and not v.band.inferred and v.band.low == 343.3


def test_multi_collective_roundtrip():
    ag = _report() | {"collective": "all_gather"}
    for row in ag["rows"]:
        row["redop"] = "none"
        row["count"] //= 2
        for s in ("oop", "ip"):
            row[s]["busbw"] = row[s]["algbw"] / 2  # (n-1)/n for n = 2
    text = P.format_result(_report(), DEVICES, HEADER) + "\n" + P.format_result(ag, DEVICES, HEADER)
    rs = N.parse_nccl_tests_all(text)
    assert [r.collective for r in rs] == ["all_reduce", "all_gather"]
    assert all(N.check_busbw(r)["ok"].all() for r in rs)


def test_force_nvls_off_overrides(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    P.force_nvls_off()
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"


def test_parse_args():
    o = P.parse_args(["--collectives", "all_reduce,reduce_scatter", "--max-bytes", "4G", "--iters", "3"])
    assert o.collectives == ["all_reduce", "reduce_scatter"] and o.iters == 3 and o.check
    with pytest.raises(SystemExit):
        P.parse_args(["--collectives", "alltoall"])
    with pytest.raises(SystemExit):
        P.parse_args(["--iters", "0"])


def test_module_imports_without_torch():
    code = "import sys, gpulib.nccl.probe, gpulib.nccl.results, gpulib.nccl.bands, gpulib.nvidia.topology; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None, reason="torch is installed: the missing-torch path does not apply"
)
def test_main_without_torch_says_so():
    out = subprocess.run(
        [sys.executable, "-m", "gpulib.nccl.probe", "--max-bytes", "64"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 2 and "needs PyTorch" in out.stderr


def _gpu_skip_reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        return "torch.cuda is not available (no NVIDIA GPU/driver)"
    if torch.cuda.device_count() < 2:
        return f"needs 2 GPUs, found {torch.cuda.device_count()}"
    return None


@pytest.mark.gpu
def test_real_probe_on_gpus(tmp_path):
    reason = _gpu_skip_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "probe.json"
    env = dict(os.environ, NCCL_NVLS_ENABLE="1")  # the probe must force it back to 0
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulib.nccl.probe",
            "--collectives",
            "all_reduce,all_gather,reduce_scatter",
            "--min-bytes",
            "8",
            "--max-bytes",
            "64M",
            "--iters",
            "5",
            "--warmup",
            "2",
            "--nproc",
            "2",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    rs = N.parse_nccl_tests_all(p.stdout)
    assert [r.collective for r in rs] == ["all_reduce", "all_gather", "reduce_scatter"]
    for r in rs:
        assert r.complete and r.nranks == 2 and r.out_of_bounds == 0
        assert (r.table[["oop_wrong", "ip_wrong"]] == 0).all().all()
        assert r.table["oop_busbw"].iloc[-1] > 1.0
        assert N.check_busbw(r)["ok"].all()
    doc = json.loads(out.read_text())
    assert doc["env"]["NCCL_NVLS_ENABLE"] == "0" and doc["world_size"] == 2


def _fake_torch(tmp_path, ngpus: int) -> dict:
    """A stand-in ``torch`` package: CUDA 'available' with ``ngpus`` devices; mp.spawn prints what it was asked."""
    pkg = tmp_path / "torch"
    (pkg / "multiprocessing").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "class cuda:\n"
        "    @staticmethod\n    def is_available(): return True\n"
        f"    @staticmethod\n    def device_count(): return {ngpus}\n"
    )
    (pkg / "multiprocessing" / "__init__.py").write_text(
        "def spawn(fn, args=(), nprocs=1, join=True):\n    print(f'spawn nprocs={nprocs} fn={fn.__name__}')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{ROOT}"
    return env


def test_main_one_process_runs_with_a_note(tmp_path):
    env = _fake_torch(tmp_path, ngpus=1)
    p = subprocess.run(
        [sys.executable, "-m", "gpulib.nccl.probe", "--max-bytes", "64"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "spawn nprocs=1 fn=_worker"
    assert "1 rank: busbw is 0 by definition" in p.stderr and "device-local copy rate" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "gpulib.nccl.probe", "--nproc", "2"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert p.stdout.strip() == "spawn nprocs=2 fn=_worker" and "1 rank" not in p.stderr
