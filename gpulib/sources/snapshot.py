"""``snapshot``: files an engineer attached to an incident.

A folder holding any of:

* ``nodes.json`` — ``kubectl get nodes -o json``; ``pods.json`` — ``kubectl get pods -A -o json``
* ``metrics*.txt`` / ``*.prom`` — dcgm-exporter scrapes (``curl <pod-ip>:9400/metrics``), one per node or merged
* ``dmesg-<node>.txt`` (or ``dmesg.txt`` for a single node) — ``dmesg -T`` / ``journalctl -k``
* ``nvidia-smi-q-<node>.txt`` (or ``nvidia-smi-q.txt``) — ``nvidia-smi -q``
* ``nvidia-smi-nvlink-<node>.txt`` (or ``nvidia-smi-nvlink.txt``) — ``nvidia-smi nvlink -s`` (a passing
  ``dcgmi diag`` with every NVLink of the GPU down is not healthy: :func:`gpulib.xid.diag.diag_findings`)
* ``dcgmi-diag-<node>.json`` (or ``.txt``, or without ``-<node>``) — ``dcgmi diag -r N -j`` (or its table)
* ``dmon-<node>.txt`` (or ``dmon.txt``) — ``nvidia-smi dmon`` (any ``-s``, ``-o DT`` optional), read by
  :func:`gpulib.nvidia.dmon.parse_dmon`: on a node without dcgm-exporter its mapped columns
  (``gpulib/data/nvidia/dmon_columns.csv``: temperature, power, clocks, utilization, ...) answer ``series``
  and ``summary`` for that node. Without ``-o DT`` the last sample is as old as the file and the samples are
  dmon's default 1 s apart (``dmon -d``); GPU UUIDs and bus ids come from the node's ``nvidia-smi -q`` file.
* ``daemonsets.json`` — ``kubectl -n gpu-operator get ds -o json``; ``clusterpolicies.json`` —
  ``kubectl get clusterpolicies.nvidia.com -o json``
* ``resourceclaims.json`` — ``kubectl get resourceclaims -A -o json``; ``resourceslices.json`` — ``kubectl get
  resourceslices -o json``: which pod holds which GPU on a node served by a DRA driver (:mod:`gpulib.kube.dra`)
* the mig-parted config MIG Manager uses (``objects("mig-parted-config", namespace)``), either
  ``mig-parted-config.yaml`` — ``kubectl -n gpu-operator get configmap <name> -o jsonpath='{.data.config\\.yaml}'``
  — or ``configmaps.json`` — ``kubectl -n gpu-operator get configmap <name> -o json`` (one ConfigMap or a List);
  ``<name>`` is ClusterPolicy ``spec.migManager.config.name``, else ``default-mig-parted-config``

``gpuops collect NODE --apply`` (:mod:`gpulib.kube.collect`) writes these files for one node.

A scrape is one instant, so ``series`` has one point per GPU and every ``summary`` stat is that
value (``increase`` is NaN: a counter needs two samples). A dmon file has its samples: ``summary`` reduces them.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from gpulib.core.errors import EmptyResult, NotProvided, SnapshotError, SnapshotFileRefused, SourceError
from gpulib.core.files import MIB, read_regular
from gpulib.core.knowledge import settings
from gpulib.core.schema import SERIES_COLUMNS
from gpulib.kube.agents import history as agent_history
from gpulib.kube.events import REASONS, events_history
from gpulib.kube.frames import configmap_config_yaml, mig_configmap_where, mig_parted_configmap, nodes_frame, pods_frame
from gpulib.nvidia.dmon import parse_dmon
from gpulib.nvidia.smi import parse_query
from gpulib.sources.base import Source, mig_parted_object
from gpulib.sources.dcgm import canonical_scrape, parse_scrape
from gpulib.sources.history import NodeHistory
from gpulib.sources.reduce import summarise_frame

#: the bounds of what a snapshot folder's files may be (gpulib/data/sources/snapshot_limits.csv)
LIMITS = "snapshot_limits"


class SnapshotSource(Source):
    name = "snapshot"

    def __init__(self, path: str | Path | None = None, *, end: datetime | str | None = None, **_ignored):
        if path in (None, ""):
            if _ignored.get("snapshot_dir"):  # the notebook parameter: gpulib.inspection.choose_source maps it
                raise SnapshotError(
                    "connect('snapshot') takes the folder as path=, not snapshot_dir= (a run's snapshot_dir "
                    "parameter is mapped by gpulib.inspection.choose_source)"
                )
            raise SnapshotError("source='snapshot' needs a folder: pass snapshot_dir / --source snapshot DIR")
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise SnapshotError(f"snapshot folder {str(self.path)!r} does not exist or is not a folder")
        try:
            scrapes = sorted([*self.path.glob("metrics*.txt"), *self.path.glob("*.prom")])
        except OSError as exc:
            raise SnapshotError(f"snapshot folder {str(self.path)!r} cannot be listed: {exc.strerror}") from None
        frames = []
        #: node -> the metric names its exporter emitted (which generation served it: the preflight says)
        self.emitted: dict[str, set[str]] = {}
        for f in scrapes:
            data = self._read(f)
            df = parse_scrape(data)
            for node, part in df.groupby("node"):
                seen = self.emitted.setdefault(str(node), set())
                seen.update(part["metric"])
                seen.update(k for lab in part["labels"] for k in lab)
            df = canonical_scrape(df)  # the boundary: domain code sees canonical names and units only
            taken = datetime.fromtimestamp(f.stat().st_mtime, tz=timezone.utc)
            # a plain /metrics scrape has no timestamps: its samples are as old as the file
            df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True).fillna(pd.Timestamp(taken))
            df.attrs.clear()
            frames.append(df)
        self.scrape = pd.concat(frames, ignore_index=True) if frames else parse_scrape("")
        self.scrape_files = [f.name for f in scrapes]
        self._dmon_cache: dict[str, pd.DataFrame | None] = {}
        if end is None and not self.scrape.empty:
            end = self.scrape["timestamp"].max().to_pydatetime()
        elif end is None:  # no scrape: the newest dmon sample
            stamps = [
                df["timestamp"].max() for n in self._dmon_nodes() if (df := self._dmon(n)) is not None and len(df)
            ]
            end = max(stamps).to_pydatetime() if stamps and not pd.isna(max(stamps)) else None
        super().__init__(end=end)

    def describe(self) -> str:
        return f"snapshot {self.path}"

    def _read(self, f: Path) -> bytes:
        """The bytes of one snapshot file, read within bounds (:func:`gpulib.core.files.read_regular`): a
        SnapshotFileRefused naming it when it is a symlink leaving the folder, a FIFO, a device, a folder, larger than
        ``max_file_mb`` (``gpulib/data/sources/snapshot_limits.csv``), a symlink loop or unreadable."""
        limit = int(settings(LIMITS)["max_file_mb"]) * MIB
        return read_regular(
            f, root=self.path, max_bytes=limit, refuse=lambda why: SnapshotFileRefused(f"snapshot {why}")
        )

    def _json(self, name: str) -> dict:
        f = self.path / name
        if not f.exists() and not f.is_symlink():
            raise SnapshotError(f"snapshot {str(self.path)!r} has no {name}")
        data = self._read(f)
        try:
            doc = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise SnapshotError(
                f"{f} is not UTF-8 text (byte {exc.start}): is it `kubectl get ... -o json` output?"
            ) from None
        except json.JSONDecodeError as exc:
            raise SnapshotError(
                f"{f} is not valid JSON (line {exc.lineno}): is it `kubectl get ... -o json` output?"
            ) from None
        except RecursionError:
            raise SnapshotError(f"{f} is nested too deeply to be a Kubernetes list") from None
        if not isinstance(doc, dict):
            raise SnapshotError(
                f"{f} holds a JSON {type(doc).__name__}, not a Kubernetes list object "
                '(`kubectl get ... -o json` writes {{"kind": "...List", "items": [...]}})'
            )
        return doc

    def _frame(self, name: str, convert) -> pd.DataFrame:
        """``convert`` (nodes_frame / pods_frame) of ``name``; a malformed object becomes a SnapshotError naming the
        file."""
        doc = self._json(name)
        try:
            return convert(doc)
        except SnapshotError:
            raise
        except (SourceError, AttributeError, TypeError, KeyError, ValueError, RecursionError) as exc:
            raise SnapshotError(
                f"{self.path / name} holds an object that is not shaped like a Kubernetes "
                f"{name.split('.')[0][:-1]}: {str(exc).split(' (hint:')[0][:200] or type(exc).__name__}"
            ) from None

    def _metric(self, field: str, node, gpu) -> pd.DataFrame:
        if (
            self.scrape.empty
            or not (self.scrape["metric"].eq(field) & (self.scrape["node"].eq(node) if node else True)).any()
        ):
            dm = self._dmon_metric(field, node, gpu)
            if dm is not None:
                return dm
        if self.scrape.empty:
            raise EmptyResult(
                f"snapshot {str(self.path)!r} has no dcgm-exporter scrape (metrics*.txt or *.prom)"
                + (f" and its dmon file for {node} has no column for {field}" if self._dmon(node) is not None else ""),
                query=field,
            )
        df = self.scrape[self.scrape["metric"] == field]
        if node:
            df = df[df["node"] == node]
        if gpu is not None:
            df = df[(df["gpu"] == gpu) | (df["uuid"] == gpu)]
        if df.empty:
            raise EmptyResult(
                f"{field} is not in the snapshot scrape(s) {', '.join(self.scrape_files)} "
                f"for node={node or '*'} gpu={gpu or '*'}",
                query=field,
            )
        return df

    def _series(self, field, window, node, gpu, step):
        return self._metric(field, node, gpu).drop(columns=["metric", "labels", "type"])

    def _summary(self, field, window, stat, node, gpu):
        df = self._metric(field, node, gpu)
        if df.attrs.get("from") == "dmon":  # samples over time: reduced like PromQL's *_over_time
            return summarise_frame(df.drop(columns=["metric", "labels", "type"]), stat)
        df = df.drop(columns=["metric", "labels", "type", "timestamp"])
        if stat == "increase":
            df = df.assign(value=float("nan"))
        return df

    def _nodes(self):

        return self._frame("nodes.json", nodes_frame)

    def _pods(self):

        return self._frame("pods.json", pods_frame)

    #: the file of each object kind (``kubectl get <kind> -o json``)
    _OBJECT_FILES = {
        "pods": "pods.json",
        "nodes": "nodes.json",
        "daemonsets": "daemonsets.json",
        "clusterpolicies": "clusterpolicies.json",
        "gpuclusters": "gpuclusters.json",
        "resourceclaims": "resourceclaims.json",
        "resourceslices": "resourceslices.json",
    }

    def _objects(self, kind, namespace):
        if kind == "mig-parted-config":
            return [self._mig_parted_config(namespace)]
        name = self._OBJECT_FILES.get(kind)
        if name is None or not (self.path / name).exists():
            return super()._objects(kind, namespace)
        items = self._json(name).get("items", [])
        if namespace is None or kind in ("nodes", "clusterpolicies", "gpuclusters", "resourceslices"):
            return items
        return [o for o in items if ((o or {}).get("metadata") or {}).get("namespace", namespace) == namespace]

    def _mig_parted_config(self, namespace):

        policies = (
            self._json("clusterpolicies.json").get("items", []) if (self.path / "clusterpolicies.json").exists() else []
        )
        name, custom = mig_parted_configmap(policies)
        f = self.path / "mig-parted-config.yaml"
        if f.exists() or f.is_symlink():
            text = self._read(f).decode("utf-8", errors="replace")
            return mig_parted_object(
                text, name, namespace, f"{f} (saved from {mig_configmap_where(namespace, name, custom)})"
            )
        if not (self.path / "configmaps.json").exists():
            return super()._objects("mig-parted-config", namespace)[0]
        doc = self._json("configmaps.json")
        items = doc.get("items", []) if "items" in doc else [doc]
        for cm in items:
            meta = (cm or {}).get("metadata") or {} if isinstance(cm, dict) else {}
            if meta.get("name") == name and meta.get("namespace", namespace) == namespace:
                text = configmap_config_yaml(cm)
                if text is None:
                    raise SnapshotError(
                        f"{self.path / 'configmaps.json'}: ConfigMap {namespace}/{name} has no config.yaml key"
                    )
                return mig_parted_object(
                    text,
                    name,
                    namespace,
                    f"{self.path / 'configmaps.json'}: {mig_configmap_where(namespace, name, custom)}",
                )

        raise NotProvided(
            f"{self.path / 'configmaps.json'} holds no ConfigMap {namespace}/{name} ({self.describe()})",
            hint=f"save it with `kubectl -n {namespace} get configmap {name} -o json > configmaps.json`",
        )

    def known_nodes(self):
        if (self.path / "nodes.json").exists() or (self.path / "nodes.json").is_symlink():
            return super().known_nodes()
        return sorted((set(self.scrape["node"]) | set(self._dmon_nodes())) - {""})

    def _node_names(self, window):
        return {node: names for node, names in self.emitted.items() if node}

    def _inventory(self, window):
        fb = self.scrape[self.scrape["metric"] == "DCGM_FI_DEV_FB_USED"]
        return set(self.scrape["metric"]), list(fb["labels"])

    def _node_file(self, prefix: str, node: str, exts: tuple[str, ...] = (".txt",)) -> str | None:
        for name in [f"{prefix}-{node}{e}" for e in exts] + [f"{prefix}{e}" for e in exts]:
            f = self.path / name
            if f.exists() or f.is_symlink():
                return self._read(f).decode("utf-8", errors="replace")
        return None

    # ---- nvidia-smi dmon ------------------------------------------------------------------
    def _dmon_nodes(self) -> list[str]:
        """Nodes named by ``dmon-<node>.txt`` files."""
        return sorted(f.name[len("dmon-") : -len(".txt")] for f in self.path.glob("dmon-*.txt"))

    def _dmon(self, node: str | None) -> pd.DataFrame | None:
        """The node's ``nvidia-smi dmon`` file parsed (:func:`gpulib.nvidia.dmon.parse_dmon`), or None."""
        if not node:
            return None
        if node not in self._dmon_cache:
            df = None
            for name in (f"dmon-{node}.txt", "dmon.txt"):
                f = self.path / name
                if f.exists() or f.is_symlink():
                    text = self._read(f).decode("utf-8", errors="replace")
                    df = parse_dmon(text, node=node)
                    if len(df) and df["timestamp"].isna().all():  # no -o DT: the last sample is as old as the file
                        taken = pd.Timestamp(f.stat().st_mtime, unit="s", tz="UTC")
                        df = parse_dmon(text, node=node, start=taken - pd.Timedelta(seconds=float(df["sample"].max())))
                    df = self._dmon_ids(df, node)
                    df.attrs["file"] = name
                    break
            self._dmon_cache[node] = df
        return self._dmon_cache[node]

    def _dmon_ids(self, df: pd.DataFrame, node: str) -> pd.DataFrame:
        """UUID and PCI bus id of each dmon GPU index, from the node's ``nvidia-smi -q`` file when there is one."""
        text = self._smi_query(node)
        if text is None or df.empty:
            return df

        smi = parse_query(text)
        smi = smi[smi["index"].notna()]
        ids = {str(int(r["index"])): r for r in smi.to_dict("records")}
        df = df.copy()
        df["uuid"] = [ids[g]["uuid"] if g in ids and not u else u for g, u in zip(df["gpu"], df["uuid"])]
        df["pci_bus_id"] = [ids[g]["pci_bus_id"] if g in ids else p for g, p in zip(df["gpu"], df["pci_bus_id"])]
        df["model"] = [ids[g]["name"] if g in ids else m for g, m in zip(df["gpu"], df["model"])]
        return df

    def _dmon_metric(self, field: str, node, gpu) -> pd.DataFrame | None:
        """Rows of ``field`` from the node's dmon file (None: no file or no column mapped to ``field``)."""
        df = self._dmon(node)
        if df is None:
            return None
        part = df[df["field"] == field]
        if gpu is not None:
            part = part[(part["gpu"] == gpu) | (part["uuid"] == gpu)]
        part = part.dropna(subset=["value", "timestamp"])
        if part.empty:
            return None
        out = part[SERIES_COLUMNS].assign(metric=field, labels=None, type="gauge").reset_index(drop=True)
        out.attrs["from"] = "dmon"
        return out

    def _node_history(self, window, node):
        """Node and pod events of ``events.json`` and, from the scrape, the last XID each GPU reported (at the
        scrape's time: a scrape holds no history of its own)."""

        k8s = sorted({sig for sig, _ in REASONS.values()})
        read, missing, frames = {}, {}, []
        if (self.path / "events.json").exists():
            pods = self.pods()
            where = {f"{r.namespace}/{r.pod}": r.node for r in pods.itertuples()} if len(pods) else {}
            frames.append(events_history(self._json("events.json"), where))
            read.update({s: "events.json (kubectl get events -A -o json; the recent past only)" for s in k8s})
        else:
            missing.update({s: f"no events.json in {self.path}" for s in k8s})
        xid = self.scrape[self.scrape["metric"] == "DCGM_FI_DEV_XID_ERRORS"] if len(self.scrape) else self.scrape
        if len(xid):
            hit = xid[xid["value"] > 0]
            frames.append(
                pd.DataFrame(
                    {
                        "time": hit["timestamp"],
                        "end": pd.NaT,
                        "node": hit["node"],
                        "gpu": hit["gpu"],
                        "signal": "xid",
                        "code": hit["value"].astype(int).astype(str),
                        "value": 1.0,
                        "detail": "last XID in the scrape",
                        "origin": "DCGM_FI_DEV_XID_ERRORS",
                    }
                )
            )
            read["xid"] = "DCGM_FI_DEV_XID_ERRORS in " + ", ".join(self.scrape_files)
        else:
            missing["xid"] = "no DCGM_FI_DEV_XID_ERRORS in the snapshot's scrapes"
        if (self.path / "nodes.json").exists():  # other agents' GPU conditions and Events (gpulib.kube.agents)
            opt = {
                f: self._json(f) if (self.path / f).exists() else None for f in ("events.json", "computedomains.json")
            }
            frames.append(agent_history(self._json("nodes.json"), opt["events.json"], opt["computedomains.json"]))
            read["agent_condition"] = "nodes.json conditions and events.json of NVSentinel, EKS, AKS, GCM, Crusoe"
        events = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return NodeHistory(events, read, missing)

    def _kernel_log(self, node):
        return self._node_file("dmesg", node)

    def _smi_query(self, node):
        return self._node_file("nvidia-smi-q", node)

    def _nvlink_status(self, node):
        return self._node_file("nvidia-smi-nvlink", node)

    def _diag_report(self, node):
        return self._node_file("dcgmi-diag", node, (".json", ".txt"))
