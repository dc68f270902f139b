"""Serving signals: may a serving workload be shrunk, judged by its ``vllm:`` metrics?

The cost report must not recommend fewer GPUs for a deployment that the ``vllm_deploy`` live check calls
overloaded. This module asks the same question the runbook asks (:func:`gpulib.vllm.live.vllm_metrics`
then :func:`gpulib.vllm.findings.assess`, with the runbook's default window and latency target:
``serving_window`` / ``serving_latency_p99_s`` in ``gpulib/data/vllm/vllm_deploy.csv``) for each serving workload,
and returns one row per workload (:func:`gpulib.cost.plan.plan_actions` reads it)::

    namespace, workload, verdict (scale_up | retune | scale_down | ok | ""), overloaded (bool), signal

``overloaded`` is true for ``scale_up`` (requests queue, latency over target, or KV cache full with
preemptions) and ``retune`` (KV cache full). A workload without ``vllm:`` series gets an empty verdict
and the report falls back to the DCGM activity signal, saying so.
"""

from __future__ import annotations

import pandas as pd

from gpulib.core.errors import GpulibError
from gpulib.vllm.findings import assess
from gpulib.vllm.live import vllm_metrics
from gpulib.vllm.sizing import setting

__all__ = ["SERVING_COLUMNS", "OVERLOADED_VERDICTS", "serving_signals"]

SERVING_COLUMNS = ["namespace", "workload", "verdict", "overloaded", "signal"]
#: vllm_deploy verdicts (gpulib/vllm/live.py ``verdict``) under which a deployment must not lose GPUs
OVERLOADED_VERDICTS = ("scale_up", "retune")


def serving_signals(
    src, workloads: pd.DataFrame, *, window: str | None = None, latency_p99_s: float | None = None
) -> pd.DataFrame:
    """One row per (namespace, workload) of ``workloads`` with the vLLM live-check verdict.

    ``window`` / ``latency_p99_s`` default to ``serving_window`` / ``serving_latency_p99_s`` in
    ``gpulib/data/vllm/vllm_deploy.csv`` (the ``vllm_deploy`` runbook's defaults).
    """
    window = window or setting("serving_window")
    if latency_p99_s is None:
        latency_p99_s = float(setting("serving_latency_p99_s")) or None
    rows = []
    for ns, wl in workloads[["namespace", "workload"]].drop_duplicates().itertuples(index=False):
        try:
            m = vllm_metrics(src, str(ns), str(wl), window)
        except GpulibError:
            # no vllm: series for this workload (not a vLLM server, or not scraped): activity decides
            rows.append({"namespace": ns, "workload": wl, "verdict": "", "overloaded": False, "signal": ""})
            continue
        f = assess(m, latency_p99_s=latency_p99_s, workload=str(wl), namespace=str(ns))[0]
        verdict = str(f.data.get("verdict", ""))
        title = f.title.split(": ", 1)[-1]
        rows.append(
            {
                "namespace": ns,
                "workload": wl,
                "verdict": verdict,
                "overloaded": verdict in OVERLOADED_VERDICTS,
                "signal": f"vllm: {title} over {window} (vllm_deploy live check, {f.severity.value})",
            }
        )
    return pd.DataFrame(rows, columns=SERVING_COLUMNS)
