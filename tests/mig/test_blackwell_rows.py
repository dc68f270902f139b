"""GB200, GB300 and B300 are in the MIG catalog with the profiles NVIDIA's mig-parted configures on them.

Expected values: NVIDIA/mig-parted deployments/systemd/config-default.yaml @bd7160f4 (copied verbatim in
gpulib/data/mig/mig_parted_default_config.yaml): the ``all-<profile>`` configs give each profile's count on one
GPU, the ``all-balanced`` entries with device filters 0x294110DE (GB200 HGX), 0x31C210DE (GB300) and 0x318210DE
(B300) the balanced layout of each; mig-parted#227 prints GB200's nvidia-smi mig -lgip (1g/2g IDs and GiB).
"""

from __future__ import annotations

import pytest
import yaml

from gpulib import mig
from gpulib.core.knowledge import data_path

#: model -> {profile: instances on one GPU} from the all-<profile> configs of mig-parted's default file
EXPECTED = {
    "GB200": {"1g.23gb": 7, "1g.23gb+me": 1, "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2, "4g.93gb": 1, "7g.186gb": 1},
    "GB300": {"1g.35gb": 7, "1g.35gb+me": 1, "1g.70gb": 4, "2g.70gb": 3, "3g.139gb": 2, "4g.139gb": 1, "7g.278gb": 1},
    "B300": {"1g.34gb": 7, "1g.34gb+me": 1, "1g.67gb": 4, "2g.67gb": 3, "3g.135gb": 2, "4g.135gb": 1, "7g.269gb": 1},
}
PCI = {"GB200": "0x294110DE", "GB300": "0x31C210DE", "B300": "0x318210DE"}


def _mig_parted() -> dict:
    return yaml.safe_load(data_path("mig/mig_parted_default_config.yaml").read_text())["mig-configs"]


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_profiles_and_counts_are_mig_parteds(model):
    cfg = _mig_parted()
    for name, count in EXPECTED[model].items():
        # the expected count is the one mig-parted's all-<profile> config creates ("+me" is spelt ".me" there)
        sel = cfg[f"all-{name.replace('+', '.')}"]
        assert any((s.get("mig-devices") or {}).get(name) == count for s in sel), (model, name)
    got = mig.profiles(model).set_index("profile")["max_count"].to_dict()
    assert got == EXPECTED[model]


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_resolved_by_pci_id_and_balanced_layout_fits(model):
    assert mig.resolve_gpu_model("any name", pci_device_id=PCI[model]) == model
    balanced = next(s["mig-devices"] for s in _mig_parted()["all-balanced"] if s.get("device-filter") == [PCI[model]])
    assert mig.is_valid_layout(model, balanced), (model, balanced)


def test_gb200_is_not_a_b200():
    assert mig.resolve_gpu_model("NVIDIA GB200") == "GB200"
    assert mig.resolve_gpu_model("GB200") != mig.resolve_gpu_model("B200")


def test_gb200_measured_profiles_match_its_lgip():
    # NVIDIA/mig-parted#227 (GB200, nvidia-smi mig -lgip): 1g.23gb ID 19 22.00 GiB, 1g.23gb+me ID 20 22.00,
    # 1g.47gb ID 15 45.50, 2g.47gb ID 14 45.50
    p = mig.profiles("GB200").set_index("profile")
    for name, pid, gib in (
        ("1g.23gb", 19, 22.0),
        ("1g.23gb+me", 20, 22.0),
        ("1g.47gb", 15, 45.5),
        ("2g.47gb", 14, 45.5),
    ):
        assert (int(p.loc[name, "profile_id"]), float(p.loc[name, "memory_gib"])) == (pid, gib), name


@pytest.mark.parametrize("name", ["NVIDIA B300 SXM6 AC", "NVIDIA-B300-SXM6-AC", "B300 SXM6 AC"])
def test_b300_product_name_resolves(name):
    """The B300's NVML/CUDA product name is 'NVIDIA B300 SXM6 AC' (torch.cuda.get_device_name() on a B300:
    https://github.com/NVIDIA/cosmos-framework/pull/114), GFD's label the same with dashes."""
    assert mig.resolve_gpu_model(name) == "B300"
