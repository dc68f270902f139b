"""A fleet-scale scenario for :class:`gpulib.demo.simulator.FleetSimulator`: 128 nodes x 8 GPUs = 1,024 GPUs.

Deterministic (``seed``) mix of what a shared GPU cluster looks like, in the simulator's personas:

* training nodes: one 8-GPU PyTorchJob worker per node (``train``), a few spot nodes with checkpointing;
* inference nodes: Deployments of 1-2 GPU replicas (``infer`` big models, ``infer_small`` small ones);
* MIG inference nodes (A100-40GB, mixed 3g/2g/1g/1g layout) with small models on the instances;
* notebook / dev nodes: one-GPU StatefulSets (``dev``), some ``idle`` reservations, and ``zombie``
  notebooks that hold memory at 0 % activity since a few hours;
* unallocated GPUs, a pod using a GPU without a limit, and a non-GPU DaemonSet pod on every L4 node.

    from fleet_scenario import make_scenario
    sim = FleetSimulator(make_scenario(), end=END, scrape_interval="60s")

``python benchmarks/fleet_scenario.py`` prints the persona counts.
"""

from __future__ import annotations

import random
import string
from collections import Counter

#: node groups: (count, model, instance type, capacity type, role)
NODE_GROUPS = [
    (40, "H100-80GB", "p5.48xlarge", "on-demand", "train"),
    (8, "H100-80GB", "p5.48xlarge", "spot", "train"),
    (24, "H200", "p5en.48xlarge", "on-demand", "infer"),
    (24, "A100-80GB", "p4de.24xlarge", "on-demand", "infer"),
    (4, "A100-40GB", "p4d.24xlarge", "on-demand", "mig"),
    (12, "A100-80GB", "p4de.24xlarge", "on-demand", "dev"),
    (16, "L4", "g6.48xlarge", "spot", "infer_small"),
]
MIG_LAYOUT = ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]
INFER_APPS = [
    ("inference", "vllm-llama70b", 2, "infer"),
    ("inference", "vllm-mixtral", 2, "infer"),
    ("search", "embed-api", 1, "infer_small"),
    ("inference", "vllm-qwen7b", 1, "infer_small"),
    ("ads", "ranker", 1, "infer"),
    ("speech", "whisper-api", 1, "infer_small"),
]
SMALL_APPS = [
    ("media", "image-resize", "infer_small"),
    ("media", "video-tag", "infer_small"),
    ("search", "rerank", "infer_small"),
    ("ads", "ctr-scorer", "idle"),
]
TRAIN_NS = ["research", "research", "ads", "search", "llm-platform"]


def _suffix(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))


class _Names:
    """Deployment-style pod names (``owner-<rs hash>-<5 chars>``), one ReplicaSet hash per owner."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.hashes: dict[str, str] = {}

    def deployment_pod(self, owner: str) -> str:
        h = self.hashes.setdefault(owner, _suffix(self.rng, 10))
        return f"{owner}-{h}-{_suffix(self.rng, 5)}"


def _train_node(i: int, rng: random.Random) -> list[dict]:
    ns = TRAIN_NS[i % len(TRAIN_NS)]
    job = f"{ns[:3]}-train-{i:03d}"
    persona = "idle" if rng.random() < 0.06 else "train"  # a reserved node nobody trains on
    return [
        {
            "pod": f"{job}-worker-0",
            "namespace": ns,
            "owner_kind": "PyTorchJob",
            "owner": job,
            "gpus": list(range(8)),
            "persona": persona,
        }
    ]


def _infer_node(i: int, rng: random.Random, names: _Names) -> list[dict]:
    out, g = [], 0
    while g < 8:
        ns, app, width, persona = rng.choice(INFER_APPS)
        if g + width > 8:
            width = 8 - g
        r = rng.random()
        if r < 0.10:
            g += width  # unallocated
            continue
        if r < 0.18:
            persona = "idle"  # scaled-out replica with no traffic
        out.append(
            {
                "pod": names.deployment_pod(app),
                "namespace": ns,
                "owner_kind": "Deployment",
                "owner": app,
                "gpus": list(range(g, g + width)),
                "persona": persona,
            }
        )
        g += width
    return out


def _mig_node(i: int, rng: random.Random, names: _Names) -> list[dict]:
    out = []
    for g in range(8):
        for j in range(len(MIG_LAYOUT)):
            if rng.random() < 0.25:
                continue  # free instance
            app = rng.choice(["triton-bert", "whisper-api", "ocr-api"])
            ns = "speech" if app == "whisper-api" else "inference"
            persona = "idle" if rng.random() < 0.15 else "infer_small"
            out.append(
                {
                    "pod": names.deployment_pod(app),
                    "namespace": ns,
                    "owner_kind": "Deployment",
                    "owner": app,
                    "gpus": [g],
                    "mig": j,
                    "persona": persona,
                }
            )
    return out


def _dev_node(i: int, rng: random.Random) -> list[dict]:
    out = []
    for g in range(8):
        r = rng.random()
        user = f"user{i:02d}{g}"
        if r < 0.15:
            continue  # unallocated
        if r < 0.35:
            out.append(
                {
                    "pod": f"jupyter-{user}-0",
                    "namespace": "notebooks",
                    "owner_kind": "StatefulSet",
                    "owner": f"jupyter-{user}",
                    "gpus": [g],
                    "persona": "zombie",
                    "since": f"-{rng.randint(2, 60)}h",
                }
            )
        elif r < 0.55:
            out.append(
                {
                    "pod": f"dev-{user}-0",
                    "namespace": "notebooks",
                    "owner_kind": "StatefulSet",
                    "owner": f"dev-{user}",
                    "gpus": [g],
                    "persona": "idle",
                }
            )
        else:
            out.append(
                {
                    "pod": f"jupyter-{user}-0",
                    "namespace": "notebooks",
                    "owner_kind": "StatefulSet",
                    "owner": f"jupyter-{user}",
                    "gpus": [g],
                    "persona": "dev",
                }
            )
    return out


def _small_node(i: int, rng: random.Random, names: _Names) -> list[dict]:
    out = []
    for g in range(8):
        if rng.random() < 0.12:
            continue
        ns, app, persona = rng.choice(SMALL_APPS)
        out.append(
            {
                "pod": names.deployment_pod(app),
                "namespace": ns,
                "owner_kind": "Deployment",
                "owner": app,
                "gpus": [g],
                "persona": persona,
            }
        )
    if i == 0:  # a pod using a GPU it never requested (NVIDIA_VISIBLE_DEVICES=all), on a free GPU
        used = {g for w in out for g in w["gpus"]}
        free = [g for g in range(8) if g not in used] or [7]
        out = [w for w in out if free[0] not in w["gpus"]]
        out.append(
            {
                "pod": "legacy-transcoder-0",
                "namespace": "media",
                "owner_kind": "StatefulSet",
                "owner": "legacy-transcoder",
                "gpus": [free[0]],
                "persona": "dev",
                "no_gpu_limit": True,
            }
        )
    out.append(
        {
            "pod": f"fluent-bit-{_suffix(rng, 5)}",
            "namespace": "logging",
            "owner_kind": "DaemonSet",
            "owner": "fluent-bit",
            "gpus": [],
            "persona": "none",
        }
    )
    return out


def make_scenario(seed: int = 42, scrape_interval: str = "60s", nodes_total: int = 128) -> dict:
    """The 128-node, 1,024-GPU scenario dict (FleetSimulator's scenario format); ``nodes_total`` scales every node
    group by ``nodes_total / 128`` (1,024 nodes: 8,192 GPUs)."""
    rng = random.Random(seed)
    names = _Names(rng)
    nodes = []
    k = 0
    scale = nodes_total / sum(g[0] for g in NODE_GROUPS)
    for count, model, itype, capacity, role in NODE_GROUPS:
        for i in range(max(1, round(count * scale))):
            short = {"H100-80GB": "h100", "H200": "h200", "A100-80GB": "a100-80", "A100-40GB": "a100-40", "L4": "l4"}[
                model
            ]
            spec = {
                "name": f"{short}-{role.replace('_', '-')}-{k:03d}",
                "model": model,
                "gpus": 8,
                "instance_type": itype,
                "capacity_type": capacity,
            }
            if role == "train":
                spec["workloads"] = _train_node(k, rng)
            elif role == "infer":
                spec["workloads"] = _infer_node(k, rng, names)
            elif role == "mig":
                spec["mig"] = {"strategy": "mixed", "config": "a100-40gb-mixed-3-2-1-1", "layout": list(MIG_LAYOUT)}
                spec["workloads"] = _mig_node(k, rng, names)
            elif role == "dev":
                spec["workloads"] = _dev_node(k, rng)
            else:
                spec["workloads"] = _small_node(i, rng, names)
            nodes.append(spec)
            k += 1
    return {"scrape_interval": scrape_interval, "driver_version": "550.127.05", "nodes": nodes}


def describe(scenario: dict) -> str:
    gpus = sum(int(n["gpus"]) for n in scenario["nodes"])
    pods = [w for n in scenario["nodes"] for w in n.get("workloads", [])]
    personas = Counter(w["persona"] for w in pods)
    gpu_personas = Counter()
    for w in pods:
        gpu_personas[w["persona"]] += 0 if "mig" in w else len(w["gpus"])
    return (
        f"{len(scenario['nodes'])} nodes, {gpus} GPUs, {len(pods)} pods; pods per persona {dict(personas)}; "
        f"whole GPUs per persona {dict(gpu_personas)}"
    )


if __name__ == "__main__":
    print(describe(make_scenario()))
