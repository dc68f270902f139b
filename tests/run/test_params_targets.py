"""gpulib/run/params.py check_targets: the GPU index is checked against the node's GPU count where the node says it
(GFD's nvidia.com/gpu.count label), and a node without that label is not a crash (a snapshot's nodes.json of a node
without GPU Feature Discovery crashed ``gpuops run`` with "int() argument must be ... not 'NAType'")."""

from __future__ import annotations

import json

import pytest

from gpulib.core.errors import UnknownGPU
from gpulib.run.params import check_targets


def _snapshot(tmp_path, labels: dict) -> str:
    node = {"metadata": {"name": "node-a", "labels": labels}, "status": {"capacity": {"nvidia.com/gpu": "2"}}}
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}))
    (tmp_path / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    return str(tmp_path)


def test_a_node_without_the_gpu_count_label_is_not_a_crash(tmp_path):
    snap = _snapshot(tmp_path, {})
    check_targets({"source": "snapshot", "snapshot_dir": snap, "node": "node-a", "gpu": "1"})


def test_a_gpu_index_past_the_labelled_count_is_a_usage_error(tmp_path):
    snap = _snapshot(tmp_path, {"nvidia.com/gpu.count": "2"})
    check_targets({"source": "snapshot", "snapshot_dir": snap, "node": "node-a", "gpu": "1"})
    with pytest.raises(UnknownGPU, match="0..1"):
        check_targets({"source": "snapshot", "snapshot_dir": snap, "node": "node-a", "gpu": "2"})
