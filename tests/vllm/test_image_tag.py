"""The vLLM image the deploy runbook prints is a release whose tag the row's source names (it was v0.6.3 with
"tag UNVERIFIED": a release from 2024)."""

from __future__ import annotations

import csv
import re

from tests.helpers.pinned import ROOT


def test_the_vllm_image_is_a_cited_release_not_an_unverified_tag():
    rows = {r["key"]: r for r in csv.DictReader(open(ROOT / "gpulib" / "data" / "vllm" / "vllm_deploy.csv"))}
    row = rows["vllm_image"]
    m = re.fullmatch(r"vllm/vllm-openai:v(\d+)\.(\d+)\.(\d+)", row["value"])
    assert m, row["value"]
    assert "UNVERIFIED" not in row["source"]
    tag = row["value"].split(":")[1]
    assert f"github.com/vllm-project/vllm/releases/tag/{tag}" in row["source"], row["source"]
    assert (int(m.group(1)), int(m.group(2))) >= (0, 29)  # the newest release found in the public record (2026-09)
