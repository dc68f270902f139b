"""The derived all_reduce band (no published row for the GPU count) holds the published ring measurements of each
NVLink generation inside it, without leaning on the tolerance.

Published ring (NVLS off) all_reduce busbw, stas00/ml-engineering: network/README.md @744d01e1:
  8x A100 NVLink3 234.89 GB/s at 16 GiB ("78% of spec"); NVIDIA/nccl-tests#175: 232.5 GB/s
  H200 NVLink4 with NVLS off: 363.3 (4 GPUs) ... 365.7 (7 GPUs) GB/s at 8 GiB, 367.61 GB/s (8 GPUs, 16 GiB); the
  project's 2x H200 (gpulib/data/captures/2xh200_nccl_probe.txt): 343.28 in place / 346.80 out of place at 4 GiB
  B200 NVLink5 (p6-b200) with NVLS off: 673.2 (4 GPUs), 677.8 (5, 6), 680.5 (7), 682.2 GB/s (8 GPUs), 8 GiB
"""

from __future__ import annotations

import pytest

from gpulib.nccl.bands import expected_busbw

PUBLISHED = {
    ("NVIDIA A100-SXM4-80GB", "NVLink3"): [232.5, 234.89],
    ("NVIDIA H200", "NVLink4"): [343.28, 346.80, 363.3, 364.4, 365.1, 365.7, 367.61],
    ("NVIDIA B200", "NVLink5"): [673.2, 677.8, 680.5, 682.2],
}


@pytest.mark.parametrize("model,link", sorted(PUBLISHED))
def test_published_ring_measurements_fall_inside_the_derived_band(model, link):
    band = expected_busbw("all_reduce", gpu_model=model, interconnect=link)  # GPU count unknown: derived
    assert band is not None and band.inferred and band.basis.startswith("derived")
    for gbs in PUBLISHED[(model, link)]:
        assert band.low <= gbs <= band.high, (model, gbs, band.low, band.high)


def test_b200_band_is_not_nvlink4s_efficiency_on_nvlink5():
    """0.78-0.82 of 900 GB/s (702-738) puts every published B200 ring figure below the band."""
    band = expected_busbw("all_reduce", gpu_model="NVIDIA B200", interconnect="NVLink5", gpus_per_node=4)
    assert band.high < 702 and band.low > 600
    assert "682.2" in band.source or "p6-b200" in band.source


def test_eight_gpu_rows_still_come_from_the_published_table():
    band = expected_busbw("all_reduce", gpu_model="NVIDIA B200", interconnect="NVLink5", gpus_per_node=8)
    assert band.basis.startswith("published") and (band.low, band.high) == (670, 690)
