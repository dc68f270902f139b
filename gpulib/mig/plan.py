"""MIG layout planner and sizing from observed usage.

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

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import gpulib.mig as mig
import gpulib.mig.catalog as mig_catalog
from gpulib.core.errors import InvalidParameter
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import overhead
from gpulib.mig.catalog import device_memory_gib

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
            raise InvalidParameter(f"workload {self.name!r}: memory_gib > 0, replicas >= 1 and compute_slices >= 1 "
                                   f"required (got {self.memory_gib}, {self.replicas}, {self.compute_slices})")
        if self.isolation not in ("mig", "whole"):
            raise InvalidParameter(f"workload {self.name!r}: isolation must be 'mig' or 'whole', got {self.isolation!r}")


def choose_profile(gpu_model: str, memory_gib: float, compute_slices: int = 1, headroom: float = 0.0):
    """Smallest profile (memory slots, then compute, then memory) with memory >= need x (1 + headroom) and
    enough compute slices; +me profiles are skipped. None when nothing fits."""
    need = memory_gib * (1 + headroom)
    cands = [p for p in mig.profile_objects(gpu_model)
             if not p.media_ext and p.memory_gib >= need and p.compute_slices >= compute_slices]
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
        rows = [{"gpu": g.gpu, "model": g.model, "node": g.node, "index": g.index, "profile": i["profile"],
                 "start": i["start"], "size": i["size"], "workload": i["workload"]} for g in self.gpus for i in g.instances]
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
            sels = [mig.mig_parted_selector(dict(k), devices=sorted(v)) for k, v in sorted(groups.items(), key=lambda kv: kv[1])]
            whole = sorted(set(range(self.node_gpus.get(node, 0))) - {g.index for g in gs})
            if whole:
                sels.append(mig.mig_parted_selector(None, devices=whole))
            key = repr(sels)
            if key not in names:
                names[key] = f"gpuops-plan-{len(names) + 1}"
            out[node] = (names[key], sels)
        return out

    def mig_parted_config(self) -> str:
        cfgs = {name: sels for name, sels in self.node_configs().values()}
        return mig.mig_parted_config(cfgs)

    def safe_mig_parted_config(self, nodes: pd.DataFrame | None, base: str | dict | None = None) -> str:
        """The plan's configs merged into the configs in use (``base``: the cluster's config.yaml; None:
        mig-parted's default set), schema-checked; refuses (MigConfigRefused, with the reason) to drop a
        config name a node label references (gpulib.mig.parted_merge)."""
        from gpulib.mig.parted_merge import safe_config

        cfgs = {name: sels for name, sels in self.node_configs().values()}
        labels = {node: name for node, (name, _) in self.node_configs().items()}
        return safe_config(cfgs, nodes, base, labels)

    def label_commands(self) -> list[str]:
        return [f"kubectl label node {node} nvidia.com/mig.config={name} --overwrite"
                for node, (name, _) in self.node_configs().items()]

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
                    ok, why = mig.single_strategy_ok(node_layouts[g.node])
                    out[i["workload"]] = mig.pod_resources(i["profile"], "single") if ok else {"error": why}
                else:
                    out[i["workload"]] = mig.pod_resources(i["profile"], strategy)
        for w in self.whole_gpus:
            out[w["workload"]] = {"requests": {"nvidia.com/gpu": w["gpus_per_replica"]},
                                  "limits": {"nvidia.com/gpu": w["gpus_per_replica"]}}
        return out

    def findings(self) -> list[Finding]:
        ev = [f"GPUs used {self.gpus_used} vs {self.baseline_gpus} with one whole GPU per replica "
              f"(saved {self.gpus_saved})", f"solver {self.solver}: {self.status}, gap {self.mip_gap:.2%}"]
        if self.prices:
            per_gpu = [self.prices.get(g.model, 0.0) for g in self.gpus]
            ev.append(f"cost of the MIG GPUs: ${sum(per_gpu):.2f}/h")
        sev = Severity.OK if not self.unplaced else Severity.WARNING
        fs = [Finding(sev, f"MIG plan: {self.gpus_used} GPU(s) instead of {self.baseline_gpus}",
                      summary="apply each node's config with the guided MIG change (gpulib.mig.findings.mig_change_sop)",
                      sop_step="create the mig-parted ConfigMap (key config.yaml), then label each node in turn",
                      commands=self.label_commands(), evidence=ev, category="mig",
                      confidence=1.0 if self.optimal else 0.8, data={"gpus_saved": self.gpus_saved})]
        if self.unplaced:
            fs.append(Finding(Severity.WARNING, f"{len(self.unplaced)} workload replica(s) could not be placed",
                              summary="not enough GPUs in the inventory or no profile is large enough",
                              evidence=self.unplaced[:20], sop_step="add GPUs to the inventory or lower the need",
                              category="mig"))
        return fs


def _expand_inventory(inventory: dict[str, int], nodes: dict[str, list[str]] | None, gpus_per_node: int):
    inv = {}
    for m, n in inventory.items():
        if int(n) < 0:
            raise InvalidParameter(f"inventory count for {m} must be >= 0, got {n}")
        inv[mig.resolve_gpu_model(m)] = int(n)
    node_names = {mig.resolve_gpu_model(k): v for k, v in (nodes or {}).items()}
    return inv, node_names


def _node_gpu_counts(inv: dict[str, int], models: list[str], node_names: dict, gpus_per_node: int) -> dict[str, int]:
    """node -> GPUs it holds when the inventory of each MIG-capable model is laid out ``gpus_per_node`` per node."""
    counts: Counter = Counter()
    for m in models:
        for k in range(inv[m]):
            counts[_node_of(m, k, node_names, gpus_per_node)[0]] += 1
    return dict(counts)


def plan_layout(workloads: list[Workload], inventory: dict[str, int], *, headroom: float = 0.0,
                time_limit: float = 30.0, prices: dict[str, float] | None = None, nodes: dict[str, list[str]] | None = None,
         gpus_per_node: int = 8) -> Plan:
    """Choose a profile per workload and pack the instances into the fewest GPUs of ``inventory``
    (``{gpu_model: count}``); ``prices`` ($/GPU-hour per model) turns the objective into cost."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    inv, node_names = _expand_inventory(inventory, nodes, gpus_per_node)
    models = [m for m in inv if inv[m] > 0 and mig.is_mig_capable(m)]
    whole, unplaced, groups = [], [], []
    for w in workloads:
        if w.isolation == "whole" or not any(_profile_for(w, m, headroom) for m in models):
            g = max(1, math.ceil(w.memory_gib * (1 + headroom) / max(device_memory_gib(m) for m in inv)))
            whole.append({"workload": w.name, "gpus": g * w.replicas, "gpus_per_replica": g})
        else:
            groups.append(w)
    mig_workloads = groups
    groups, members = _classes(groups, models, headroom)
    layouts = {m: mig.valid_layouts(m) for m in models}
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
            p = mig.place(m, layouts[m][i])
            cost[k] = (prices or {}).get(m, 1.0) * (1 + FRAGMENTATION_WEIGHT * mig.stranded_slots(p))
    ri, ci, vals, lo, hi = [], [], [], [], []  # sparse constraint matrix (one row per add)

    def add(coefs: dict[int, float], low: float, high: float):
        r = len(lo)
        for k, v in coefs.items():
            ri.append(r), ci.append(k), vals.append(v)
        lo.append(low), hi.append(high)

    for gi, w in enumerate(groups):
        add({col[("y", m, gi)]: 1 for m in models if ("y", m, gi) in col} | {col[("u", None, gi)]: 1},
            w.replicas, w.replicas)
    for m in models:
        for pname in {p.name for p in mig.profile_objects(m)}:
            coefs = {col[("y", m, gi)]: 1 for gi, w in enumerate(groups)
                     if ("y", m, gi) in col and _profile_for(w, m, headroom).name == pname}
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
        res = milp(cost, constraints=LinearConstraint(a, lo, hi), integrality=np.ones(n),
                   bounds=Bounds(0, np.inf), options={"time_limit": time_limit, "disp": False})
        solver = "scipy.optimize.milp (HiGHS)"
        baseline = sum(w.replicas for w in workloads) + sum(x["gpus"] - x["gpus"] // max(x["gpus_per_replica"], 1) for x in whole)
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
            assigned[(m, gi)], at = names[at:at + c], at + c
        unplaced += [f"{n} (no capacity)" for n in names[at:]]
    gpus = _realise(groups, models, layouts, counts, headroom, node_names, gpus_per_node, unplaced, assigned)
    baseline = sum(w.replicas for w in workloads) + sum(x["gpus"] - x["gpus"] // max(x["gpus_per_replica"], 1) for x in whole)
    best = Plan(gpus, whole, unplaced, baseline, status, optimal, gap, solver, dict(prices or {}),
                _node_gpu_counts(inv, models, node_names, gpus_per_node))
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
    reps = [Workload(rep[k].name, rep[k].memory_gib, rep[k].compute_slices, replicas=len(v), profile=rep[k].profile)
            for k, v in names.items()]
    return reps, list(names.values())


def _profile_for(w: Workload, model: str, headroom: float):
    if w.profile:
        try:
            return mig.get_profile(model, w.profile)
        except InvalidParameter:
            return None
    return choose_profile(model, w.memory_gib, w.compute_slices, headroom)


def _node_of(model: str, k: int, node_names: dict, gpus_per_node: int) -> tuple[str, int]:
    names = node_names.get(model)
    ni = k // gpus_per_node
    node = names[ni] if names and ni < len(names) else f"{model.lower()}-node-{ni}"
    return node, k % gpus_per_node


def _realise(groups, models, layouts, counts, headroom, node_names, gpus_per_node, unplaced, assigned) -> list[GpuLayout]:
    gpus: list[GpuLayout] = []
    for m in models:
        demand: dict[str, list[str]] = defaultdict(list)  # profile -> workload names (one per replica)
        for gi, w in enumerate(groups):
            if assigned.get((m, gi)):
                demand[_profile_for(w, m, headroom).name] += list(reversed(assigned[(m, gi)]))
        k = 0
        for i, lay in enumerate(layouts[m]):
            for _ in range(counts.get(("x", m, i), 0)):
                p = mig.place(m, lay)
                node, idx = _node_of(m, k, node_names, gpus_per_node)
                g = GpuLayout(f"{m}#{k}", m, node, idx, dict(lay))
                for inst in p.instances:
                    who = demand[inst.profile].pop() if demand[inst.profile] else ""
                    g.instances.append({"profile": inst.profile, "start": inst.start, "size": inst.size, "workload": who})
                gpus.append(g)
                k += 1
        unplaced += [f"{w} ({p})" for p, ws in demand.items() for w in ws]
    return gpus


def plan_ffd(workloads: list[Workload], inventory: dict[str, int], *, headroom: float = 0.0,
             nodes: dict[str, list[str]] | None = None, gpus_per_node: int = 8) -> Plan:
    """First-fit-decreasing baseline: largest instances first, each into the lowest-numbered open GPU (any
    model of the inventory, in its order) whose layout stays valid, else a new GPU of the first model that
    still has one.

    Open GPUs are grouped by their current layout, and layout + profile validity comes from the exhaustive
    :func:`gpulib.mig.geometry.valid_layouts` set, so one step costs O(distinct layouts), not O(open GPUs).
    """
    import heapq

    inv, node_names = _expand_inventory(inventory, nodes, gpus_per_node)
    models = [m for m in inv if inv[m] > 0 and mig.is_mig_capable(m)]
    valid = {m: {tuple(sorted(lay.items())) for lay in mig.valid_layouts(m)} for m in models}
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
        p = mig.place(m, [x[0] for x in g])
        node, idx = _node_of(m, k, node_names, gpus_per_node)
        names = defaultdict(list)
        for pname, wname in g:
            names[pname].append(wname)
        gpus.append(GpuLayout(f"{m}#{k}", m, node, idx, dict(Counter(x[0] for x in g)),
                              [{"profile": i.profile, "start": i.start, "size": i.size,
                                "workload": names[i.profile].pop()} for i in p.instances]))
    return Plan(gpus, [], unplaced, sum(w.replicas for w in workloads), "first-fit-decreasing", False, float("nan"), "ffd",
                node_gpus=_node_gpu_counts(inv, models, node_names, gpus_per_node))


# --------------------------------------------------------------------------------------------------
# sizing from observed usage
# --------------------------------------------------------------------------------------------------
def _device_of(row) -> tuple[str | None, float | None, int]:
    """(catalog GPU model, memory GiB, compute slices) of the device a SUMMARY row was measured on."""
    try:
        model = mig.resolve_gpu_model(str(row.get("model") or ""))
    except InvalidParameter:
        return None, None, 0
    prof = str(row.get("gpu_i_profile") or "")
    if prof and prof != "nan":
        try:
            p = mig.get_profile(model, prof)
            return model, p.memory_gib, p.compute_slices
        except InvalidParameter:
            return model, None, 0
    try:
        return model, device_memory_gib(model), (mig_catalog.slot_geometry(model)[1] if mig.is_mig_capable(model) else 7)
    except InvalidParameter:
        return model, None, 7


def looks_preallocated(max_mib: float, p95_mib: float, device_gib: float | None, *,
                       low_mib: float | None = None) -> bool:
    """Whether FB_USED looks like a framework's pre-allocated pool rather than a need: near-constant
    (p95, and ``low_mib`` = min when known, at or above ``preallocation_flat_ratio`` of the max) AND at a
    high share of the device (max at or above ``preallocation_ratio`` of ``device_gib``). Both thresholds
    live in ``data/vllm/model_memory_overheads.csv``. Flat alone is not enough: an idle pod is flat too."""
    if not device_gib or np.isnan(max_mib) or max_mib <= 0:
        return False
    flat = overhead("preallocation_flat_ratio") * max_mib
    near_constant = p95_mib >= flat and (low_mib is None or np.isnan(low_mib) or low_mib >= flat)
    return bool(near_constant and max_mib / 1024 >= overhead("preallocation_ratio") * device_gib)


def size_from_usage(fb_summary: pd.DataFrame, activity_summary: pd.DataFrame | None = None, *,
                    gpu_model: str | None = None, headroom: float | None = None) -> tuple[pd.DataFrame, list[Finding]]:
    """Recommend the smallest MIG profile per pod from observed memory (``DCGM_FI_DEV_FB_USED`` in MiB,
    SUMMARY frame with ``stat`` p95 and max) and activity (``PROF_GR_ENGINE_ACTIVE``/``SM_ACTIVE`` p95, 0..1).

    Need = max FB_USED x (1 + headroom). Warns when memory looks pre-allocated (:func:`looks_preallocated`:
    near-constant at a high share of the device): vLLM and other frameworks take a fixed fraction regardless
    of load, so size those from the model instead.
    """
    headroom = overhead("sizing_headroom") if headroom is None else float(headroom)
    if fb_summary is None or fb_summary.empty:
        return pd.DataFrame(), [Finding(Severity.INFO, "No FB_USED data to size from", category="mig",
                                        sop_step="check that dcgm-exporter exports DCGM_FI_DEV_FB_USED with pod labels")]
    fb = fb_summary[fb_summary["pod"].astype(str) != ""]
    piv = fb.pivot_table(index=["namespace", "pod"], columns="stat", values="value", aggfunc="max")
    meta = fb.drop_duplicates(["namespace", "pod"]).set_index(["namespace", "pod"])
    n_gpus = fb.assign(_dev=fb["node"].astype(str) + "/" + fb["gpu"].astype(str)).groupby(["namespace", "pod"])["_dev"].nunique()
    act = None
    if activity_summary is not None and not activity_summary.empty:
        a = activity_summary[activity_summary["stat"].isin(["p95", "max"])]
        act = a.groupby(["namespace", "pod"])["value"].max()
    rows, findings = [], []
    busy = overhead("compute_busy_ratio")
    for (ns, pod), r in piv.iterrows():
        mx = float(r.get("max", r.get("p95", np.nan)))
        p95 = float(r.get("p95", mx))
        cur_model, cur_gib, cur_compute = _device_of(meta.loc[(ns, pod)])
        target = mig.resolve_gpu_model(gpu_model) if gpu_model else cur_model
        need = mx / 1024 * (1 + headroom)
        a95 = float(act.get((ns, pod), np.nan)) if act is not None else np.nan
        slices = max(1, math.ceil(a95 * cur_compute - 1e-9)) if not np.isnan(a95) and cur_compute else 1
        pre = looks_preallocated(mx, p95, cur_gib, low_mib=float(r["min"]) if "min" in r.index else None)
        prof = choose_profile(target, mx / 1024, slices, headroom) if target and mig.is_mig_capable(target) else None
        cur_prof = str(meta.loc[(ns, pod)].get("gpu_i_profile") or "")
        rows.append({"namespace": ns, "pod": pod, "node": meta.loc[(ns, pod)].get("node"), "device": cur_model,
                     "current_profile": "" if cur_prof == "nan" else cur_prof, "device_gib": cur_gib,
                     "gpus": int(n_gpus.get((ns, pod), 1)),
                     "fb_p95_gib": p95 / 1024, "fb_max_gib": mx / 1024, "activity_p95": a95, "need_gib": need,
                     "compute_slices": slices, "profile": prof.name if prof else None,
                     "profile_memory_gib": prof.memory_gib if prof else None, "preallocated": pre})
        ev = [f"FB_USED p95 {p95 / 1024:.1f} GiB, max {mx / 1024:.1f} GiB of {cur_gib or 0:.1f} GiB",
              f"need with {headroom:.0%} headroom: {need:.1f} GiB"]
        if not np.isnan(a95):
            ev.append(f"activity p95 {a95:.0%} of {cur_compute} compute slices -> {slices} slice(s)"
                      + (" (busy: give it more compute)" if a95 > busy else ""))
        if pre:
            findings.append(Finding(
                Severity.WARNING, f"{ns}/{pod}: memory looks pre-allocated; size from the model, not FB_USED",
                summary="frameworks such as vLLM take gpu_memory_utilization of the device regardless of load",
                sop_step="size with gpulib.vllm.memory.memory_needed(model, max_model_len=..., concurrency=...) and "
                         "set --gpu-memory-utilization to fit the chosen profile",
                evidence=ev, category="mig", confidence=0.7, node=rows[-1]["node"]))
        elif prof:
            findings.append(Finding(Severity.INFO, f"{ns}/{pod}: fits MIG {prof.name} on {target}",
                                    summary=f"{prof.memory_gib:g} GiB instance for a {need:.1f} GiB need",
                                    evidence=ev, category="mig", node=rows[-1]["node"],
                                    sop_step="add it to the planner (workloads_from_sizing) and apply the plan"))
        else:
            findings.append(Finding(Severity.INFO, f"{ns}/{pod}: keep a whole GPU",
                                    summary="no MIG profile is large enough or the GPU is not MIG-capable",
                                    evidence=ev, category="mig", node=rows[-1]["node"]))
    return pd.DataFrame(rows), findings


def workloads_from_sizing(sizing: pd.DataFrame, preallocated: str = "skip") -> list[Workload]:
    """Turn :func:`size_from_usage` rows into planner workloads.

    ``preallocated``: what to do with rows whose memory looks pre-allocated (their FB_USED says nothing about
    need): ``"skip"`` leaves them out; ``"keep"`` keeps them at their current size (the same MIG profile, or a
    whole GPU), so a plan never shrinks a workload it cannot size. Pods that span several GPUs (``gpus`` > 1:
    tensor/data parallel) keep that many whole GPUs.
    """
    if preallocated not in ("skip", "keep"):
        raise InvalidParameter(f"preallocated={preallocated!r}: use 'skip' or 'keep'")
    out = []
    for r in sizing.itertuples():
        name = f"{r.namespace}/{r.pod}"
        gpus = int(getattr(r, "gpus", 1) or 1)
        dev = getattr(r, "device_gib", None)
        if gpus > 1 and dev is not None and not pd.isna(dev):  # multi-GPU job: keep its GPU count
            out.append(Workload(name, gpus * float(dev), isolation="whole"))
            continue
        if r.preallocated:
            if preallocated == "skip":
                continue
            cur = str(getattr(r, "current_profile", "") or "")
            gib = getattr(r, "device_gib", None)
            gib = float(gib) if gib is not None and not pd.isna(gib) else float(r.fb_max_gib)
            out.append(Workload(name, gib, isolation="mig" if cur else "whole", profile=cur or None))
            continue
        out.append(Workload(name, float(r.need_gib), int(r.compute_slices),
                            isolation="mig" if r.profile else "whole"))
    return out
