"""Simulated ``vllm:`` series of the demo fleet's vLLM pods: what vLLM's ``/metrics`` would export for them
(running / waiting requests, KV-cache usage, preemptions, TTFT and end-to-end latency histograms).

Served through the Source interface: :meth:`gpulib.demo.source.DemoSource.app_series` (``app_series("vllm",
window)``, read by :func:`gpulib.vllm.live.vllm_metrics` when the source has no PromQL), ``series()`` /
``summary()`` of a ``vllm:`` field, and the OpenMetrics backfill of :mod:`gpulib.demo.metrics`. The vLLM
domain itself knows nothing of them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpulib.core.errors import EmptyResult

#: histogram bucket bounds (seconds) of the simulated vLLM histograms (subset of vLLM's own)
TTFT_BUCKETS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
#: demo load model per deployment persona: (capacity running, requests/s at full activity, median ttft s, median e2e s)
_DEMO_LOAD = {"infer": (64, 12.0, 0.35, 6.0), "infer_small": (48, 6.0, 0.05, 1.2)}
_LOGLOGISTIC_SHAPE = 4.0


def _demo_pods(sim) -> list[dict]:
    out = []
    for d in sim.devices:
        if d.pod.startswith("vllm-") and d.persona in _DEMO_LOAD and not any(o["pod"] == d.pod for o in out):
            out.append(
                {
                    "pod": d.pod,
                    "namespace": d.namespace,
                    "node": d.node,
                    "device": d,
                    "workload": d.pod.rsplit("-", 2)[0],
                    "persona": d.persona,
                }
            )
    return out


def _demo_load(sim, pod: dict, t: np.ndarray) -> dict[str, np.ndarray]:
    cap, rps, ttft, e2e = _DEMO_LOAD[pod["persona"]]
    act = sim.activity(pod["device"], t)
    busy = np.clip((act - 0.45) / 0.3, 0, None)  # above 45 % activity the batch is full
    return {
        "act": act,
        "running": np.round(np.minimum(act / 0.45, 1) * cap),
        "waiting": np.round(busy * cap * 0.8),
        "kv": np.round(np.clip(act * 1.45, 0, 0.99), 4),
        "rate": act * rps,
        "ttft": ttft * (1 + 4 * busy),
        "e2e": e2e * (1 + 1.5 * busy),
        "preempt_rate": 0.2 * busy,
    }


def demo_vllm_series(sim, t: np.ndarray) -> list[tuple[str, dict[str, str], np.ndarray]]:
    """Simulated ``vllm:`` samples of the demo fleet's vLLM pods at times ``t``: (metric, labels, values).

    Gauges follow the pod's GPU activity; counters and histogram buckets accumulate from a fixed origin
    so any window gives the same increase (values are a pure function of time, like the DCGM series).
    """
    t = np.asarray(t, dtype=float)
    if not len(t):
        return []
    origin = sim.end_s - 2 * 86400
    out = []
    for pod in _demo_pods(sim):
        # integrate on a fine fixed grid from the origin, then sample at t
        grid = np.arange(origin, max(t.max(), origin) + 60, 60.0)
        ld, lg = _demo_load(sim, pod, t), _demo_load(sim, pod, grid)
        base = {
            "model_name": "meta-llama/Meta-Llama-3-70B-Instruct" if "70b" in pod["pod"] else "Qwen/Qwen2.5-7B-Instruct",
            "namespace": pod["namespace"],
            "pod": pod["pod"],
            "job": "vllm",
        }
        out += [
            ("vllm:num_requests_running", base, ld["running"]),
            ("vllm:num_requests_waiting", base, ld["waiting"]),
            ("vllm:kv_cache_usage_perc", base, ld["kv"]),
        ]

        def cum(x: np.ndarray) -> np.ndarray:
            c = np.concatenate([[0.0], np.cumsum(x * 60.0)])[:-1]
            return np.round(np.interp(t, grid, c, left=0.0))

        out.append(("vllm:num_preemptions_total", base, cum(lg["preempt_rate"])))
        for metric, buckets, med in (
            ("vllm:time_to_first_token_seconds", TTFT_BUCKETS, lg["ttft"]),
            ("vllm:e2e_request_latency_seconds", E2E_BUCKETS, lg["e2e"]),
        ):
            for le in buckets:
                frac = 1.0 / (1.0 + (med / le) ** _LOGLOGISTIC_SHAPE)
                out.append((f"{metric}_bucket", {**base, "le": f"{le:g}"}, cum(lg["rate"] * frac)))
            total = cum(lg["rate"])
            out.append((f"{metric}_bucket", {**base, "le": "+Inf"}, total))
            out.append((f"{metric}_count", base, total))
    return out


def demo_vllm_frame(sim, metric: str, start: float, end: float, step: float | None = None) -> pd.DataFrame:
    """One ``vllm:`` metric of the demo fleet as a long frame (timestamp, node, pod, namespace, model, value)."""
    t = sim.grid(start, end, step)
    node_of = {p["pod"]: p["node"] for p in _demo_pods(sim)}
    parts = [
        pd.DataFrame(
            {
                "timestamp": pd.to_datetime(t, unit="s", utc=True),
                "node": node_of.get(lab["pod"], ""),
                "pod": lab["pod"],
                "namespace": lab["namespace"],
                "model": lab["model_name"],
                **({"le": lab["le"]} if "le" in lab else {}),
                "value": v,
            }
        )
        for name, lab, v in demo_vllm_series(sim, t)
        if name == metric
    ]
    if not parts:
        raise EmptyResult(f"{metric} is not exported by the demo fleet's vLLM pods", query=metric)
    return pd.concat(parts, ignore_index=True)
