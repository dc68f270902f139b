"""gpulib.nvidia.gpu_ids: GPU index <-> UUID <-> PCI bus id joined from nvidia-smi and DCGM frames."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import gpulib.nvidia.smi as smi
from gpulib.nvidia.gpu_ids import gpu_id_map

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "smi"


def test_gpu_id_map_joins_smi_and_dcgm_labels():
    smi_df = smi.parse_query((FIX / "h100x2_incident_q.txt").read_text())
    dcgm = pd.DataFrame(
        {
            "node": ["n1", "n1"],
            "gpu": ["0", "1"],
            "uuid": ["GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1", "GPU-7c3cadbd-17e5-0913-f69b-c618122ea0cd"],
            "value": [1.0, 2.0],
        }
    )
    m = gpu_id_map(smi_df, dcgm).set_index("pci_bus_id")
    assert m.loc["0000:2a:00.0", "gpu"] == "1"
    assert m.loc["0000:18:00.0", "uuid"] == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
    only_dcgm = gpu_id_map(dcgm)
    assert only_dcgm["pci_bus_id"].isna().all() and len(only_dcgm) == 2


def test_a_series_frame_maps_as_its_distinct_id_rows_do():
    """A SERIES frame repeats its ids once per sample: the map is that of its distinct rows, in the order met,
    with index-only rows (no UUID, no bus id) as they are."""
    ids = pd.DataFrame(
        {
            "gpu": ["0", "1", "2", "3"],
            "uuid": ["GPU-a", "GPU-b", None, ""],
            "pci_bus_id": ["00000000:18:00.0", None, "00000000:38:00.0", None],
        }
    )
    series = pd.concat([ids] * 50, ignore_index=True).assign(value=range(200))
    once = gpu_id_map(ids)
    assert list(once["gpu"]) == ["0", "1", "2", "3"]
    assert once.loc[0, "pci_bus_id"] == "0000:18:00.0"
    pd.testing.assert_frame_equal(gpu_id_map(series), once)
    pd.testing.assert_frame_equal(gpu_id_map(series.iloc[::-1]), once.iloc[::-1].reset_index(drop=True))
