"""Rows of gpulib/data/mig/mig_profiles.csv against the ``nvidia-smi mig -lgip`` captures they cite."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpulib.core.knowledge import load_table
from gpulib.mig.smi_parsers import parse_lgip

ROOT = Path(__file__).resolve().parents[2]

#: model -> the -lgip capture its measured rows cite (the same path is in each row's ``source``)
CAPTURES = {
    "H100-80GB": "gpulib/data/captures/h100_80gb_lgip.txt",
    "H200-141GB": "gpulib/data/captures/h200_smi_mig_lgip.txt",
    "A100-40GB": "tests/fixtures/mig/a100_40gb_lgip.txt",
}


@pytest.mark.parametrize("model", sorted(CAPTURES))
def test_measured_rows_match_the_lgip_capture_they_cite(model):
    """A row marked measured (inferred=no) that cites a capture holds the capture's GiB, ID and instance count
    for every profile the capture lists (nvidia-smi prints GiB with two decimals: compared exactly)."""
    path = CAPTURES[model]
    cap = parse_lgip((ROOT / path).read_text())
    cap = cap[cap["gpu"] == cap["gpu"].iloc[0]].set_index("name")
    cat = load_table("mig_profiles")
    rows = cat[(cat["gpu_model"] == model) & (cat["inferred"] == "no")]
    checked = 0
    for _, r in rows.iterrows():
        assert Path(path).name in r["source"], (model, r["profile"], "does not cite", path)
        if r["profile"] not in cap.index:
            continue
        c = cap.loc[r["profile"]]
        assert (float(r["memory_gib"]), int(r["profile_id"]), int(r["max_count"])) == (
            float(c["memory_gib"]),
            int(c["profile_id"]),
            int(c["total"]),
        ), (model, r["profile"])
        checked += 1
    assert checked >= 5, f"{model}: only {checked} profiles compared"
