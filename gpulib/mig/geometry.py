"""MIG geometry: exact placement of GPU instances on NVIDIA's allowed start slots, valid layouts and stranded slots.

Rules (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/, ``nvidia-smi mig -lgipp``): a GPU instance (GI) sits
on one of its profile's allowed start slots on the memory-slot axis (8 slots on A100/H100/H200/B200, 4 on A30) and
occupies ``memory_slots`` slots; no two GIs overlap; each profile has a max count; at most one ``+me`` instance per
GPU; compute slices add up to at most the GPU's total (7, or 4 on A30).

    >>> is_valid_layout("A100-40GB", ["4g.20gb", "3g.20gb"])
    True
    >>> place("A100-40GB", ["3g", "3g", "1g"]).reason      # doctest: +ELLIPSIS
    'needs 9 memory slots ...'
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import Sequence

import pandas as pd

from gpulib.core.errors import InvalidParameter
from gpulib.mig.catalog import Profile, get_profile, profile_objects, resolve_gpu_model, slot_geometry


# --------------------------------------------------------------------------------------------------
# placement
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlacedInstance:
    profile: str
    start: int
    size: int
    compute_slices: int
    memory_gib: float

    @property
    def slots(self) -> range:
        return range(self.start, self.start + self.size)


@dataclass
class Placement:
    """Result of :func:`place`: ``fits`` and the start slot per instance, or ``reason`` it cannot fit."""

    gpu_model: str
    requested: list[str]
    fits: bool
    instances: list[PlacedInstance] = field(default_factory=list)
    reason: str = ""
    memory_slots: int = 8
    compute_slices: int = 7

    @property
    def starts(self) -> list[tuple[str, int]]:
        """``[(profile, start_slot), ...]`` in slot order."""
        return [(i.profile, i.start) for i in self.instances]

    def slot_map(self) -> list[str | None]:
        """Which profile occupies each memory slot (None = free)."""
        out: list[str | None] = [None] * self.memory_slots
        for inst in self.instances:
            for s in inst.slots:
                out[s] = inst.profile
        return out

    @property
    def free_slots(self) -> list[int]:
        return [i for i, p in enumerate(self.slot_map()) if p is None] if self.fits else []

    def nvidia_smi_commands(self, gpu_index: int | str = 0) -> list[str]:
        """``nvidia-smi mig -cgi <profile>:<start>`` commands that create exactly this placement (largest first)."""
        if not self.fits:
            return []
        return [
            f"sudo nvidia-smi mig -i {gpu_index} -cgi {i.profile}:{i.start} -C"
            for i in sorted(self.instances, key=lambda i: (-i.size, i.start))
        ]


def _expand(gpu_model: str, requested: Sequence[str | int] | dict, catalog) -> list[Profile]:
    if isinstance(requested, dict):
        items: list = []
        for k, n in requested.items():
            if int(n) < 0:
                raise InvalidParameter(f"count for profile {k!r} must be >= 0, got {n}")
            items += [k] * int(n)
        requested = items
    if isinstance(requested, (str, bytes)):
        raise InvalidParameter(f"profiles must be a list like ['3g.20gb', '1g.5gb'], got the string {requested!r}")
    return [get_profile(gpu_model, r, catalog) for r in requested]


def _search(items: list[Profile], total_slots: int) -> list[int] | None:
    """Exact backtracking over allowed starts. Returns a start per item (same order) or None."""
    order = sorted(range(len(items)), key=lambda i: (-items[i].memory_slots, len(items[i].starts), items[i].name))
    starts: list[int] = [-1] * len(items)

    def rec(k: int, occupied: int) -> bool:
        if k == len(order):
            return True
        it = items[order[k]]
        size_mask = (1 << it.memory_slots) - 1
        # identical profiles: enforce increasing starts (removes symmetric branches)
        prev = starts[order[k - 1]] if k and items[order[k - 1]].name == it.name else -1
        for s in it.starts:
            if s <= prev or s + it.memory_slots > total_slots:
                continue
            mask = size_mask << s
            if occupied & mask:
                continue
            starts[order[k]] = s
            if rec(k + 1, occupied | mask):
                return True
        starts[order[k]] = -1
        return False

    return list(starts) if rec(0, 0) else None


def place(
    gpu_model: str, profiles_wanted: Sequence[str | int] | dict, catalog: pd.DataFrame | None = None
) -> Placement:
    """Place GPU instances on one GPU following NVIDIA's allowed placements.

    ``profiles_wanted``: a list of profile names / shorthands / IDs (``["4g.20gb", "2g", "1g"]``) or a
    ``{profile: count}`` dict. Returns a :class:`Placement`; when it does not fit, ``fits`` is False and
    ``reason`` says why (max count, more than one ``+me``, compute or memory slots exhausted, or no
    arrangement on the allowed start slots).
    """
    items = _expand(gpu_model, profiles_wanted, catalog)
    model = items[0].gpu_model if items else gpu_model
    total_slots, total_compute = slot_geometry(gpu_model, catalog)
    names = [p.name for p in items]
    res = Placement(model, names, False, memory_slots=total_slots, compute_slices=total_compute)
    counts = Counter(names)
    by_name = {p.name: p for p in items}
    for n, c in counts.items():
        if c > by_name[n].max_count:
            res.reason = f"{c} x {n} requested but at most {by_name[n].max_count} fit on one {model}"
            return res
    n_me = sum(1 for p in items if p.media_ext)
    if n_me > 1:
        res.reason = f"{n_me} media-extension (+me) instances requested; at most one per GPU"
        return res
    compute = sum(p.compute_slices for p in items)
    if compute > total_compute:
        res.reason = f"needs {compute} compute slices, the GPU has {total_compute}"
        return res
    mem = sum(p.memory_slots for p in items)
    if mem > total_slots:
        res.reason = (
            f"needs {mem} memory slots ({' + '.join(f'{p.name}={p.memory_slots}' for p in items)}), "
            f"the GPU has {total_slots}"
        )
        return res
    starts = _search(items, total_slots)
    if starts is None:
        res.reason = (
            "the memory slots add up but no arrangement uses NVIDIA's allowed start slots ("
            + "; ".join(f"{p.name} starts {list(p.starts)}" for p in by_name.values())
            + ")"
        )
        return res
    res.fits = True
    res.instances = sorted(
        (PlacedInstance(p.name, s, p.memory_slots, p.compute_slices, p.memory_gib) for p, s in zip(items, starts)),
        key=lambda i: i.start,
    )
    return res


def is_valid_layout(
    gpu_model: str, profiles_wanted: Sequence[str | int] | dict, catalog: pd.DataFrame | None = None
) -> bool:
    """True when the multiset of GPU instances can coexist on one GPU of ``gpu_model``."""
    return place(gpu_model, profiles_wanted, catalog).fits


def stranded_slots(placement: Placement, catalog: pd.DataFrame | None = None) -> int:
    """Free memory slots that no further instance of any profile can use (lost to fragmentation)."""
    if not placement.fits:
        return 0
    occ = 0
    for i in placement.instances:
        occ |= ((1 << i.size) - 1) << i.start
    usable = 0
    have_me = any(i.profile.endswith("+me") for i in placement.instances)
    counts = Counter(i.profile for i in placement.instances)
    for p in profile_objects(placement.gpu_model, catalog):
        if counts[p.name] >= p.max_count or (p.media_ext and have_me):
            continue
        for s in p.starts:
            mask = ((1 << p.memory_slots) - 1) << s
            if s + p.memory_slots <= placement.memory_slots and not occ & mask:
                usable |= mask
    free = [i for i in range(placement.memory_slots) if not occ >> i & 1]
    return sum(1 for i in free if not usable >> i & 1)


@lru_cache(maxsize=64)
def _valid_layouts_cached(gpu_model: str) -> tuple[tuple[tuple[str, int], ...], ...]:
    return tuple(tuple(sorted(c.items())) for c in _enumerate_layouts(gpu_model, None))


def _enumerate_layouts(gpu_model: str, catalog) -> list[dict[str, int]]:
    ps = profile_objects(gpu_model, catalog)
    out = []
    for counts in product(*[range(p.max_count + 1) for p in ps]):
        want = {p.name: c for p, c in zip(ps, counts) if c}
        if want and place(gpu_model, want, catalog).fits:
            out.append(want)
    return out


def valid_layouts(gpu_model: str, catalog: pd.DataFrame | None = None) -> list[dict[str, int]]:
    """Every non-empty multiset of profiles that fits one GPU (``{profile: count}``), exhaustively."""
    if catalog is not None:
        return _enumerate_layouts(gpu_model, catalog)
    return [dict(t) for t in _valid_layouts_cached(resolve_gpu_model(gpu_model))]
