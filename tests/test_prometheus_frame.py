"""PrometheusSource._range_frame: a /api/v1/query_range result turned into a SERIES frame column-wise."""
from __future__ import annotations

import math

import pandas as pd

from gpulib.schema import SERIES_COLUMNS
from gpulib.sources.prometheus import PrometheusSource


def _metric(host: str, gpu: str, pod: str = "", driver: str = "550.127.05", **extra) -> dict:
    m = {"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gpu": gpu, "UUID": f"GPU-{host}-{gpu}", "modelName": "NVIDIA H100 80GB HBM3",
         "hostname": host, "DCGM_FI_DRIVER_VERSION": driver, "pci_bus_id": "00000000:18:00.0", **extra}
    if pod:
        m.update(pod=pod, namespace="ml", container="main")
    return m


# shaped like Prometheus' JSON "result" (values are [unix seconds, "string"]); series deliberately out of order
RESULT = [
    {"metric": _metric("node-b", "0"), "values": [[1000, "0.5"], [1060, "NaN"]]},
    # node-a gpu 1: pod p1 until 1060, then pod p2 from 1120 (two series on one device)
    {"metric": _metric("node-a", "1", pod="p2"), "values": [[1120, "0.25"], [1180, "0"]]},
    {"metric": _metric("node-a", "1", pod="p1"), "values": [[1000, "1"], [1060, "0.75"]]},
    {"metric": _metric("node-a", "0"), "values": [[1000, "0.125"]]},
    # the same GPU after a driver upgrade: DCGM_FI_DRIVER_VERSION is dropped by normalise_labels, so
    # the sample at 1000 repeats node-a/0's and must go when de-duplicating; 1060 is new
    {"metric": _metric("node-a", "0", driver="560.35.03"), "values": [[1000, "0.9"], [1060, "0.5"]]},
    {"metric": _metric("node-c", "0"), "values": []},
]


def test_rows_ordered_by_device_then_time_with_labels_normalised():
    df = PrometheusSource._range_frame(RESULT, dedupe=True)
    assert list(df.columns) == SERIES_COLUMNS
    got = list(zip(df["node"], df["gpu"], df["pod"], df["timestamp"].map(pd.Timestamp.timestamp).astype(int)))
    assert got == [("node-a", "0", "", 1000), ("node-a", "0", "", 1060),
                   ("node-a", "1", "p1", 1000), ("node-a", "1", "p1", 1060),
                   ("node-a", "1", "p2", 1120), ("node-a", "1", "p2", 1180),
                   ("node-b", "0", "", 1000), ("node-b", "0", "", 1060)]
    # the first of the duplicated 1000 s samples (0.125) is kept, the upgraded driver's 0.9 dropped
    assert df["value"].iloc[:6].tolist() == [0.125, 0.5, 1.0, 0.75, 0.25, 0.0]
    assert df["value"].iloc[6] == 0.5 and math.isnan(df["value"].iloc[7])
    assert str(df["timestamp"].dt.tz) == "UTC"
    assert set(df["namespace"]) == {"ml", ""} and set(df["uuid"]) == {"GPU-node-a-0", "GPU-node-a-1", "GPU-node-b-0"}
    assert "node-c" not in set(df["node"])  # a series without samples adds no row


def test_without_dedupe_both_duplicate_samples_stay():
    df = PrometheusSource._range_frame(RESULT, dedupe=False)
    a0 = df[(df["node"] == "node-a") & (df["gpu"] == "0")]
    assert len(df) == 9  # 2 + 2 + 2 + 1 + 2 samples
    # both series' samples, time-ordered; equal timestamps keep the result's series order
    assert list(zip(a0["timestamp"].map(pd.Timestamp.timestamp).astype(int), a0["value"])) == [
        (1000, 0.125), (1000, 0.9), (1060, 0.5)]


def test_empty_result_gives_an_empty_series_frame():
    df = PrometheusSource._range_frame([{"metric": _metric("n", "0"), "values": []}], dedupe=True)
    assert df.empty and list(df.columns) == SERIES_COLUMNS
