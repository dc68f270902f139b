"""A real NCCL bus-bandwidth probe: torch.distributed over NCCL, one process per GPU.

    torchrun --nproc_per_node=2 -m gpulib.nccl.probe --collectives all_reduce,all_gather,reduce_scatter \\
        --min-bytes 8 --max-bytes 4G --iters 20 --warmup 5 --out results.json
    python3 -m gpulib.nccl.probe ...        # not under torchrun: spawns one process per visible GPU
    torchrun --standalone --nproc_per_node=8 /probe/nccl_probe.py ...   # this file from the Job's ConfigMap

It measures like nccl-tests (``NVIDIA/nccl-tests: src/util.cu``, ``doc/PERFORMANCE.md`` @ a0b82b22): for each size,
``iters`` back-to-back collectives
timed with CUDA events, the time averaged over ranks, ``algbw = size / time`` and
``busbw = algbw x factor(n)``; out-of-place and in-place; then one checked run on fresh data
counts wrong elements. Differences from nccl-tests: CUDA-event timing instead of a host timer,
``warmup`` iterations before every size, and all_reduce's out-of-place column is an in-place
all_reduce on the separate send buffer (torch has no out-of-place all_reduce). It prints a nccl-tests-format table
(readable by
:func:`gpulib.nccl.results.parse_nccl_tests_all`) and writes JSON.

NVLink SHARP stays off: ``NCCL_NVLS_ENABLE`` is forced to ``0`` before NCCL initialises. The
probe never changes GPU settings (clocks, persistence, MIG, NVLink).

This file is self-contained: the standard library and torch only (torch imported when a run starts), so that
:mod:`gpulib.nccl.job` can ship its source text in a ConfigMap and a public PyTorch image runs it as
``torchrun ... /probe/nccl_probe.py``. The bus factors come from ``nccl_bus_factors.csv``: next to this file
(the ConfigMap mounts both keys in one folder) or, inside the package, ``gpulib/data/nccl/nccl_bus_factors.csv``;
:mod:`gpulib.nccl.results` evaluates the same table with :func:`factor_from_formula`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROBE_VERSION = 1
SUPPORTED = ("all_reduce", "all_gather", "reduce_scatter")
_TYPE_NAME = "float"  # nccl-tests name for float32
_TYPE_SIZE = 4
_PATTERN_PERIOD = 7  # element i of rank r holds (r + 1) * (i % 7 + 1): exact in float32, catches misplaced chunks
_CHUNK = 1 << 26  # elements per chunk when filling/checking big buffers (256 MiB of float32)


#: printed on stderr for a one-rank run (gpulib/data/captures/README.md shows why)
SINGLE_RANK_NOTE = (
    "gpulib.nccl.probe: 1 rank: busbw is 0 by definition. NCCL communicates nothing on one rank: it "
    "copies the send buffer into the receive buffer (out-of-place all_gather/reduce_scatter algbw is a "
    "device-local copy rate) and in-place calls, all_reduce included, are no-ops (their algbw means "
    "nothing). Use 2 or more GPUs for a bus bandwidth."
)


BUS_FACTORS_FILE = "nccl_bus_factors.csv"

#: busbw / algbw as a function of the rank count n, by the ``factor`` column of ``nccl_bus_factors.csv``
#: (``NVIDIA/nccl-tests: doc/PERFORMANCE.md`` @ a0b82b22). The one place these formulas are written.
_FORMULAS = {"2(n-1)/n": lambda n: 2.0 * (n - 1) / n, "(n-1)/n": lambda n: (n - 1) / n, "1": lambda n: 1.0}


def factor_from_formula(formula: str, nranks: int) -> float:
    """The value of a ``factor`` formula of ``nccl_bus_factors.csv`` for ``nranks`` ranks."""
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise ValueError(f"nranks={nranks!r} must be a positive integer")
    try:
        return _FORMULAS[str(formula).strip()](nranks)
    except KeyError:
        raise ValueError(f"bus factor formula {formula!r} is not one of {', '.join(_FORMULAS)}") from None


def bus_factors_path() -> Path:
    """``nccl_bus_factors.csv`` next to this file (the ConfigMap layout) or in the package's data folder."""
    here = Path(__file__).resolve().parent
    for p in (here / BUS_FACTORS_FILE, here.parent / "data" / "nccl" / BUS_FACTORS_FILE):
        if p.is_file():
            return p
    raise FileNotFoundError(
        f"{BUS_FACTORS_FILE} is neither next to {__file__} nor in gpulib/data/nccl/: "
        "the probe's ConfigMap must carry both keys (gpulib.nccl.job writes them)"
    )


_TABLE: dict[str, str] = {}


def bus_factor_table() -> dict[str, str]:
    """``{collective: factor formula}`` read from ``nccl_bus_factors.csv`` (stdlib csv, cached)."""
    if not _TABLE:
        with open(bus_factors_path(), newline="") as fh:
            _TABLE.update({row["collective"]: row["factor"] for row in csv.DictReader(fh)})
    return dict(_TABLE)


def bus_factor(collective: str, nranks: int) -> float:
    """busbw / algbw for ``collective`` (as named in ``nccl_bus_factors.csv``) over ``nranks`` ranks."""
    table = bus_factor_table()
    if collective not in table:
        raise ValueError(f"collective {collective!r} is not in {BUS_FACTORS_FILE} ({', '.join(table)})")
    return factor_from_formula(table[collective], nranks)


def force_nvls_off() -> None:
    """NVLink SHARP must stay off for this probe: set, not setdefault."""
    os.environ["NCCL_NVLS_ENABLE"] = "0"


# ------------------------------------------------------------------------------------------
# pure parts (tested on CPU)
# ------------------------------------------------------------------------------------------


def parse_size(text: str | int) -> int:
    """nccl-tests size syntax: ``8``, ``64K``, ``32M``, ``4G`` (powers of 1024), also ``4GB``/``4GiB``."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"size {text} must be >= 0")
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", str(text))
    if not m:
        raise ValueError(f"size {text!r} is not a size like 8, 64K, 32M or 4G")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * mult)


def size_sweep(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """Sizes from min to max multiplying by ``factor`` (nccl-tests ``-f``)."""
    if min_bytes <= 0 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"bad sweep: min {min_bytes}, max {max_bytes}, factor {factor}")
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


@dataclass(frozen=True)
class Shape:
    """Element counts for one size, as nccl-tests' getCollByteCount sets them up."""

    size_bytes: int  # the printed size: max(send, recv) bytes
    count: int  # the printed count: per-rank parameter count
    send_numel: int
    recv_numel: int


def shape_for(collective: str, size_bytes: int, nranks: int, type_size: int = _TYPE_SIZE) -> Shape:
    count = size_bytes // type_size
    if collective == "all_reduce":
        return Shape(count * type_size, count, count, count)
    if collective == "all_gather":
        per = count // nranks
        return Shape(per * nranks * type_size, per, per, per * nranks)
    if collective == "reduce_scatter":
        per = count // nranks
        return Shape(per * nranks * type_size, per, per * nranks, per)
    raise ValueError(f"collective {collective!r} is not supported by the probe (use {', '.join(SUPPORTED)})")


def algbw_gbs(size_bytes: int, time_us: float) -> float:
    """algbw in GB/s (1e9 bytes/s) from bytes and microseconds."""
    return 0.0 if time_us <= 0 else size_bytes / (time_us * 1e3)


def busbw_gbs(collective: str, algbw: float, nranks: int) -> float:
    return algbw * bus_factor(collective, nranks)


def _float_str(value: float, width: int) -> str:
    """nccl-tests getFloatStr: as many decimals as fit in ``width``."""
    power, v = 0, 1
    while value >= v:
        power += 1
        v *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}"


def format_time(time_us: float) -> str:
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    if time_us >= 100.0:
        return f"{time_us:7.1f}"
    return f"{time_us:7.2f}"


def format_header() -> list[str]:
    return [
        "#",
        f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place                       in-place          ",
        f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {'time':>7s}  {'algbw':>6s}  "
        f"{'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s} ",
        f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  "
        f"{'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s} ",
    ]


def format_row(row: dict[str, Any]) -> str:
    """One table line from a row dict (keys as in the JSON ``rows``)."""
    line = f"{row['size_bytes']:12d}  {row['count']:12d}  {row['type']:>8s}  {row['redop']:>6s}  {row['root']:6d}"
    for side in ("oop", "ip"):
        s = row[side]
        line += (
            f"  {format_time(s['time_us'])}  {_float_str(s['algbw'], 6)}  {_float_str(s['busbw'], 6)}  {s['wrong']:6g}"
        )
    return line


def format_result(result: dict[str, Any], devices: list[dict[str, Any]], header: dict[str, Any]) -> str:
    """A whole nccl-tests-style block for one collective."""
    binary = f"{result['collective']}_perf"
    lines = [
        f"# gpulib.nccl.probe version {PROBE_VERSION} torch {header.get('torch', '?')} "
        f"nccl-library={header.get('nccl_version_code', 0)}",
        f"# Collective test starting: {binary}",
        f"# nThread 1 nGpus 1 minBytes {header['min_bytes']} maxBytes {header['max_bytes']} step: 2(factor) "
        f"warmup iters: {header['warmup']} iters: {header['iters']} agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for d in devices:
        lines.append(
            f"#  Rank {d['rank']:2d} Group  0 Pid {d['pid']:6d} on {d['host']:>10s} device {d['device']:2d} "
            f"[{d['busId']}] {d['model']}"
        )
    lines += format_header()
    lines += [format_row(r) for r in result["rows"]]
    oob = result["out_of_bounds"]
    lines.append(f"# {'Out of bounds values':<20s} : {oob} {'FAILED' if oob else 'OK'}")
    lines.append(f"# {'Avg bus bandwidth':<20s} : {result['avg_busbw']:g} ")
    lines.append("#")
    lines.append(f"# Collective test concluded: {binary}")
    return "\n".join(lines)


def avg_busbw(rows: list[dict[str, Any]]) -> float:
    """nccl-tests' trailer: the mean of busbw over every size, out-of-place and in-place."""
    vals = [r[s]["busbw"] for r in rows for s in ("oop", "ip")]
    return sum(vals) / len(vals) if vals else 0.0


# ------------------------------------------------------------------------------------------
# GPU part (torch imported lazily)
# ------------------------------------------------------------------------------------------


def _fill(torch, buf, rank: int, offset: int = 0) -> None:
    """buf[i] = (rank + 1) * ((offset + i) % 7 + 1)."""
    n = buf.numel()
    for a in range(0, n, _CHUNK):
        b = min(n, a + _CHUNK)
        idx = torch.arange(offset + a, offset + b, device=buf.device, dtype=torch.int64)
        buf[a:b] = ((idx % _PATTERN_PERIOD) + 1).to(buf.dtype) * float(rank + 1)


def _count_wrong(torch, out, expected_fn) -> int:
    wrong = 0
    n = out.numel()
    for a in range(0, n, _CHUNK):
        b = min(n, a + _CHUNK)
        wrong += int((out[a:b] != expected_fn(a, b)).sum().item())
    return wrong


def _expected(torch, collective: str, rank: int, nranks: int, shape: Shape, device):
    tot = nranks * (nranks + 1) / 2.0  # sum of (r + 1)

    def pat(a, b, offset=0):
        return ((torch.arange(offset + a, offset + b, device=device, dtype=torch.int64) % _PATTERN_PERIOD) + 1).float()

    if collective == "all_reduce":
        return lambda a, b: pat(a, b) * tot
    if collective == "all_gather":
        per = shape.count

        def ag(a, b):  # element j of the output is element j % per of rank j // per
            j = torch.arange(a, b, device=device, dtype=torch.int64)
            return ((j % per) % _PATTERN_PERIOD + 1).float() * ((j // per) + 1).float()

        return ag
    if collective == "reduce_scatter":
        return lambda a, b: pat(a, b, offset=rank * shape.count) * tot
    raise ValueError(collective)


def _run_op(dist, collective: str, send, recv, in_place: bool, rank: int, per: int):
    """One collective. torch's all_reduce is always in place, so the out-of-place all_reduce column
    reduces the send buffer and the in-place column the receive buffer (same NCCL call, no extra copy
    in the timed loop). all_gather/reduce_scatter in place use the nccl-tests offsets
    (send = recv + rank x count, resp. recv = send + rank x count)."""
    if collective == "all_reduce":
        dist.all_reduce(recv if in_place else send)
    elif collective == "all_gather":
        src = recv[rank * per : (rank + 1) * per] if in_place else send
        dist.all_gather_into_tensor(recv, src)
    elif collective == "reduce_scatter":
        dst = send[rank * per : (rank + 1) * per] if in_place else recv
        dist.reduce_scatter_tensor(dst, send)
    else:
        raise ValueError(f"collective {collective!r} is not supported by the probe")


def _time_side(torch, dist, collective, send, recv, in_place, rank, per, iters, warmup, nranks, device) -> float:
    for _ in range(warmup):
        _run_op(dist, collective, send, recv, in_place, rank, per)
    torch.cuda.synchronize(device)
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        _run_op(dist, collective, send, recv, in_place, rank, per)
    end.record()
    end.synchronize()
    t = torch.tensor([start.elapsed_time(end) * 1e3 / iters], device=device, dtype=torch.float64)
    dist.all_reduce(t)  # nccl-tests averages the time over ranks
    return float(t.item()) / nranks


def _check_side(torch, dist, collective, send, recv, in_place, rank, nranks, shape, device) -> int:
    per = shape.count
    if collective == "all_reduce":
        out = recv if in_place else send
        _fill(torch, out, rank)
        _run_op(dist, collective, send, recv, in_place, rank, per)
    elif collective == "all_gather":
        recv.zero_()
        if in_place:
            _fill(torch, recv[rank * per : (rank + 1) * per], rank)
        else:
            _fill(torch, send, rank)
        _run_op(dist, collective, send, recv, in_place, rank, per)
        out = recv
    else:  # reduce_scatter
        _fill(torch, send, rank)
        if not in_place:
            recv.zero_()
        _run_op(dist, collective, send, recv, in_place, rank, per)
        out = send[rank * per : (rank + 1) * per] if in_place else recv
    torch.cuda.synchronize(device)
    wrong = torch.tensor(
        [_count_wrong(torch, out, _expected(torch, collective, rank, nranks, shape, device))],
        device=device,
        dtype=torch.int64,
    )
    dist.all_reduce(wrong)
    return int(wrong.item())


def _device_info(torch, rank: int, local_rank: int) -> dict[str, Any]:
    p = torch.cuda.get_device_properties(local_rank)
    bus = f"{getattr(p, 'pci_domain_id', 0):04x}:{getattr(p, 'pci_bus_id', 0):02x}:{getattr(p, 'pci_device_id', 0):02x}"
    return {
        "rank": rank,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "device": local_rank,
        "busId": bus,
        "model": p.name,
        "memory_bytes": int(p.total_memory),
    }


def run_sweep(opts: argparse.Namespace, rank: int, world: int, local_rank: int) -> dict[str, Any] | None:
    """Run the sweep in an initialised process; rank 0 returns the report dict."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", local_rank)
    sizes = size_sweep(parse_size(opts.min_bytes), parse_size(opts.max_bytes), opts.step_factor)
    devices: list[Any] = [None] * world
    dist.all_gather_object(devices, _device_info(torch, rank, local_rank))
    results = []
    for coll in opts.collectives:
        rows = []
        biggest = shape_for(coll, sizes[-1], world)
        send = torch.empty(max(biggest.send_numel, 1), dtype=torch.float32, device=device)
        recv = torch.empty(max(biggest.recv_numel, 1), dtype=torch.float32, device=device)
        for size in sizes:
            shp = shape_for(coll, size, world)
            if shp.count == 0:
                continue
            s, r = send[: shp.send_numel], recv[: shp.recv_numel]
            row = {
                "size_bytes": shp.size_bytes,
                "count": shp.count,
                "type": _TYPE_NAME,
                "redop": "none" if coll == "all_gather" else "sum",
                "root": -1,
            }
            for side, in_place in (("oop", False), ("ip", True)):
                t_us = _time_side(
                    torch, dist, coll, s, r, in_place, rank, shp.count, opts.iters, opts.warmup, world, device
                )
                wrong = _check_side(torch, dist, coll, s, r, in_place, rank, world, shp, device) if opts.check else 0
                a = algbw_gbs(shp.size_bytes, t_us)
                row[side] = {"time_us": t_us, "algbw": a, "busbw": busbw_gbs(coll, a, world), "wrong": wrong}
            rows.append(row)
        del send, recv
        torch.cuda.empty_cache()
        oob = int(sum(row[side]["wrong"] for row in rows for side in ("oop", "ip")))  # wrong elements in total
        results.append(
            {"collective": coll, "nranks": world, "rows": rows, "avg_busbw": avg_busbw(rows), "out_of_bounds": oob}
        )
        if rank == 0:
            print(format_result(results[-1], devices, _header(opts, torch)), flush=True)
    if rank != 0:
        return None
    return {
        "schema": 1,
        "tool": "gpulib.nccl.probe",
        "probe_version": PROBE_VERSION,
        "header": _header(opts, torch),
        "world_size": world,
        "devices": devices,
        "results": results,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "CUDA_VISIBLE", "TORCH_NCCL"))},
    }


def _header(opts, torch) -> dict[str, Any]:
    try:
        v = torch.cuda.nccl.version()
        code = v[0] * 10000 + v[1] * 100 + v[2] if isinstance(v, tuple) else int(v)
        ver = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        code, ver = 0, "unknown"
    return {
        "torch": torch.__version__,
        "nccl_version": ver,
        "nccl_version_code": code,
        "min_bytes": parse_size(opts.min_bytes),
        "max_bytes": parse_size(opts.max_bytes),
        "iters": opts.iters,
        "warmup": opts.warmup,
        "nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
    }


def _worker(local_rank: int, world: int, opts: argparse.Namespace, port: int | None) -> None:
    """One process per GPU. Under torchrun the rendezvous comes from the environment."""
    force_nvls_off()
    import torch
    import torch.distributed as dist

    if port is not None:  # self-spawned
        os.environ.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(local_rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(local_rank),
        )
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", local_rank))
    torch.cuda.set_device(local_rank)
    try:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    except TypeError:  # torch < 2.3 has no device_id
        dist.init_process_group("nccl")
    try:
        t0 = time.time()
        report = run_sweep(opts, rank, world, local_rank)
        if report is not None:
            report["wall_s"] = round(time.time() - t0, 2)
            if opts.out:
                with open(opts.out, "w") as fh:
                    json.dump(report, fh, indent=1)
                print(f"# wrote {opts.out}", flush=True)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--collectives", default="all_reduce,all_gather,reduce_scatter", help=f"comma list from {', '.join(SUPPORTED)}"
    )
    p.add_argument("--min-bytes", default="8", help="smallest size (8, 64K, 32M, 4G)")
    p.add_argument("--max-bytes", default="1G", help="largest size")
    p.add_argument("--step-factor", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-check", dest="check", action="store_false", help="skip the correctness check")
    p.add_argument(
        "--nproc", type=int, default=None, help="processes to spawn when not under torchrun (default: all GPUs)"
    )
    p.add_argument("--out", default=None, help="write the JSON report here")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    opts = build_parser().parse_args(argv)
    colls = [c.strip() for c in opts.collectives.split(",") if c.strip()]
    bad = [c for c in colls if c not in SUPPORTED]
    if bad or not colls:
        raise SystemExit(
            f"unsupported collective(s) {bad}; choose from {', '.join(SUPPORTED)} "
            f"(nccl-tests knows {', '.join(bus_factor_table())})"
        )
    opts.collectives = colls
    size_sweep(parse_size(opts.min_bytes), parse_size(opts.max_bytes), opts.step_factor)  # validates
    if opts.iters < 1 or opts.warmup < 0:
        raise SystemExit("--iters must be >= 1 and --warmup >= 0")
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    force_nvls_off()
    try:
        import torch
    except ImportError:
        print("gpulib.nccl.probe needs PyTorch with CUDA (pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpulib.nccl.probe: no CUDA device visible", file=sys.stderr)
        return 2
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        if int(os.environ["WORLD_SIZE"]) == 1 and int(os.environ["RANK"]) == 0:
            print(SINGLE_RANK_NOTE, file=sys.stderr)
        _worker(int(os.environ.get("LOCAL_RANK", 0)), int(os.environ["WORLD_SIZE"]), opts, None)
        return 0
    world = opts.nproc or torch.cuda.device_count()
    if world < 1:
        print(f"gpulib.nccl.probe: --nproc {world}: need at least 1 process (2 or more for a busbw)", file=sys.stderr)
        return 2
    if world == 1:
        print(SINGLE_RANK_NOTE, file=sys.stderr)
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(world, opts, _free_port()), nprocs=world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
