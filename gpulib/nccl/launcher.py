"""Run a bus-bandwidth sweep on the local GPUs: nccl-tests' ``<collective>_perf`` when it is on PATH, otherwise
``python -m gpulib.nccl.probe`` (torch.distributed over NCCL); the output is parsed by :mod:`gpulib.nccl.results`.
"""

from __future__ import annotations

from typing import Iterable

from gpulib.core.errors import ProbeError
from gpulib.nccl.results import NcclTestResult, _canonical_collective, parse_nccl_tests, parse_nccl_tests_all

# --------------------------------------------------------------------------------------------
# probe
# --------------------------------------------------------------------------------------------


def run_probe(
    collectives: Iterable[str] = ("all_reduce", "all_gather"),
    *,
    min_bytes: str | int = "8",
    max_bytes: str | int = "1G",
    iters: int = 20,
    warmup: int = 5,
    nproc: int | None = None,
    use_nccl_tests: bool = True,
    timeout_s: float = 900,
) -> list[NcclTestResult]:
    """Run a bus-bandwidth sweep on the local GPUs and return parsed results (one per collective).

    Uses nccl-tests' ``<collective>_perf`` when it is on PATH (``use_nccl_tests``), otherwise
    ``python -m gpulib.nccl.probe`` (torch.distributed over NCCL, one process per GPU). NVLink SHARP
    stays off (``NCCL_NVLS_ENABLE=0``).
    """
    import os
    import shutil
    import subprocess
    import sys

    colls = [_canonical_collective(c) for c in collectives]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    results: list[NcclTestResult] = []
    binaries = {c: shutil.which(f"{c}_perf") for c in colls} if use_nccl_tests else {}
    if binaries and all(binaries.values()):
        ngpus = nproc or _visible_gpus()
        for c in colls:
            cmd = [
                binaries[c],
                "-b",
                str(min_bytes),
                "-e",
                str(max_bytes),
                "-f",
                "2",
                "-g",
                str(ngpus),
                "-n",
                str(iters),
                "-w",
                str(warmup),
            ]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
            results.append(parse_nccl_tests(p.stdout + p.stderr, collective=c))
        return results
    cmd = [
        sys.executable,
        "-m",
        "gpulib.nccl.probe",
        "--collectives",
        ",".join(colls),
        "--min-bytes",
        str(min_bytes),
        "--max-bytes",
        str(max_bytes),
        "--iters",
        str(iters),
        "--warmup",
        str(warmup),
    ]
    if nproc:
        cmd += ["--nproc", str(nproc)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
    res = parse_nccl_tests_all(p.stdout)
    if p.returncode != 0 and not any(len(r.table) for r in res):
        raise ProbeError(f"gpulib.nccl.probe exited with {p.returncode}: {(p.stderr or p.stdout)[-500:]}")
    return res


def _visible_gpus() -> int:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:
        raise ProbeError(f"cannot count GPUs with NVML: {exc}") from exc
