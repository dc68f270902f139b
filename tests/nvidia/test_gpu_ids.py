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
