"""nvidia-smi topo -m pasted with the NIC columns lost from the header (and the GPU rows) but the NIC rows kept:
the GPU-NIC links are read from the NIC rows (the matrix is symmetric) instead of reporting a node without NICs.

Input: tests/fixtures/nccl/topo_8xH100_tabs_nics.txt copied as a rectangle 9 cells wide (a narrow terminal or a
column selection): the header keeps GPU0..GPU7, each GPU row its 8 GPU codes, each NIC row its 8 GPU codes.
"""

from __future__ import annotations

from pathlib import Path

from gpulib.nvidia import parse_topology

ROOT = Path(__file__).resolve().parents[2]
FULL = (ROOT / "tests" / "fixtures" / "nccl" / "topo_8xH100_tabs_nics.txt").read_text()


def _rectangle(cells: int) -> str:
    out = []
    for ln in FULL.splitlines():
        parts = ln.split("\t")
        matrix_line = parts and (parts[0].startswith(("GPU", "NIC")) or parts[0].endswith("\x1b[4m") or parts[0] == "")
        out.append("\t".join(parts[:cells]) if matrix_line and len(parts) > 1 else ln)
    return "\n".join(out) + "\n"


def test_nic_links_are_read_from_the_nic_rows_when_the_header_lost_them():
    whole = parse_topology(FULL)
    t = parse_topology(_rectangle(9))
    assert len(t.gpus) == 8 and len(t.nics) == 10, (t.gpus, t.nics, t.warnings)
    assert list(t.nics["name"]) == list(whole.nics["name"])  # NIC Legend names survive below the matrix
    for g in range(8):
        assert t.nearest_nics(g) == whole.nearest_nics(g), g
        for n in whole.nics["nic"]:
            assert t.link(f"GPU{g}", n) == whole.link(f"GPU{g}", n)
    assert t.gpu_links.equals(whole.gpu_links)
    assert t.link("NIC3", "NIC4") == "N/A" and t.link("NIC3", "NIC3") == "X"  # NIC-to-NIC codes were cut
    assert any("header" in w and "NIC rows" in w for w in t.warnings), t.warnings


def test_a_header_without_nics_and_no_nic_rows_still_reads_a_nicless_node():
    lines = [ln for ln in _rectangle(9).splitlines() if not ln.startswith("NIC")]
    t = parse_topology("\n".join(lines) + "\n")
    assert len(t.gpus) == 8 and len(t.nics) == 0 and t.gpu_links.equals(parse_topology(FULL).gpu_links)
