"""``kubectl get nodes/pods -o json`` documents of the demo fleet (GFD labels, capacity, GPU requests) and the
``dmesg`` text with the ``NVRM: Xid`` lines of its injected incidents.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from gpulib.core.knowledge import load_table
from gpulib.demo.dra_objects import is_dra, pod_parts
from gpulib.demo.scenario import DAY, _rel


class FleetObjects:
    """Kubernetes objects and kernel log of the simulated fleet, as a mixin of
    :class:`gpulib.demo.simulator.FleetSimulator` (it uses the fleet's ``node_specs``, ``devices``, ``_models``,
    ``_uuid``, ``end``/``end_s``, ``driver_version`` and the metrics' ``xid_events``)."""

    # ------------------------------------------------------------------ Kubernetes objects
    def nodes_json(self) -> dict:
        """``kubectl get nodes -o json`` for the fleet (GFD labels, capacity, taints)."""
        items = []
        created = (self.end - timedelta(days=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for spec in self.node_specs:
            m = self._models[spec["model"]]
            n = int(spec["gpus"])
            mig = spec.get("mig") or {}
            labels = {
                "kubernetes.io/hostname": spec["name"],
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": spec.get("instance_type", ""),
                "feature.node.kubernetes.io/pci-10de.present": "true",
                # NFD system/kernel labels (the GPU Operator picks the driver image from them)
                "feature.node.kubernetes.io/kernel-version.full": "5.15.0-1063-aws",
                "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": m["gfd_product"],
                "nvidia.com/gpu.count": str(n),
                "nvidia.com/gpu.memory": str(int(m["memory_mib"])),
                "nvidia.com/cuda.driver.major": self.driver_version.split(".")[0],
                "nvidia.com/gpu.deploy.dcgm-exporter": "true",
                "nvidia.com/gpu.deploy.device-plugin": "true",
                "nvidia.com/mig.capable": "true" if m["mig_capable"] == "yes" else "false",
                "karpenter.sh/capacity-type": spec.get("capacity_type", "on-demand"),
            }
            capacity = {"cpu": "96", "memory": "1056763524Ki", "pods": "110"}
            if mig:
                labels.update(
                    {
                        "nvidia.com/mig.strategy": mig.get("strategy", "mixed"),
                        "nvidia.com/mig.config": mig.get("config", "custom"),
                        "nvidia.com/mig.config.state": "success",
                    }
                )
                counts: dict[str, int] = {}
                for prof in mig.get("layout", []):
                    counts[f"nvidia.com/mig-{prof}"] = counts.get(f"nvidia.com/mig-{prof}", 0) + n
                capacity.update({k: str(v) for k, v in counts.items()})
                capacity["nvidia.com/gpu"] = "0"
            else:
                labels["nvidia.com/mig.config"] = "all-disabled"
                capacity["nvidia.com/gpu"] = str(n)
            if is_dra(spec):  # GPUs through NVIDIA's DRA driver: no device plugin, no nvidia.com/gpu
                labels["nvidia.com/gpu.deploy.device-plugin"] = "false"
                del capacity["nvidia.com/gpu"]
            items.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": spec["name"],
                        "labels": labels,
                        "creationTimestamp": created,
                        "uid": self._uuid("node", spec["name"]),
                    },
                    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
                    "status": {
                        "capacity": capacity,
                        "allocatable": dict(capacity),
                        "conditions": [
                            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": created}
                        ],
                        "nodeInfo": {
                            "kernelVersion": "5.15.0-1063-aws",
                            "osImage": "Ubuntu 22.04.4 LTS",
                            "containerRuntimeVersion": "containerd://1.7.12",
                            "kubeletVersion": "v1.29.3",
                            "architecture": "amd64",
                            "operatingSystem": "linux",
                        },
                    },
                }
            )
        return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}

    def pods_json(self) -> dict:
        """``kubectl get pods -A -o json`` for the fleet's workloads."""
        owners = load_table("owner_kinds")  # an ownerReference's apiVersion is its owner kind's group/version
        api_of = dict(zip(owners["kind"], owners["api_version"]))
        items = []
        for spec in self.node_specs:
            layout = (spec.get("mig") or {}).get("layout", [])
            for w in spec.get("workloads", []):
                gpus = list(w.get("gpus", []))
                res: dict[str, str] = {}
                dra = is_dra(spec) and bool(gpus) and w.get("persona") != "none"
                if w.get("persona") != "none" and not w.get("no_gpu_limit") and not dra:
                    if "mig" in w:
                        res[f"nvidia.com/mig-{layout[int(w['mig'])]}"] = "1"
                    elif gpus:
                        res["nvidia.com/gpu"] = str(len(gpus))
                env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}] if w.get("no_gpu_limit") else []
                since = _rel(w.get("since"), self.end_s) or (self.end_s - 2 * DAY)
                start = datetime.fromtimestamp(
                    min(since, self.end_s - 2 * DAY) if w.get("persona") != "zombie" else since - 3600, tz=timezone.utc
                ).strftime("%Y-%m-%dT%H:%M:%SZ")
                owner_kind, owner = w.get("owner_kind", "ReplicaSet"), w.get("owner", w["pod"])
                ref_kind, ref_name = owner_kind, owner
                if owner_kind == "Deployment":
                    ref_kind, ref_name = "ReplicaSet", w["pod"].rsplit("-", 1)[0]
                labels = {"app.kubernetes.io/name": owner, "team": w["namespace"]}
                if owner_kind == "Deployment":
                    labels["pod-template-hash"] = ref_name.rsplit("-", 1)[1]
                container = {
                    "name": w.get("container", owner.split("-")[0]),
                    "image": f"registry.example.com/{owner}:1.0",
                    "resources": {
                        "requests": {"cpu": "4", "memory": "32Gi", **res},
                        "limits": {"memory": "32Gi", **res},
                    },
                }
                if env:
                    container["env"] = env
                extra_spec, extra_status = {}, {}
                if dra:
                    extra_spec, claims, extra_status = pod_parts(self, spec, w, container["name"])
                    container["resources"].update(claims)
                items.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": w["pod"],
                            "namespace": w["namespace"],
                            "labels": labels,
                            "uid": self._uuid("pod", w["namespace"], w["pod"]),
                            "creationTimestamp": start,
                            "ownerReferences": [
                                {
                                    "apiVersion": api_of[ref_kind],
                                    "kind": ref_kind,
                                    "name": ref_name,
                                    "controller": True,
                                    "uid": self._uuid("owner", ref_name),
                                }
                            ],
                        },
                        "spec": {
                            "nodeName": spec["name"],
                            "containers": [container],
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                            "nodeSelector": {"nvidia.com/gpu.product": self._models[spec["model"]]["gfd_product"]}
                            if gpus
                            else {},
                            **extra_spec,
                        },
                        "status": {
                            "phase": "Running",
                            "startTime": start,
                            "hostIP": "10.0.0.1",
                            "containerStatuses": [
                                {
                                    "name": container["name"],
                                    "ready": True,
                                    "restartCount": 0,
                                    "state": {"running": {"startedAt": start}},
                                    **(
                                        {"allocatedResourcesStatus": extra_status["allocatedResourcesStatus"]}
                                        if extra_status.get("allocatedResourcesStatus")
                                        else {}
                                    ),
                                }
                            ],
                            **(
                                {"resourceClaimStatuses": extra_status["resourceClaimStatuses"]} if extra_status else {}
                            ),
                        },
                    }
                )
        return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}

    def kernel_log(self, node: str) -> str:
        """``dmesg -T``-style kernel log of a node, with the NVRM Xid lines its incidents produced."""
        if node not in {s["name"] for s in self.node_specs}:
            return ""
        boot = self.end_s - 3 * DAY
        lines = []
        for d in self.devices:
            if d.node != node or d.is_instance:
                continue
            bus = d.pci_bus_id[4:].lower()  # 0000:3b:00.0 style; NVRM prints domain:bus:device
            for at, code in self.xid_events(d):
                stamp = datetime.fromtimestamp(at, tz=timezone.utc).strftime("%a %b %d %H:%M:%S %Y")
                msg = {
                    79: "GPU has fallen off the bus.",
                    48: (
                        "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
                        "partition 3, subpartition 0."
                    ),
                    64: "Row remapper failure for bank 7 row 0x1f2a, recording to InfoROM failed",
                    13: "Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address",
                }.get(code, "Unknown error")
                pid = "" if code == 79 else f"pid={4000 + d.index}, name=python3, "
                lines.append(f"[{stamp}] NVRM: Xid (PCI:{bus[:10]}): {code}, {pid}{msg}")
        header = [
            (
                f"[{datetime.fromtimestamp(boot, tz=timezone.utc).strftime('%a %b %d %H:%M:%S %Y')}] Linux "
                "version 5.15.0-1063-aws"
            ),
            (
                f"[{datetime.fromtimestamp(boot + 20, tz=timezone.utc).strftime('%a %b %d %H:%M:%S %Y')}] "
                "nvidia: loading out-of-tree module taints kernel."
            ),
            (
                f"[{datetime.fromtimestamp(boot + 21, tz=timezone.utc).strftime('%a %b %d %H:%M:%S %Y')}] NVRM: "
                f"loading NVIDIA UNIX x86_64 Kernel Module  {self.driver_version}"
            ),
        ]
        return (
            "\n".join(header + sorted(lines, key=lambda s: datetime.strptime(s[1:25], "%a %b %d %H:%M:%S %Y"))) + "\n"
        )
