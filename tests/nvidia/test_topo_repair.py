"""nvidia-smi topo -m as engineers paste it: NIC rows cut, wrapped rows, cut columns, too damaged to read."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpulib.core.knowledge import data_path
from gpulib.nvidia import parse_topology

FULL = (Path(__file__).parents[1] / "fixtures" / "nccl" / "topo_8xH100_tabs_nics.txt").read_text()
LINES = FULL.splitlines()
HEADER, GPU_ROWS, NIC_ROWS, TAIL = LINES[0], LINES[1:9], LINES[9:19], LINES[19:]


def _text(lines):
    return "\n".join(lines) + "\n"


def test_the_whole_paste_needs_no_repair():
    t = parse_topology(FULL)
    assert t.warnings == [] and len(t.gpus) == 8 and len(t.nics) == 10 and t.interconnect == "NVLink"


def test_real_h200_capture_one_gpu():
    t = parse_topology(data_path("captures/h200_smi_topo_m.txt").read_text())
    assert t.gpus == ["GPU0"] and t.warnings == [] and t.interconnect == "single"
    assert t.affinity.iloc[0]["cpu_affinity"] == "0-15"


def test_nic_rows_cut_are_rebuilt_from_the_gpu_rows():
    whole = parse_topology(FULL)
    t = parse_topology(_text([HEADER] + GPU_ROWS + TAIL))
    assert len(t.nics) == 10 and any("NIC row(s) NIC0" in w for w in t.warnings)
    for g in range(8):
        assert t.nearest_nics(g) == whole.nearest_nics(g)
    assert t.link("NIC3", "GPU3") == "PIX" and t.link("NIC3", "NIC4") == "N/A" and t.link("NIC3", "NIC3") == "X"
    assert t.affinity.set_index("gpu").loc["GPU5", "cpu_affinity"] == "56-111,168-223"


def test_wrapped_rows_are_joined():
    wrapped = []
    for row in GPU_ROWS + NIC_ROWS:
        cells = row.split("\t")
        wrapped += ["\t".join(cells[:7]), "\t".join(cells[7:])]
    t = parse_topology(_text([HEADER] + wrapped + TAIL))
    whole = parse_topology(FULL)
    assert t.links.equals(whole.links) and t.warnings == []


def test_gpu_rows_cut_before_the_nics_take_the_codes_from_the_nic_rows():
    cut = ["\t".join(r.split("\t")[:12]) for r in GPU_ROWS]  # GPU0..7 codes + NIC0..2 kept
    t = parse_topology(_text([HEADER] + cut + NIC_ROWS + TAIL))
    assert t.links.equals(parse_topology(FULL).links)
    assert any("NIC codes taken from the NIC rows" in w for w in t.warnings)


def test_nic_columns_cut_everywhere_are_dropped_not_guessed():
    cut = ["\t".join(r.split("\t")[:10]) for r in GPU_ROWS]
    t = parse_topology(_text([HEADER] + cut + TAIL))
    assert len(t.gpus) == 8 and t.nics.empty and t.interconnect == "NVLink"
    assert any("NIC column(s) dropped" in w for w in t.warnings)


def test_too_damaged_gives_a_warning_not_a_wrong_matrix():
    rows = list(GPU_ROWS)
    rows[3] = "\t".join(rows[3].split("\t")[:4])  # GPU3 cut inside the GPU columns
    t = parse_topology(_text([HEADER] + rows + NIC_ROWS + TAIL))
    assert t.gpus == [] and any("too damaged" in w and "GPU3" in w for w in t.warnings)
    t = parse_topology(_text([HEADER] + GPU_ROWS[:5] + TAIL))  # paste stops after GPU4
    assert t.gpus == [] and any("GPU5" in w for w in t.warnings)


def test_legend_naming_more_nics_than_the_header():
    header = "\t".join(HEADER.split("\t")[:9])  # GPU columns only
    legend = ["NIC Legend:", ""] + [f"  NIC{i}: mlx5_{i}" for i in range(4)]
    t = parse_topology(_text([header] + ["\t".join(r.split("\t")[:9]) for r in GPU_ROWS] + legend))
    assert len(t.gpus) == 8 and any("legend names 4 NICs" in w for w in t.warnings)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(FULL)), st.integers(min_value=0, max_value=len(FULL)))
def test_any_cut_is_whole_or_refused_never_a_smaller_machine(a, b):
    lo, hi = sorted((a, b))
    t = parse_topology(FULL[:lo] + FULL[hi:])
    assert len(t.gpus) in (0, 8)
    assert t.gpus == [] or t.gpu_links.equals(parse_topology(FULL).gpu_links)


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_never_raises(text):
    parse_topology(text)
