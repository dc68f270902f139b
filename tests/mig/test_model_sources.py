"""Every whole-memory figure of ``gpulib/data/mig/mig_gpu_models.csv`` that comes from an nvidia-smi output names where
that output can be read: the public thread that prints it (a github.com URL), or a capture of this repository
(``gpulib/data/captures/``) that holds the figure; never "nvidia-smi captures" with no location."""

from __future__ import annotations

import re

from gpulib.core.knowledge import data_path, load_table

_CAPTURE = re.compile(r"gpulib/data/captures/([\w.\-]+)")


def test_nvidia_smi_figures_cite_an_openable_output():
    rows = load_table("mig_gpu_models")
    vague = [
        r.gpu_model
        for r in rows.itertuples()
        if "nvidia-smi captures" in r.source
        or ("nvidia-smi" in r.source and "https://github.com/" not in r.source and not _CAPTURE.search(r.source))
    ]
    assert not vague, f"rows citing nvidia-smi output with no location: {vague}"


def test_a_cited_capture_holds_the_whole_memory_figure():
    rows = load_table("mig_gpu_models")
    checked = 0
    for r in rows.itertuples():
        for name in _CAPTURE.findall(r.source):
            text = data_path(f"captures/{name}").read_text()
            assert re.search(rf"Total\s*:\s*{int(r.whole_memory_mib)} MiB", text), (r.gpu_model, name)
            checked += 1
    assert checked, "at least one row cites a capture of this repository"
