"""learn_sharing.ipynb does not claim that MIG isolates faults per instance: NVIDIA's MIG User Guide describes
separate, isolated paths through the memory system, and a fault of the whole GPU (XID 79) stops every instance."""

from __future__ import annotations

import json

from tests.helpers.pinned import ROOT


def test_learn_sharing_says_mig_partitions_the_memory_system_not_that_it_isolates_faults_per_instance():
    nb = json.loads((ROOT / "runbooks" / "learn" / "learn_sharing.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "fault isolation per instance" not in text
    assert "isolated paths through the memory system" in text and "stops every instance" in text
