"""MIG geometry: catalog, exact placement vs NVIDIA's placements (exhaustive), nvidia-smi parsers, mig-parted."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pandas as pd
import pytest
import yaml

import gpulib.mig as mig
import gpulib.mig.catalog as mig_catalog
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Severity
from gpulib.core.knowledge import data_path

FIX = Path(__file__).parents[1] / "fixtures" / "mig"
CAP = Path(__file__).parents[2] / "gpulib" / "data" / "captures"  # real captures, one copy each

# Independent oracle data, typed from
# https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html and the -lgipp captures in
# tests/fixtures/mig/ (NVIDIA -lgipp): name -> (compute, size, starts, max, +me)
A100_40 = {
    "1g.5gb": (1, 1, range(7), 7, False),
    "1g.5gb+me": (1, 1, range(7), 1, True),
    "1g.10gb": (1, 2, (0, 2, 4, 6), 4, False),
    "2g.10gb": (2, 2, (0, 2, 4), 3, False),
    "3g.20gb": (3, 4, (0, 4), 2, False),
    "4g.20gb": (4, 4, (0,), 1, False),
    "7g.40gb": (7, 8, (0,), 1, False),
}
H100_80 = {
    "1g.10gb": (1, 1, range(7), 7, False),
    "1g.10gb+me": (1, 1, range(7), 1, True),
    "1g.20gb": (1, 2, (0, 2, 4, 6), 4, False),
    "2g.20gb": (2, 2, (0, 2, 4), 3, False),
    "3g.40gb": (3, 4, (0, 4), 2, False),
    "4g.40gb": (4, 4, (0,), 1, False),
    "7g.80gb": (7, 8, (0,), 1, False),
}
A30 = {
    "1g.6gb": (1, 1, range(4), 4, False),
    "1g.6gb+me": (1, 1, range(4), 1, True),
    "2g.12gb": (2, 2, (0, 2), 2, False),
    "2g.12gb+me": (2, 2, (0, 2), 1, True),
    "4g.24gb": (4, 4, (0,), 1, False),
}


def brute_force_valid(table, counts, slots, compute):
    """Try every assignment of allowed starts; valid iff some assignment has no overlapping slots."""
    items = [n for n, c in counts.items() for _ in range(c)]
    if any(c > table[n][3] for n, c in counts.items()):
        return False
    if sum(table[n][4] for n in items) > 1 or sum(table[n][0] for n in items) > compute:
        return False

    def fits(k, used):  # depth-first over every allowed start of every instance
        if k == len(items):
            return True
        size = table[items[k]][1]
        for s in table[items[k]][2]:
            cells = set(range(s, s + size))
            if max(cells) < slots and not cells & used and fits(k + 1, used | cells):
                return True
        return False

    return fits(0, set())


@pytest.mark.parametrize(
    "model,table,slots,compute", [("A100-40GB", A100_40, 8, 7), ("H100-80GB", H100_80, 8, 7), ("A30-24GB", A30, 4, 4)]
)
def test_validity_agrees_with_nvidia_placements_exhaustively(model, table, slots, compute):
    names = list(table)
    ranges = [range(min(table[n][3], slots) + 1) for n in names]
    checked = 0
    for counts in product(*ranges):
        want = {n: c for n, c in zip(names, counts) if c}
        if not want:
            continue
        assert mig.is_valid_layout(model, want) == brute_force_valid(table, want, slots, compute), want
        checked += 1
    assert checked >= (40 if slots == 4 else 1000)


@pytest.mark.parametrize(
    "want,ok",
    [
        (["4g.20gb", "3g.20gb"], True),
        (["3g", "3g"], True),
        (["3g", "3g", "1g"], False),
        (["4g", "2g", "1g"], True),
        (["1g.5gb+me", "1g.5gb+me"], False),
        (["7g.40gb", "1g.5gb"], False),
        (["1g.5gb"] * 7, True),
        (["1g.5gb"] * 8, False),
        (["4g.20gb", "1g.10gb", "1g.10gb"], True),
    ],
)
def test_issue_examples_a100_40gb(want, ok):
    assert mig.is_valid_layout("A100-40GB", want) is ok


def test_place_returns_start_slots_from_nvidia_rules():
    p = mig.place("A100-40GB", ["1g", "2g", "4g"])
    # 4g only starts at 0 (size 4); 2g then at 4; 1g at 6 (its 6 is the only free allowed start left... or 7 not
    # allowed)
    assert p.fits and dict(p.starts) == {"4g.20gb": 0, "2g.10gb": 4, "1g.5gb": 6}
    assert p.slot_map() == ["4g.20gb"] * 4 + ["2g.10gb"] * 2 + ["1g.5gb", None]
    assert mig.stranded_slots(p) == 1  # slot 7: no profile starts at 7 with size 1 (1g starts 0..6)
    assert p.nvidia_smi_commands(2)[0] == "sudo nvidia-smi mig -i 2 -cgi 4g.20gb:0 -C"


def test_place_reasons_are_specific():
    assert "9 memory slots" in mig.place("A100-40GB", ["3g", "3g", "1g"]).reason
    assert "at most one" in mig.place("A30-24GB", ["1g.6gb+me", "2g.12gb+me"]).reason
    assert "at most 1" in mig.place("H100-80GB", {"4g.40gb": 2}).reason
    # 1g.10gb (size 2, starts 0/2/4/6) x3 + 2g (starts 0/2/4): 8 slots add up and fit; 4g + 2g + 1g.10gb@? also
    r = mig.place("A100-40GB", ["4g", "3g.20gb"])
    assert r.fits
    r = mig.place("A100-40GB", ["4g", "1g.10gb", "2g", "1g"])  # 4+1+2+1 = 8 compute slices
    assert not r.fits and "8 compute slices" in r.reason
    r = mig.place("A100-40GB", ["1g.10gb"] * 4 + ["1g.5gb"])  # 5 compute slices but 4x2+1 = 9 memory slots
    assert not r.fits and "9 memory slots" in r.reason
    assert "compute slices" in mig.place("A100-40GB", ["7g", "1g"]).reason


def test_allowed_starts_matter_not_only_the_sum():
    # 4g.20gb only at 0 and 3g.20gb only at 0/4: 4g + 3g + ... fine; but two 4g-sized blocks both want slot 0
    p = mig.place("H100-80GB", ["4g.40gb", "3g.40gb"])
    assert p.fits and dict(p.starts) == {"4g.40gb": 0, "3g.40gb": 4}
    # 1g.20gb at 6 (size 2) + 3g at 0 + 2g at 4: all 8 slots, valid
    assert mig.is_valid_layout("H100-80GB", ["3g.40gb", "2g.20gb", "1g.20gb"])


def test_profile_lookup_accepts_common_spellings_and_rejects_unknown():
    assert mig.get_profile("A100-80GB", "nvidia.com/mig-1g.10gb.me").name == "1g.10gb+me"
    assert mig.get_profile("A100-80GB", "MIG 3g.40gb").name == "3g.40gb"
    assert mig.get_profile("H100-80GB", 9).name == "3g.40gb"
    assert mig.get_profile("A100-40GB", "1g").name == "1g.5gb"  # shorthand = smallest memory
    with pytest.raises(mig.UnknownProfile, match="3g.40gb"):
        mig.get_profile("A100-40GB", "3g.40gb")
    with pytest.raises(mig.UnknownGPUModel):
        mig.profiles("Radeon-MI300X")
    with pytest.raises(mig.UnknownGPUModel, match="does not support MIG"):
        mig.profiles("NVIDIA-L4")
    with pytest.raises(InvalidParameter):
        mig.place("A100-40GB", "3g.20gb")


def test_gpu_model_from_product_labels():
    assert mig.resolve_gpu_model("NVIDIA-A100-SXM4-40GB") == "A100-40GB"
    assert mig.resolve_gpu_model("NVIDIA-H100-80GB-HBM3") == "H100-80GB"
    assert mig.resolve_gpu_model("NVIDIA H100 NVL") == "H100-94GB"
    assert mig.resolve_gpu_model("NVIDIA-H200") == "H200-141GB"
    assert mig.is_mig_capable("NVIDIA-A100-SXM4-80GB") and not mig.is_mig_capable("Tesla-T4")


@pytest.mark.parametrize(
    "name,pci,want",
    [
        # GH200 480GB is PCI device 0x2342, in mig-parted's H100-96GB group (config-default.yaml all-balanced)
        ("NVIDIA-GH200-480GB", None, "H100-96GB"),
        ("NVIDIA GH200 480GB", None, "H100-96GB"),
        (None, "0x234210DE", "H100-96GB"),
        ("NVIDIA GH200 144G HBM3e", None, "GH200-144GB"),
        (None, "0x234810DE", "GH200-144GB"),
        # mig-parted groups H800 with H100-80GB, A800 with A100, H100 SXM5 94GB / H800 NVL with H100 NVL
        ("NVIDIA H800", None, "H100-80GB"),
        ("NVIDIA-H800-80GB-HBM3", None, "H100-80GB"),
        ("NVIDIA A800-SXM4-80GB", None, "A100-80GB"),
        ("NVIDIA-A800-SXM4-40GB", None, "A100-40GB"),
        ("NVIDIA H100 SXM5 94GB", None, "H100-94GB"),
        ("NVIDIA H800 NVL", None, "H100-94GB"),
        ("NVIDIA H200 NVL", None, "H200-141GB"),
        # the PCI id decides even when the name would say otherwise
        ("NVIDIA H200", "0x233510DE", "H200-141GB"),
        ("something-else", "0x2335", "H200-141GB"),
    ],
)
def test_gpu_model_by_pci_id_or_exact_name(name, pci, want):
    assert mig.resolve_gpu_model(name, pci_device_id=pci) == want


@pytest.mark.parametrize(
    "name", ["NVIDIA GB200 XYZ", "NVIDIA-GB2000", "NVIDIA B200 XYZ", "my-H200-cluster", "NVIDIA-H100"]
)
def test_gpu_model_never_matches_by_substring(name):
    """GB200 is not a B200 (its profiles differ: 0x294110DE in mig-parted, its own catalog rows); no name resolves by
    a substring."""
    with pytest.raises(mig.UnknownGPUModel):
        mig.resolve_gpu_model(name)


def test_catalog_data_is_complete_and_consistent():
    cat = pd.read_csv(data_path("mig_profiles.csv"))
    assert set(cat["gpu_model"]) == {
        "A30-24GB",
        "A100-40GB",
        "A100-80GB",
        "H100-80GB",
        "H100-94GB",
        "H100-96GB",
        "GH200-144GB",
        "H200-141GB",
        "B200",
        "GB200",
        "GB300",
        "B300",
    }
    assert cat["source"].str.len().gt(10).all() and set(cat["inferred"]) <= {"yes", "no"}
    for model, g in cat.groupby("gpu_model"):
        assert g["media_ext"].eq("yes").sum() >= 1
        full = g[g["compute_slices"] == g["compute_slices"].max()].iloc[0]
        assert full["max_count"] == 1 and full["placements"] == "0"
        # the memory of each profile grows with its memory slots
        assert g.sort_values("memory_slots")["memory_gib"].is_monotonic_increasing, model
    # unverified hardware values are flagged; H200 is measured (gpulib/data/captures/h200_smi_mig_lgip.txt)
    assert (cat[cat["gpu_model"].isin(["B200", "GB200", "GB300", "B300"])]["inferred"] == "yes").all()
    assert (cat[cat["gpu_model"].isin(["A100-40GB", "H100-80GB", "H200-141GB"])]["inferred"] == "no").all()
    # A30: two values have no openable source (tests/fixtures/mig/README.md)
    a30 = cat[cat["gpu_model"] == "A30-24GB"].set_index("profile")["inferred"]
    assert sorted(a30[a30 == "yes"].index) == ["2g.12gb+me", "4g.24gb"]


def test_parse_lgipp_real_output():
    df = mig.parse_lgipp((FIX / "h100_80gb_lgipp.txt").read_text())
    assert list(df["profile_id"]) == [19, 20, 15, 14, 9, 5, 0]
    assert df.set_index("profile_id").loc[15, "starts"] == [0, 2, 4, 6]
    assert df.set_index("profile_id").loc[0, "size"] == 8  # "Placement : {0}:8"


def test_parse_lgip_real_output_both_widths():
    h = mig.parse_lgip((CAP / "h100_80gb_lgip.txt").read_text())
    assert len(h) == 7
    r = h.set_index("name").loc["7g.80gb"]
    assert (r.profile_id, r.total, r.memory_gib, r.sms, r.ce, r.ofa) == (0, 1, 79.25, 132, 8, 1)
    a = mig.parse_lgip((FIX / "a100_40gb_lgip.txt").read_text())  # narrower table of an older driver
    assert list(a["name"]) == ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
    assert a.set_index("name").loc["3g.20gb", "memory_gib"] == 19.62


def test_truncated_and_malformed_outputs():
    df = mig.parse_lgipp((FIX / "h100_80gb_lgipp_truncated.txt").read_text())
    assert list(df["profile_id"]) == [19, 20, 15] and len(df.attrs["skipped"]) == 1
    lg = mig.parse_lgip((FIX / "h100_80gb_lgip_truncated.txt").read_text())
    assert 1 <= len(lg) < 7
    with pytest.raises(mig.MigParseError, match="1 malformed"):
        mig.parse_lgipp((FIX / "malformed_lgipp.txt").read_text())
    with pytest.raises(mig.MigParseError):
        mig.parse_lgip("")


def test_catalog_from_smi_checks_a_gpu_we_do_not_ship():
    cat = mig.catalog_from_smi((FIX / "a30_lgip.txt").read_text(), (FIX / "a30_lgipp.txt").read_text(), "my-a30")
    assert mig_catalog.slot_geometry("my-a30", cat) == (4, 4)
    assert mig.is_valid_layout("my-a30", ["2g.12gb", "1g.6gb", "1g.6gb"], catalog=cat)
    assert not mig.is_valid_layout("my-a30", ["2g.12gb", "2g.12gb", "1g.6gb"], catalog=cat)
    # the parsed catalog agrees with the shipped A30 rows
    shipped = mig.profiles("A30-24GB").set_index("profile")
    for r in cat.itertuples():
        assert shipped.loc[r.profile, "placements"] == r.placements
        assert shipped.loc[r.profile, "max_count"] == r.max_count
    old = mig.catalog_from_smi((FIX / "a100_40gb_lgip.txt").read_text(), (FIX / "a100_40gb_lgipp.txt").read_text())
    assert mig.is_valid_layout("custom", ["4g.20gb", "2g.10gb", "1g.5gb"], catalog=old)


def test_parse_lgi_current_instances():
    df = mig.parse_lgi((FIX / "a100_80gb_lgi.txt").read_text())
    assert list(zip(df["profile"], df["start"])) == [("1g.10gb", 2), ("1g.10gb", 3), ("2g.20gb", 0), ("3g.40gb", 4)]
    assert mig.is_valid_layout("A100-80GB", list(df["profile"]))


def test_mig_parted_config_roundtrip_and_validation():
    text = mig.mig_parted_config(
        {
            "balanced-plan": [
                mig.mig_parted_selector(
                    {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, devices=[0, 1], device_filter="0x233010DE"
                ),
                mig.mig_parted_selector(None, devices=[2, 3]),
            ],
            "all-3g.40gb": {"3g.40gb": 2},
        }
    )
    doc = yaml.safe_load(text)
    assert doc["version"] == "v1"
    sel = doc["mig-configs"]["balanced-plan"][0]
    assert sel == {
        "devices": [0, 1],
        "device-filter": "0x233010DE",
        "mig-enabled": True,
        "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    }
    assert doc["mig-configs"]["balanced-plan"][1] == {"devices": [2, 3], "mig-enabled": False}
    assert mig.validate_mig_parted_config(text, "H100-80GB") == []
    bad = text.replace("3g.40gb: 2", "3g.40gb: 3")
    assert any("at most 2" in p for p in mig.validate_mig_parted_config(bad, "H100-80GB"))
    assert (
        mig.validate_mig_parted_config("version: v2\nmig-configs: {}\n")[0] == "unknown version: v2"
    )  # spec.go's words
    with pytest.raises(InvalidParameter):
        mig.mig_parted_config({"bad name!": {"1g.10gb": 1}})


def test_resource_names_single_vs_mixed():
    assert mig.resource_name("1g.10gb+me", "mixed") == "nvidia.com/mig-1g.10gb.me"
    assert mig.resource_name("3g.40gb", "single") == "nvidia.com/gpu"
    assert mig.pod_resources("2g.20gb", "mixed")["limits"] == {"nvidia.com/mig-2g.20gb": 1}
    with pytest.raises(InvalidParameter):
        mig.resource_name("3g.40gb", "none")
    assert mig.single_strategy_ok([{"1g.10gb": 7}, {"1g.10gb": 7}])[0]
    assert not mig.single_strategy_ok([{"1g.10gb": 2, "3g.40gb": 1}])[0]


def test_layout_findings_ok_and_critical():
    ok = mig.layout_findings("A100-40GB", ["3g", "3g"], node="n1", gpu="0")[0]
    assert ok.severity is Severity.OK and ok.commands[0].endswith("-cgi 3g.20gb:0 -C")
    bad = mig.layout_findings("A100-40GB", ["3g", "3g", "1g"])[0]
    assert bad.severity is Severity.CRITICAL and "9 memory slots" in bad.summary


def test_mig_change_sop_prechecks_from_live_frames():
    pods = pd.DataFrame(
        [
            {
                "namespace": "ml",
                "pod": "vllm-0",
                "node": "gpu-1",
                "phase": "Running",
                "gpu_request": 1,
                "mig_requests": {},
            },
            {
                "namespace": "ml",
                "pod": "cpu-0",
                "node": "gpu-1",
                "phase": "Running",
                "gpu_request": 0,
                "mig_requests": {},
            },
            {
                "namespace": "ml",
                "pod": "mig-0",
                "node": "gpu-1",
                "phase": "Running",
                "gpu_request": 0,
                "mig_requests": {"nvidia.com/mig-1g.10gb": 1},
            },
            {
                "namespace": "ml",
                "pod": "other",
                "node": "gpu-2",
                "phase": "Running",
                "gpu_request": 1,
                "mig_requests": {},
            },
        ]
    )
    nodes = pd.DataFrame([{"node": "gpu-1", "mig_config": "all-disabled", "mig_config_state": "failed"}])
    fs = mig.mig_change_sop("gpu-1", "plan-1", pods=pods, nodes=nodes)
    sev = {f.title: f.severity for f in fs}
    assert sev["2 GPU pod(s) still running on gpu-1"] is Severity.WARNING
    assert any(f.severity is Severity.CRITICAL for f in fs)
    sop = fs[-1].commands
    assert sop[0] == "kubectl cordon gpu-1" and sop[-1] == "kubectl uncordon gpu-1"
    assert "kubectl label node gpu-1 nvidia.com/mig.config=plan-1 --overwrite" in sop
    assert any("nvidia.com/mig.config.state" in c for c in sop)
    done = mig.mig_change_sop(
        "gpu-1",
        "plan-1",
        nodes=pd.DataFrame([{"node": "gpu-1", "mig_config": "plan-1", "mig_config_state": "success"}]),
    )
    assert [f.severity for f in done] == [Severity.OK]


def test_h200_profiles_are_the_real_h200_capture():
    """gpulib/data/captures/h200_smi_mig_lgip.txt / _lgipp.txt (driver 580.159.04): 7g.141gb is 140.00 GiB, not
    the 131.32 that reading "141" as GB and converting to GiB gives."""
    from gpulib.core.knowledge import data_path

    lgip = mig.parse_lgip(data_path("captures/h200_smi_mig_lgip.txt").read_text())
    lgipp = mig.parse_lgipp(data_path("captures/h200_smi_mig_lgipp.txt").read_text())
    rows = mig.profiles("H200-141GB").set_index("profile")
    assert set(rows.index) == set(lgip["name"])
    for r in lgip.itertuples():
        row = rows.loc[r.name]
        assert row["memory_gib"] == pytest.approx(r.memory_gib) and int(row["profile_id"]) == r.profile_id
        assert int(row["max_count"]) == r.total and row["inferred"] == "no"
        pl = lgipp[lgipp["profile_id"] == r.profile_id].iloc[0]
        assert [int(x) for x in str(row["placements"]).split(";")] == list(pl["starts"])
        assert "captures/h200_smi_mig_lgip.txt" in row["source"]
    assert rows.loc["7g.141gb", "memory_gib"] == pytest.approx(140.0)


def test_gh200_b200_large_profiles_say_how_their_memory_was_inferred():
    for model, name in (("GH200-144GB", "7g.144gb"), ("B200", "7g.180gb"), ("B200", "3g.90gb")):
        row = mig.profiles(model).set_index("profile").loc[name]
        assert row["inferred"] == "yes" and "memory_gib" in row["inferred_fields"]
        assert "H200" in row["source"] and "ratio" in row["source"]
        assert row["memory_gib"] > float(name.split(".")[1].removesuffix("gb")) * 0.95  # not the GB->GiB 0.93


def test_every_mig_sop_row_is_used_and_every_key_asked_for_exists():
    """mig_sop.csv and the MIG domain agree: every key a finding asks for is a row, every row is asked for."""
    from pathlib import Path

    from gpulib.core.sop import keys
    from tests.helpers.sopcheck import scan, unknown_keys, unused_rows

    pkg, rows = Path(mig.__file__).parent, set(keys("mig_sop"))
    assert scan(pkg, "mig_sop")[0] == rows  # every key is asked for by name here, none chosen at run time
    assert unknown_keys(pkg, "mig_sop", rows) == [] and unused_rows(pkg, "mig_sop", rows) == []
