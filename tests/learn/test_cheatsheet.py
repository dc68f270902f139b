"""The troubleshooting cheat sheet (gpulib/data/learn/cheatsheet.csv) and its lesson name parsers that exist."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from gpulib.core.knowledge import load_table

ROOT = Path(__file__).resolve().parents[2]


def _resolve(dotted: str):
    mod, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(mod), name)


@pytest.mark.parametrize("row", load_table("learn/cheatsheet").to_dict("records"), ids=lambda r: r["command"])
def test_every_parsed_by_cell_names_a_parser_that_exists(row):
    cell = str(row["parsed_by"])
    assert "no parser" not in cell, f"{row['command']}: {cell}"
    name = cell.split(" (")[0].strip()  # "gpulib.kube.nodes_frame (on kubectl get nodes -o json)"
    assert callable(_resolve(name)), name


def test_dmon_and_dcgmi_diag_rows_name_their_parsers():
    cheat = load_table("learn/cheatsheet").set_index("command")
    assert cheat.loc["nvidia-smi dmon", "parsed_by"] == "gpulib.nvidia.parse_dmon"
    assert cheat.loc["dcgmi diag -r 3", "parsed_by"] == "gpulib.nvidia.parse_dcgmi_diag"


def test_the_troubleshooting_lesson_does_not_say_a_parser_is_missing():
    nb = json.loads((ROOT / "runbooks" / "learn" / "learn_troubleshooting.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"])
    assert "no parser" not in text
    assert "gpulib.nvidia.parse_dmon" in text and "gpulib.nvidia.parse_dcgmi_diag" in text
