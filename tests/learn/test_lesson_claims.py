"""Claims the onboarding lessons make, checked against the capture or source each one cites."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _markdown(lesson: str) -> str:
    nb = json.loads((ROOT / "runbooks" / "learn" / f"{lesson}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_training_lesson_says_gpus_of_one_pod_talk_p2p_as_the_capture_shows():
    """The 2x H200 NCCL log routes every channel between the two GPUs of one process group over P2P/CUMEM,
    not through shared memory; the lesson says so and cites that capture."""
    cap = "gpulib/data/captures/2xh200_nccl_info_from_stdout.log"
    channels = [ln for ln in (ROOT / cap).read_text().splitlines() if " via " in ln and "Channel" in ln]
    assert channels and all("via P2P/CUMEM" in ln for ln in channels)
    text = _markdown("learn_training")
    assert "through shared memory" not in text
    assert "P2P/CUMEM" in text and cap in text
