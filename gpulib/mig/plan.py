"""MIG layout planner: the smallest profile per workload, packed into the fewest GPUs (sizing from observed usage is
:mod:`gpulib.mig.sizing`).

``plan_layout(workloads, inventory)`` picks the smallest profile per workload and packs the instances into the
fewest GPUs. Formulation (exact, a cutting-stock MILP solved by HiGHS through ``scipy.optimize.milp``):
one integer variable per (GPU model, valid layout) = how many GPUs run that layout (every valid multiset
of profiles is enumerated exhaustively by :func:`gpulib.mig.geometry.valid_layouts`: 19 on A30, 127 on 7-slice
GPUs), one per (workload, GPU model) = replicas placed there; instances of each profile must equal the
replicas mapped to it; GPUs per model are capped by the inventory. The objective is GPUs (or $/h when
prices are given) plus a tiny term for stranded memory slots (fragmentation). The model size does not
grow with the number of GPUs, so it stays exact at fleet scale; if HiGHS stops at the time limit the
reported ``mip_gap`` says how far from optimal the answer can be, and first-fit-decreasing
(:func:`plan_ffd`) is used instead when no MILP solution is found or when it beats the time-limited incumbent.
Workloads that get the same profile on every model are merged into one class first (they are interchangeable),
so the MILP's size depends on the profile mix, not on the number of workloads.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.mig.catalog import device_memory_gib, get_profile, is_mig_capable, profile_objects, resolve_gpu_model
from gpulib.mig.config import mig_parted_config, mig_parted_selector
from gpulib.mig.geometry import place, stranded_slots, valid_layouts
from gpulib.mig.parted_merge import safe_config
from gpulib.mig.resources import pod_resources, single_strategy_ok

FRAGMENTATION_WEIGHT = 1e-3  # per stranded slot: breaks ties between equal GPU counts, never trades a GPU


@dataclass
class Workload:
    """A workload to place: memory and compute need per replica. ``isolation='whole'`` asks for whole GPUs;
    ``profile`` pins a MIG profile name."""

    name: str
    memory_gib: float
    compute_slices: int = 1
    replicas: int = 1
    isolation: str = "mig"
    profile: str | None = None

    def __post_init__(self):
        if self.memory_gib <= 0 or self.replicas < 1 or self.compute_slices < 1:
            raise InvalidParameter(
                f"workload {self.name!r}: memory_gib > 0, replicas >= 1 and compute_slices >= 1 "
                f"required (got {self.memory_gib}, {self.replicas}, {self.compute_slices})"
            )
        if self.isolation not in ("mig", "whole"):
            raise InvalidParameter(
                f"workload {self.name!r}: isolation must be 'mig' or 'whole', got {self.isolation!r}"
            )


def choose_profile(gpu_model: str, memory_gib: float, compute_slices: int = 1, headroom: float = 0.0):
    """Smallest profile (memory slots, then compute, then memory) with memory >= need x (1 + headroom) and
    enough compute slices; +me profiles are skipped. None when nothing fits."""
    need = memory_gib * (1 + headroom)
    cands = [
        p
        for p in profile_objects(gpu_model)
        if not p.media_ext and p.memory_gib >= need and p.compute_slices >= compute_slices
    ]
    return min(cands, key=lambda p: (p.memory_slots, p.compute_slices, p.memory_gib)) if cands else None


@dataclass
class GpuLayout:
    gpu: str
    model: str
    node: str
    index: int
    layout: dict[str, int]
    instances: list[dict] = field(default_factory=list)  # {profile, start, size, workload}


@dataclass
class Plan:
    gpus: list[GpuLayout]
    whole_gpus: list[dict]
    unplaced: list[str]
    baseline_gpus: int
    status: str
    optimal: bool
    mip_gap: float
    solver: str
    prices: dict[str, float] = field(default_factory=dict)
    #: GPUs per node as the planner laid out the inventory (node -> count); GPUs of a node that get no MIG
    #: layout stay whole and are listed with ``mig-enabled: false`` in the node's config
    node_gpus: dict[str, int] = field(default_factory=dict)

    @property
    def gpus_used(self) -> int:
        return len(self.gpus) + sum(w["gpus"] for w in self.whole_gpus)

    @property
    def gpus_saved(self) -> int:
        return self.baseline_gpus - self.gpus_used

    def layouts(self) -> pd.DataFrame:
        rows = [
            {
                "gpu": g.gpu,
                "model": g.model,
                "node": g.node,
                "index": g.index,
                "profile": i["profile"],
                "start": i["start"],
                "size": i["size"],
                "workload": i["workload"],
            }
            for g in self.gpus
            for i in g.instances
        ]
        return pd.DataFrame(rows, columns=["gpu", "model", "node", "index", "profile", "start", "size", "workload"])

    def node_configs(self) -> dict[str, tuple[str, list[dict]]]:
        """node -> (config name, mig-parted selectors); identical node configs share one name.

        On a partly-MIG node the GPUs that stay whole get a last selector ``{devices: [...], mig-enabled:
        false}`` (``NVIDIA/mig-parted: deployments/systemd/config-default.yaml`` @ bd7160f4), so applying the config
        also turns MIG off where the plan wants whole GPUs.
        """
        by_node: dict[str, list[GpuLayout]] = defaultdict(list)
        for g in self.gpus:
            by_node[g.node].append(g)
        names: dict[str, str] = {}
        out = {}
        for node, gs in sorted(by_node.items()):
            groups: dict[tuple, list[int]] = defaultdict(list)
            for g in gs:
                groups[tuple(sorted(g.layout.items()))].append(g.index)
            sels = [
                mig_parted_selector(dict(k), devices=sorted(v)) for k, v in sorted(groups.items(), key=lambda kv: kv[1])
            ]
            whole = sorted(set(range(self.node_gpus.get(node, 0))) - {g.index for g in gs})
            if whole:
                sels.append(mig_parted_selector(None, devices=whole))
            key = repr(sels)
            if key not in names:
                names[key] = f"gpuops-plan-{len(names) + 1}"
            out[node] = (names[key], sels)
        return out

    def mig_parted_config(self) -> str:
        cfgs = {name: sels for name, sels in self.node_configs().values()}
        return mig_parted_config(cfgs)

    def safe_mig_parted_config(self, nodes: pd.DataFrame | None, base: str | dict | None = None) -> str:
        """The plan's configs merged into the configs in use (``base``: the cluster's config.yaml; None:
        mig-parted's default set), schema-checked; refuses (MigConfigRefused, with the reason) to drop a
        config name a node label references (gpulib.mig.parted_merge)."""
        cfgs = {name: sels for name, sels in self.node_configs().values()}
        labels = {node: name for node, (name, _) in self.node_configs().items()}
        return safe_config(cfgs, nodes, base, labels)

    def label_commands(self) -> list[str]:
        return [
            f"kubectl label node {node} nvidia.com/mig.config={name} --overwrite"
            for node, (name, _) in self.node_configs().items()
        ]

    def pod_requests(self, strategy: str = "mixed") -> dict[str, dict]:
        """workload -> container ``resources`` under the strategy; under ``single`` only when every node that
        runs it is homogeneous (else an ``error`` entry says to use mixed)."""
        out = {}
        node_layouts: dict[str, list[dict]] = defaultdict(list)
        for g in self.gpus:
            node_layouts[g.node].append(g.layout)
        for g in self.gpus:
            for i in g.instances:
                if i["workload"] in out:
                    continue
                if strategy == "single":
                    ok, why = single_strategy_ok(node_layouts[g.node])
                    out[i["workload"]] = pod_resources(i["profile"], "single") if ok else {"error": why}
                else:
                    out[i["workload"]] = pod_resources(i["profile"], strategy)
        for w in self.whole_gpus:
            out[w["workload"]] = {
                "requests": {"nvidia.com/gpu": w["gpus_per_replica"]},
                "limits": {"nvidia.com/gpu": w["gpus_per_replica"]},
            }
        return out


def _expand_inventory(inventory: dict[str, int], nodes: dict[str, list[str]] | None, gpus_per_node: int):
    inv = {}
    for m, n in inventory.items():
        if int(n) < 0:
            raise InvalidParameter(f"inventory count for {m} must be >= 0, got {n}")
        inv[resolve_gpu_model(m)] = int(n)
    node_names = {resolve_gpu_model(k): v for k, v in (nodes or {}).items()}
    return inv, node_names


def _node_gpu_counts(inv: dict[str, int], models: list[str], node_names: dict, gpus_per_node: int) -> dict[str, int]:
    """node -> GPUs it holds when the inventory of each MIG-capable model is laid out ``gpus_per_node`` per node."""
    counts: Counter = Counter()
    for m in models:
        for k in range(inv[m]):
            counts[_node_of(m, k, node_names, gpus_per_node)[0]] += 1
    return dict(counts)


def plan_layout(
    workloads: list[Workload],
    inventory: dict[str, int],
    *,
    headroom: float = 0.0,
    time_limit: float = 30.0,
    prices: dict[str, float] | None = None,
    nodes: dict[str, list[str]] | None = None,
    gpus_per_node: int = 8,
) -> Plan:
    """Choose a profile per workload and pack the instances into the fewest GPUs of ``inventory``
    (``{gpu_model: count}``); ``prices`` ($/GPU-hour per model) turns the objective into cost."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    inv, node_names = _expand_inventory(inventory, nodes, gpus_per_node)
    models = [m for m in inv if inv[m] > 0 and is_mig_capable(m)]
    whole, unplaced, groups = [], [], []
    for w in workloads:
        if w.isolation == "whole" or not any(_profile_for(w, m, headroom) for m in models):
            g = max(1, math.ceil(w.memory_gib * (1 + headroom) / max(device_memory_gib(m) for m in inv)))
            whole.append({"workload": w.name, "gpus": g * w.replicas, "gpus_per_replica": g})
        else:
            groups.append(w)
    mig_workloads = groups
    groups, members = _classes(groups, models, headroom)
    layouts = {m: valid_layouts(m) for m in models}
    var_index: list[tuple] = []
    for m in models:
        var_index += [("x", m, i) for i in range(len(layouts[m]))]
    for gi, w in enumerate(groups):
        var_index += [("y", m, gi) for m in models if _profile_for(w, m, headroom)]
        var_index.append(("u", None, gi))  # replicas left unplaced (heavily penalised, keeps the MILP feasible)
    col = {v: k for k, v in enumerate(var_index)}
    n = len(var_index)
    cost = np.zeros(n)
    unplaced_cost = 10.0 * max([(prices or {}).get(m, 1.0) for m in models] + [1.0])
    for (kind, m, i), k in col.items():
        if kind == "u":
            cost[k] = unplaced_cost
        if kind == "x":
            p = place(m, layouts[m][i])
            cost[k] = (prices or {}).get(m, 1.0) * (1 + FRAGMENTATION_WEIGHT * stranded_slots(p))
    ri, ci, vals, lo, hi = [], [], [], [], []  # sparse constraint matrix (one row per add)

    def add(coefs: dict[int, float], low: float, high: float):
        r = len(lo)
        for k, v in coefs.items():
            ri.append(r), ci.append(k), vals.append(v)
        lo.append(low), hi.append(high)

    for gi, w in enumerate(groups):
        add(
            {col[("y", m, gi)]: 1 for m in models if ("y", m, gi) in col} | {col[("u", None, gi)]: 1},
            w.replicas,
            w.replicas,
        )
    for m in models:
        for pname in {p.name for p in profile_objects(m)}:
            coefs = {
                col[("y", m, gi)]: 1
                for gi, w in enumerate(groups)
                if ("y", m, gi) in col and _profile_for(w, m, headroom).name == pname
            }
            for i, lay in enumerate(layouts[m]):
                if lay.get(pname):
                    coefs[col[("x", m, i)]] = coefs.get(col[("x", m, i)], 0) - lay[pname]
            if coefs:
                add(coefs, 0, 0)
        add({col[("x", m, i)]: 1 for i in range(len(layouts[m]))}, 0, inv[m])
    status, gap, optimal, solver = "nothing to place", 0.0, True, "none"
    counts: dict[tuple, int] = {}
    if groups:
        a = coo_array((vals, (ri, ci)), shape=(len(lo), n)).tocsr()
        res = milp(
            cost,
            constraints=LinearConstraint(a, lo, hi),
            integrality=np.ones(n),
            bounds=Bounds(0, np.inf),
            options={"time_limit": time_limit, "disp": False},
        )
        solver = "scipy.optimize.milp (HiGHS)"
        baseline = sum(w.replicas for w in workloads) + sum(
            x["gpus"] - x["gpus"] // max(x["gpus_per_replica"], 1) for x in whole
        )
        if res.x is None:
            ffd = plan_ffd(mig_workloads, inv, headroom=headroom, nodes=nodes, gpus_per_node=gpus_per_node)
            ffd.whole_gpus += whole
            ffd.baseline_gpus = baseline
            ffd.status = f"MILP found no solution ({res.message}); first-fit-decreasing used"
            return ffd
        counts = {v: int(round(res.x[k])) for v, k in col.items() if round(res.x[k]) > 0}
        optimal = res.status == 0
        gap = float(getattr(res, "mip_gap", 0.0) or 0.0)
        status = res.message
    assigned: dict[tuple, list[str]] = {}
    for gi, names in enumerate(members):
        at = 0
        for m in models:
            c = counts.get(("y", m, gi), 0)
            assigned[(m, gi)], at = names[at : at + c], at + c
        unplaced += [f"{n} (no capacity)" for n in names[at:]]
    gpus = _realise(groups, models, layouts, counts, headroom, node_names, gpus_per_node, unplaced, assigned)
    baseline = sum(w.replicas for w in workloads) + sum(
        x["gpus"] - x["gpus"] // max(x["gpus_per_replica"], 1) for x in whole
    )
    best = Plan(
        gpus,
        whole,
        unplaced,
        baseline,
        status,
        optimal,
        gap,
        solver,
        dict(prices or {}),
        _node_gpu_counts(inv, models, node_names, gpus_per_node),
    )
    if groups and not optimal:  # time limit: keep the better of the incumbent and first-fit-decreasing
        ffd = plan_ffd(mig_workloads, inv, headroom=headroom, nodes=nodes, gpus_per_node=gpus_per_node)
        if (len(ffd.unplaced), ffd.gpus_used) < (len(best.unplaced), len(best.gpus)):
            ffd.whole_gpus += whole
            ffd.baseline_gpus = baseline
            ffd.status = f"MILP stopped ({status}, gap {gap:.2%}); first-fit-decreasing was better and is used"
            ffd.mip_gap = gap
            return ffd
    return best


def _classes(workloads: list[Workload], models: list[str], headroom: float) -> tuple[list[Workload], list[list[str]]]:
    """Merge workloads that get the same profile on every model into one class (replicas summed): they are
    interchangeable, so the MILP stays exact while its size depends on the profile mix, not the workload count.
    Returns one representative per class (``replicas`` = class size) and each class's names, one per replica."""
    names: dict[tuple, list[str]] = {}
    rep: dict[tuple, Workload] = {}
    for w in workloads:
        sig = tuple(getattr(_profile_for(w, m, headroom), "name", None) for m in models)
        names.setdefault(sig, []).extend([w.name] * w.replicas)
        rep.setdefault(sig, w)
    reps = [
        Workload(rep[k].name, rep[k].memory_gib, rep[k].compute_slices, replicas=len(v), profile=rep[k].profile)
        for k, v in names.items()
    ]
    return reps, list(names.values())


def _profile_for(w: Workload, model: str, headroom: float):
    if w.profile:
        try:
            return get_profile(model, w.profile)
        except InvalidParameter:
            return None
    return choose_profile(model, w.memory_gib, w.compute_slices, headroom)


def _node_of(model: str, k: int, node_names: dict, gpus_per_node: int) -> tuple[str, int]:
    names = node_names.get(model)
    ni = k // gpus_per_node
    node = names[ni] if names and ni < len(names) else f"{model.lower()}-node-{ni}"
    return node, k % gpus_per_node


def _realise(
    groups, models, layouts, counts, headroom, node_names, gpus_per_node, unplaced, assigned
) -> list[GpuLayout]:
    gpus: list[GpuLayout] = []
    for m in models:
        demand: dict[str, list[str]] = defaultdict(list)  # profile -> workload names (one per replica)
        for gi, w in enumerate(groups):
            if assigned.get((m, gi)):
                demand[_profile_for(w, m, headroom).name] += list(reversed(assigned[(m, gi)]))
        k = 0
        for i, lay in enumerate(layouts[m]):
            for _ in range(counts.get(("x", m, i), 0)):
                p = place(m, lay)
                node, idx = _node_of(m, k, node_names, gpus_per_node)
                g = GpuLayout(f"{m}#{k}", m, node, idx, dict(lay))
                for inst in p.instances:
                    who = demand[inst.profile].pop() if demand[inst.profile] else ""
                    g.instances.append(
                        {"profile": inst.profile, "start": inst.start, "size": inst.size, "workload": who}
                    )
                gpus.append(g)
                k += 1
        unplaced += [f"{w} ({p})" for p, ws in demand.items() for w in ws]
    return gpus


def plan_ffd(
    workloads: list[Workload],
    inventory: dict[str, int],
    *,
    headroom: float = 0.0,
    nodes: dict[str, list[str]] | None = None,
    gpus_per_node: int = 8,
) -> Plan:
    """First-fit-decreasing baseline: largest instances first, each into the lowest-numbered open GPU (any
    model of the inventory, in its order) whose layout stays valid, else a new GPU of the first model that
    still has one.

    Open GPUs are grouped by their current layout, and layout + profile validity comes from the exhaustive
    :func:`gpulib.mig.geometry.valid_layouts` set, so one step costs O(distinct layouts), not O(open GPUs).
    """
    inv, node_names = _expand_inventory(inventory, nodes, gpus_per_node)
    models = [m for m in inv if inv[m] > 0 and is_mig_capable(m)]
    valid = {m: {tuple(sorted(lay.items())) for lay in valid_layouts(m)} for m in models}
    items = []
    unplaced: list[str] = []
    for w in workloads:
        profs = {m: p for m in models if (p := _profile_for(w, m, headroom))}
        if not profs:
            unplaced += [w.name] * w.replicas
            continue
        first = next(iter(profs.values()))
        items += [((first.memory_slots, first.compute_slices), w.name, profs)] * w.replicas
    items.sort(key=lambda it: it[0], reverse=True)
    groups: dict[str, dict[tuple, list[int]]] = {m: defaultdict(list) for m in models}  # layout -> heap of GPU ids
    gpu_model: list[str] = []
    contents: list[list[tuple[str, str]]] = []
    opened = Counter()
    step_cache: dict[tuple, tuple | None] = {}

    def grow(m: str, key: tuple, pname: str):
        ck = (m, key, pname)
        if ck not in step_cache:
            c = dict(key)
            c[pname] = c.get(pname, 0) + 1
            nk = tuple(sorted(c.items()))
            step_cache[ck] = nk if nk in valid[m] else None
        return step_cache[ck]

    for _, wname, profs in items:
        best = None  # (gpu id, model, old key, new key)
        for m, p in profs.items():
            for key, heap in groups[m].items():
                if heap and (best is None or heap[0] < best[0]):
                    nk = grow(m, key, p.name)
                    if nk is not None:
                        best = (heap[0], m, key, nk)
        if best is not None:
            gid, m, key, nk = best
            heapq.heappop(groups[m][key])
        else:
            m = next((m for m in profs if opened[m] < inv[m]), None)
            if m is None:
                unplaced.append(f"{wname} ({next(iter(profs.values())).name})")
                continue
            gid, nk = len(gpu_model), ((profs[m].name, 1),)
            gpu_model.append(m)
            contents.append([])
            opened[m] += 1
        heapq.heappush(groups[m][nk], gid)
        contents[gid].append((profs[m].name, wname))
    gpus = []
    per_model = Counter()
    for gid, (m, g) in enumerate(zip(gpu_model, contents)):
        k = per_model[m]
        per_model[m] += 1
        p = place(m, [x[0] for x in g])
        node, idx = _node_of(m, k, node_names, gpus_per_node)
        names = defaultdict(list)
        for pname, wname in g:
            names[pname].append(wname)
        gpus.append(
            GpuLayout(
                f"{m}#{k}",
                m,
                node,
                idx,
                dict(Counter(x[0] for x in g)),
                [
                    {"profile": i.profile, "start": i.start, "size": i.size, "workload": names[i.profile].pop()}
                    for i in p.instances
                ],
            )
        )
    return Plan(
        gpus,
        [],
        unplaced,
        sum(w.replicas for w in workloads),
        "first-fit-decreasing",
        False,
        float("nan"),
        "ffd",
        node_gpus=_node_gpu_counts(inv, models, node_names, gpus_per_node),
    )
