"""``snapshot``: files an engineer attached to an incident.

A folder holding any of:

* ``nodes.json`` — ``kubectl get nodes -o json``; ``pods.json`` — ``kubectl get pods -A -o json``
* ``metrics*.txt`` / ``*.prom`` — dcgm-exporter scrapes (``curl <pod-ip>:9400/metrics``), one per node or merged
* ``dmesg-<node>.txt`` (or ``dmesg.txt`` for a single node) — ``dmesg -T`` / ``journalctl -k``
* ``nvidia-smi-q-<node>.txt`` (or ``nvidia-smi-q.txt``) — ``nvidia-smi -q``

A scrape is one instant, so ``series`` has one point per GPU and every ``summary`` stat is that
value (``increase`` is NaN: a counter needs two samples).
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from gpulib.sources.dcgm import parse_scrape
from gpulib.core.errors import EmptyResult, SnapshotError
from gpulib.sources.base import Source


class SnapshotSource(Source):
    name = "snapshot"

    def __init__(self, path: str | Path | None = None, *, end: datetime | str | None = None, **_ignored):
        if path in (None, ""):
            raise SnapshotError("source='snapshot' needs a folder: pass snapshot_dir / --source snapshot DIR")
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise SnapshotError(f"snapshot folder {str(self.path)!r} does not exist or is not a folder")
        scrapes = sorted([*self.path.glob("metrics*.txt"), *self.path.glob("*.prom")])
        frames = []
        for f in scrapes:
            df = parse_scrape(f.read_text(errors="replace"))
            taken = datetime.fromtimestamp(f.stat().st_mtime, tz=timezone.utc)
            df["timestamp"] = df["timestamp"].fillna(pd.Timestamp(taken))
            df.attrs.clear()
            frames.append(df)
        self.scrape = pd.concat(frames, ignore_index=True) if frames else parse_scrape("")
        self.scrape_files = [f.name for f in scrapes]
        if end is None and not self.scrape.empty:
            end = self.scrape["timestamp"].max().to_pydatetime()
        super().__init__(end=end)

    def describe(self) -> str:
        return f"snapshot {self.path}"

    def _json(self, name: str) -> dict:
        f = self.path / name
        if not f.exists():
            raise SnapshotError(f"snapshot {str(self.path)!r} has no {name}")
        try:
            return json.loads(f.read_text())
        except json.JSONDecodeError as exc:
            raise SnapshotError(f"{f} is not valid JSON (line {exc.lineno}): is it `kubectl get ... -o json` output?") from exc

    def _metric(self, field: str, node, gpu) -> pd.DataFrame:
        if self.scrape.empty:
            raise EmptyResult(f"snapshot {str(self.path)!r} has no dcgm-exporter scrape (metrics*.txt or *.prom)", query=field)
        df = self.scrape[self.scrape["metric"] == field]
        if node:
            df = df[df["node"] == node]
        if gpu is not None:
            df = df[(df["gpu"] == gpu) | (df["uuid"] == gpu)]
        if df.empty:
            raise EmptyResult(f"{field} is not in the snapshot scrape(s) {', '.join(self.scrape_files)} "
                              f"for node={node or '*'} gpu={gpu or '*'}", query=field)
        return df

    def _series(self, field, window, node, gpu, step):
        return self._metric(field, node, gpu).drop(columns=["metric", "labels", "type"])

    def _summary(self, field, window, stat, node, gpu):
        df = self._metric(field, node, gpu).drop(columns=["metric", "labels", "type", "timestamp"])
        if stat == "increase":
            df = df.assign(value=float("nan"))
        return df

    def _nodes(self):
        from gpulib.kube.frames import nodes_frame
        return nodes_frame(self._json("nodes.json"))

    def _pods(self):
        from gpulib.kube.frames import pods_frame
        return pods_frame(self._json("pods.json"))

    def _operator_state(self, namespace):
        from gpulib.gpu_operator.state import state_from_objects
        if not (self.path / "daemonsets.json").exists() and not (self.path / "clusterpolicies.json").exists():
            return super()._operator_state(namespace)
        items = lambda name: self._json(name).get("items", []) if (self.path / name).exists() else []  # noqa: E731
        return state_from_objects({"daemonsets": items("daemonsets.json"), "cluster_policies": items("clusterpolicies.json"),
                                   "pods": items("pods.json"), "nodes": items("nodes.json")}, namespace)

    def known_nodes(self):
        if (self.path / "nodes.json").exists():
            return super().known_nodes()
        return sorted(set(self.scrape["node"]) - {""})

    def _inventory(self, window):
        fb = self.scrape[self.scrape["metric"] == "DCGM_FI_DEV_FB_USED"]
        return set(self.scrape["metric"]), list(fb["labels"])

    def _node_file(self, prefix: str, node: str) -> str | None:
        for name in (f"{prefix}-{node}.txt", f"{prefix}.txt"):
            f = self.path / name
            if f.exists():
                return f.read_text(errors="replace")
        return None

    def _kernel_log(self, node):
        return self._node_file("dmesg", node)

    def _smi_query(self, node):
        return self._node_file("nvidia-smi-q", node)
