"""The NCCL results history of the demo: the real 2xH200 capture (:data:`gpulib.demo.captures.DEMO_NCCL_TESTS`)
at its capture time plus earlier synthetic runs, built with :func:`gpulib.nccl.history.rows_from_run`.

The runbook passes :func:`runbook_default_history` to :func:`gpulib.nccl.steps.runbook_history`, which shows it
when no ``history_dir`` is given and the input is the packaged capture; the NCCL domain itself never reads demo files.
"""

from __future__ import annotations

import dataclasses
import functools

import pandas as pd

import gpulib.nccl as nccl
from gpulib.core.knowledge import load_table
from gpulib.demo.captures import DEMO_NCCL_TESTS, demo_file

#: run times and busbw factors of the synthetic runs (``gpulib/data/demo/README.md`` says where each row comes from)
DEMO_NCCL_SCENARIO = "demo/nccl_history_scenario"


def demo_nccl_history(cluster: str = "demo", instance_type: str = "2x H200 NV18 (lent VM)") -> pd.DataFrame:
    """A history for the demo: the real 2xH200 capture at its capture time, and earlier synthetic runs (the
    capture's tables scaled by ``busbw_factor`` of ``gpulib/data/demo/nccl_history_scenario.csv``, times
    divided by it), each judged by :func:`gpulib.nccl.bands.verdict`. ``origin`` says which rows are synthetic.
    Built once per process (from packaged files and tables); each caller gets a copy."""
    return _history(cluster, instance_type).copy()


@functools.lru_cache(maxsize=4)  # one small frame (tens of rows) per (cluster, instance type) asked
def _history(cluster: str, instance_type: str) -> pd.DataFrame:
    results = [r for r in nccl.parse_nccl_tests_all(demo_file(DEMO_NCCL_TESTS).read_text()) if len(r.table)]
    scenario = load_table(DEMO_NCCL_SCENARIO)
    parts = []
    for _, s in scenario.iterrows():
        f = float(s["busbw_factor"])
        runs = results if f == 1.0 else [_scaled(r, f) for r in results]
        vs = [nccl.verdict(r) for r in runs]
        origin = (
            f"capture: {DEMO_NCCL_TESTS}"
            if s["kind"] == "capture"
            else f"synthetic (demo): the capture x {f:g}; {s['note']}"
        )
        parts.append(
            nccl.rows_from_run(
                runs, vs, cluster=cluster, timestamp=s["timestamp"], instance_type=instance_type, origin=origin
            )
        )
    return pd.concat(parts, ignore_index=True).sort_values("timestamp", kind="stable").reset_index(drop=True)


def runbook_default_history() -> tuple[pd.DataFrame, str]:
    """(:func:`demo_nccl_history`, where it came from): the ``default_history`` the nccl_check runbook passes to
    :func:`gpulib.nccl.steps.runbook_history`."""
    return demo_nccl_history(), (
        f"the demo history: the real 2xH200 capture and synthetic earlier runs (gpulib/data/{DEMO_NCCL_SCENARIO}.csv)"
    )


def _scaled(result: "nccl.NcclTestResult", factor: float) -> "nccl.NcclTestResult":
    t = result.table.copy()
    for side in ("oop", "ip"):
        t[f"{side}_algbw"] = t[f"{side}_algbw"] * factor
        t[f"{side}_busbw"] = t[f"{side}_busbw"] * factor
        t[f"{side}_time_us"] = t[f"{side}_time_us"] / factor
    avg = None if result.avg_busbw is None else result.avg_busbw * factor
    return dataclasses.replace(result, table=t, avg_busbw=avg)
