"""gpulib/data/learn/storage_tiers.csv: the NVMe figure against the PCIe generation it names."""

from __future__ import annotations

import pytest

from gpulib import learn

#: PCIe line rate per lane and direction in GB/s: transfer rate (GT/s) x 128b/130b encoding / 8 bits
#: (PCIe 3.0: 8 GT/s, 4.0: 16 GT/s; stas00/ml-engineering: network/README.md @744d01e1 PCIe table, ~2.0 GBps
#: per lane and direction for PCIe 4)
GEN3_LANE, GEN4_LANE = 8 * 128 / 130 / 8, 16 * 128 / 130 / 8


def test_gen4_nvme_figure_is_not_a_gen3_one():
    hot = learn.storage_tiers().set_index("tier").loc["hot"]
    assert "Gen4" in hot["note"]
    x4_gen3, x4_gen4 = 4 * GEN3_LANE, 4 * GEN4_LANE  # 3.94 and 7.88 GB/s for an x4 drive
    gb_s = float(hot["read_gb_s"])
    assert gb_s > x4_gen3, (gb_s, x4_gen3)
    assert hot["basis"] == "line rate" and gb_s == pytest.approx(x4_gen4, abs=0.01)
