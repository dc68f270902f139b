"""MIG geometry: the profile catalog, exact placement on NVIDIA's allowed start slots, nvidia-smi parsers,
mig-parted configs, Kubernetes resource names and the guided MIG-change SOP.

Rules (facts.md §2.1): a GPU instance (GI) sits on one of its profile's allowed start slots on the
memory-slot axis (8 slots on A100/H100/H200/B200, 4 on A30) and occupies ``memory_slots`` slots; no two
GIs overlap; each profile has a max count; at most one ``+me`` instance per GPU; compute slices add up to
at most the GPU's total (7, or 4 on A30).

    >>> is_valid_layout("A100-40GB", ["4g.20gb", "3g.20gb"])
    True
    >>> place("A100-40GB", ["3g", "3g", "1g"]).reason      # doctest: +ELLIPSIS
    'needs 9 memory slots ...'
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import Iterable, Sequence

import pandas as pd

from gpulib.core.textio import as_text, lines as _text_lines

from gpulib.core.errors import GpulibError, InvalidParameter
from gpulib.core.findings import Finding, Severity
from gpulib.core.knowledge import load_table

CATALOG_COLUMNS = ["gpu_model", "profile", "profile_id", "memory_gib", "compute_slices", "memory_slots",
                   "max_count", "placements", "media_ext", "inferred", "inferred_fields", "source"]


class UnknownGPUModel(InvalidParameter):
    hint = ("use a catalog name (A30-24GB, A100-40GB, A100-80GB, H100-80GB, H100-94GB, H100-96GB, GH200-144GB, "
            "H200-141GB, B200) or a node's nvidia.com/gpu.product label; for another GPU build a catalog with "
            "gpulib.mig.geometry.catalog_from_smi(lgip_text, lgipp_text)")


class UnknownProfile(InvalidParameter):
    hint = "list the GPU's profiles with gpulib.mig.geometry.profiles(gpu_model) or `nvidia-smi mig -lgip`"


class MigParseError(GpulibError):
    hint = "pass the full text printed by `nvidia-smi mig -lgip` / `nvidia-smi mig -lgipp` (run on the GPU node)"


# --------------------------------------------------------------------------------------------------
# catalog
# --------------------------------------------------------------------------------------------------
def gpu_models() -> pd.DataFrame:
    """GPU models known to the catalog (``mig_gpu_models.csv``), MIG-capable or not."""
    return load_table("mig_gpu_models")


def resolve_gpu_model(name: str) -> str:
    """Canonical catalog name for ``name`` (catalog name, or a product label such as
    ``NVIDIA-A100-SXM4-40GB`` / ``NVIDIA H100 80GB HBM3``). Raises :class:`UnknownGPUModel`."""
    if not isinstance(name, str) or not name.strip():
        raise UnknownGPUModel(f"gpu_model must be a non-empty string, got {name!r}")
    return _resolve_cached(name)


@lru_cache(maxsize=256)
def _resolve_cached(name: str) -> str:
    models = gpu_models()
    for m in models["gpu_model"]:
        if m.lower() == name.strip().lower():
            return m
    # product labels: longest regex match wins (GH200 before H200, H100 NVL before H100)
    best, best_len = None, 0
    for row in models.itertuples():
        for m in re.finditer(str(row.product_regex), name, flags=re.IGNORECASE):
            if len(m.group(0)) > best_len:
                best, best_len = row.gpu_model, len(m.group(0))
    if best is None:
        raise UnknownGPUModel(f"GPU model {name!r} is not in the catalog")
    return best


def is_mig_capable(gpu_model: str) -> bool:
    """True when the GPU model supports MIG (per the catalog). Unknown models raise :class:`UnknownGPUModel`."""
    m = gpu_models().set_index("gpu_model").loc[resolve_gpu_model(gpu_model)]
    return str(m["mig_capable"]).lower() == "yes"


def profiles(gpu_model: str, catalog: pd.DataFrame | None = None) -> pd.DataFrame:
    """The GPU-instance profiles of one GPU model, smallest first (a copy of ``mig_profiles.csv`` rows,
    or of ``catalog`` when given, e.g. one built by :func:`catalog_from_smi`)."""
    if catalog is not None:
        df = catalog[catalog["gpu_model"] == gpu_model] if gpu_model in set(catalog["gpu_model"]) else catalog
        if df.empty:
            raise UnknownGPUModel(f"catalog has no rows for {gpu_model!r}")
        return df.copy().reset_index(drop=True)
    model = resolve_gpu_model(gpu_model)
    df = load_table("mig_profiles")
    df = df[df["gpu_model"] == model]
    if df.empty:
        raise UnknownGPUModel(f"GPU model {model} does not support MIG (no profiles in the catalog)",
                              hint="use whole GPUs, time-slicing or MPS: see gpulib.mig.sharing.recommend")
    return df.sort_values(["memory_slots", "compute_slices", "media_ext"]).reset_index(drop=True)


@dataclass(frozen=True)
class Profile:
    """One GPU-instance profile of one GPU model."""

    gpu_model: str
    name: str
    profile_id: int | None
    memory_gib: float
    compute_slices: int
    memory_slots: int
    max_count: int
    starts: tuple[int, ...]
    media_ext: bool
    inferred: bool

    @property
    def resource_suffix(self) -> str:
        """Name as the device plugin advertises it (``+`` becomes ``.``: ``1g.10gb+me`` -> ``1g.10gb.me``)."""
        return self.name.replace("+", ".")


def _to_profile(row) -> Profile:
    pid = row["profile_id"]
    return Profile(
        gpu_model=str(row["gpu_model"]), name=str(row["profile"]),
        profile_id=None if pd.isna(pid) else int(pid), memory_gib=float(row["memory_gib"]),
        compute_slices=int(row["compute_slices"]), memory_slots=int(row["memory_slots"]),
        max_count=int(row["max_count"]), starts=tuple(int(s) for s in str(row["placements"]).split(";") if s != ""),
        media_ext=str(row["media_ext"]).lower() == "yes", inferred=str(row.get("inferred", "no")).lower() == "yes")


def profile_objects(gpu_model: str, catalog: pd.DataFrame | None = None) -> list[Profile]:
    """Profiles of a GPU model as :class:`Profile` objects, smallest first (cached for the shipped catalog)."""
    if catalog is None:
        return list(_profile_objects_cached(resolve_gpu_model(gpu_model)))
    return [_to_profile(r) for _, r in profiles(gpu_model, catalog).iterrows()]


@lru_cache(maxsize=64)
def _profile_objects_cached(model: str) -> tuple[Profile, ...]:
    return tuple(_to_profile(r) for _, r in profiles(model).iterrows())


def geometry(gpu_model: str, catalog: pd.DataFrame | None = None) -> tuple[int, int]:
    """(memory slots, compute slices) of the GPU, derived from its profiles (the full-GPU profile spans both)."""
    ps = profile_objects(gpu_model, catalog)
    return max(max(p.starts) + p.memory_slots for p in ps), max(p.compute_slices for p in ps)


_PROFILE_RE = re.compile(r"^(?:nvidia\.com/mig-|MIG\s+)?(\d+g(?:\.\d+gb)?)((?:[+.\-]me)?)$", re.IGNORECASE)


def get_profile(gpu_model: str, name: str | int, catalog: pd.DataFrame | None = None) -> Profile:
    """Look a profile up by name (``3g.20gb``, ``MIG 3g.20gb``, ``nvidia.com/mig-1g.10gb.me``, ``1g.5gb+me``),
    by shorthand (``3g``: the smallest-memory profile with 3 compute slices, no media extension) or by
    profile ID (int). Raises :class:`UnknownProfile` naming the known profiles."""
    ps = profile_objects(gpu_model, catalog)
    if isinstance(name, int) and not isinstance(name, bool):
        for p in ps:
            if p.profile_id == name:
                return p
        raise UnknownProfile(f"no profile ID {name} on {gpu_model}; known: "
                             f"{', '.join(f'{p.name} ({p.profile_id})' for p in ps)}")
    m = _PROFILE_RE.match(str(name).strip())
    if not m:
        raise UnknownProfile(f"{name!r} is not a MIG profile name like '3g.20gb' or '1g.10gb+me'")
    base, me = m.group(1).lower(), bool(m.group(2))
    for p in ps:
        if p.name.lower() == base + ("+me" if me else ""):
            return p
    if "." not in base:  # shorthand like "3g"
        cands = [p for p in ps if p.name.lower().startswith(base + ".") and p.media_ext == me]
        if cands:
            return min(cands, key=lambda p: (p.memory_slots, p.memory_gib))
    raise UnknownProfile(f"profile {name!r} does not exist on {gpu_model}; known: {', '.join(p.name for p in ps)}")


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
        return [f"sudo nvidia-smi mig -i {gpu_index} -cgi {i.profile}:{i.start} -C"
                for i in sorted(self.instances, key=lambda i: (-i.size, i.start))]


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


def place(gpu_model: str, profiles_wanted: Sequence[str | int] | dict, catalog: pd.DataFrame | None = None) -> Placement:
    """Place GPU instances on one GPU following NVIDIA's allowed placements.

    ``profiles_wanted``: a list of profile names / shorthands / IDs (``["4g.20gb", "2g", "1g"]``) or a
    ``{profile: count}`` dict. Returns a :class:`Placement`; when it does not fit, ``fits`` is False and
    ``reason`` says why (max count, more than one ``+me``, compute or memory slots exhausted, or no
    arrangement on the allowed start slots).
    """
    items = _expand(gpu_model, profiles_wanted, catalog)
    model = items[0].gpu_model if items else gpu_model
    total_slots, total_compute = geometry(gpu_model, catalog)
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
        res.reason = (f"needs {mem} memory slots ({' + '.join(f'{p.name}={p.memory_slots}' for p in items)}), "
                      f"the GPU has {total_slots}")
        return res
    starts = _search(items, total_slots)
    if starts is None:
        res.reason = ("the memory slots add up but no arrangement uses NVIDIA's allowed start slots ("
                      + "; ".join(f"{p.name} starts {list(p.starts)}" for p in by_name.values()) + ")")
        return res
    res.fits = True
    res.instances = sorted((PlacedInstance(p.name, s, p.memory_slots, p.compute_slices, p.memory_gib)
                            for p, s in zip(items, starts)), key=lambda i: i.start)
    return res


def is_valid_layout(gpu_model: str, profiles_wanted: Sequence[str | int] | dict,
                    catalog: pd.DataFrame | None = None) -> bool:
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


def layout_findings(gpu_model: str, profiles_wanted: Sequence[str | int] | dict, *, node: str | None = None,
                    gpu: str | None = None, catalog: pd.DataFrame | None = None) -> list[Finding]:
    """Findings for a proposed per-GPU layout: OK with the start slots, or CRITICAL with the reason."""
    p = place(gpu_model, profiles_wanted, catalog)
    if p.fits:
        ev = [f"{i.profile} at slot {i.start} (size {i.size}, {i.memory_gib:g} GiB)" for i in p.instances]
        ev.append(f"free memory slots: {p.free_slots or 'none'}; stranded: {stranded_slots(p, catalog)}")
        return [Finding(Severity.OK, f"MIG layout fits on {p.gpu_model}", summary=", ".join(p.requested),
                        sop_step="create the instances largest first at these start slots (or apply the mig-parted config)",
                        commands=p.nvidia_smi_commands(gpu or 0), evidence=ev, category="mig", node=node, gpu=gpu,
                        data={"placement": p.starts})]
    return [Finding(Severity.CRITICAL, f"MIG layout does not fit on {p.gpu_model}", summary=p.reason,
                    sop_step="choose smaller profiles or split the instances over more GPUs (gpulib.mig.plan)",
                    commands=["nvidia-smi mig -lgip", "nvidia-smi mig -lgipp"], evidence=[p.reason],
                    category="mig", node=node, gpu=gpu)]


# --------------------------------------------------------------------------------------------------
# nvidia-smi parsers
# --------------------------------------------------------------------------------------------------
_LGIPP_RE = re.compile(r"GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}\s*:\s*(\d+)\s*$")
_LGIP_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(Yes|No)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*$")
_LGIP_ROW2 = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*$")
_LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|\s*$")


def parse_lgipp(text: str) -> pd.DataFrame:
    """Parse ``nvidia-smi mig -lgipp``: one row per (gpu, profile_id) with ``starts`` (list) and ``size``.

    Lines that look like placements but do not parse (truncated output) are skipped and listed in
    ``df.attrs["skipped"]``; raises :class:`MigParseError` when nothing parses.
    """
    rows, skipped = [], []
    for ln, line in enumerate(_text_lines(text), 1):
        if "Profile ID" not in line:
            continue
        m = _LGIPP_RE.search(line.strip())
        if not m:
            skipped.append(f"line {ln}: {line.strip()}")
            continue
        starts = [int(s) for s in re.findall(r"\d+", m.group(3))]  # any whitespace (tabs too) between starts
        rows.append({"gpu": m.group(1), "profile_id": int(m.group(2)), "starts": starts, "size": int(m.group(4))})
    if not rows:
        raise MigParseError("no 'GPU <n> Profile ID <id> Placements: {starts}:size' lines found in -lgipp text"
                            + (f" ({len(skipped)} malformed)" if skipped else ""))
    df = pd.DataFrame(rows, columns=["gpu", "profile_id", "starts", "size"])
    df.attrs["skipped"] = skipped
    return df


def parse_lgip(text: str) -> pd.DataFrame:
    """Parse ``nvidia-smi mig -lgip``: one row per (gpu, profile) with name, profile_id, free, total,
    memory_gib, p2p, sms, dec, enc, ce, jpeg, ofa. Partial rows are skipped into ``df.attrs["skipped"]``."""
    rows, skipped = [], []
    lines = _text_lines(text)
    for i, line in enumerate(lines):
        m = _LGIP_ROW.match(line.strip())
        if not m:
            if re.match(r"^\|\s*\d+\s+MIG\s", line.strip()):
                skipped.append(f"line {i + 1}: {line.strip()}")
            continue
        row = {"gpu": m.group(1), "name": m.group(2).removeprefix("MIG"), "profile_id": int(m.group(3)),
               "free": int(m.group(4)), "total": int(m.group(5)), "memory_gib": float(m.group(6)),
               "p2p": m.group(7) == "Yes", "sms": int(m.group(8)), "dec": int(m.group(9)), "enc": int(m.group(10)),
               "ce": pd.NA, "jpeg": pd.NA, "ofa": pd.NA}
        m2 = _LGIP_ROW2.match(lines[i + 1].strip()) if i + 1 < len(lines) else None
        if m2:
            row["ce"], row["jpeg"], row["ofa"] = (int(g) for g in m2.groups())
        rows.append(row)
    if not rows:
        raise MigParseError("no GPU-instance profile rows ('|  0  MIG 1g.10gb  19  7/7  9.75  No ...') in -lgip text"
                            + (f" ({len(skipped)} malformed)" if skipped else ""))
    df = pd.DataFrame(rows)
    df.attrs["skipped"] = skipped
    return df


def parse_lgi(text: str) -> pd.DataFrame:
    """Parse ``nvidia-smi mig -lgi`` (existing GPU instances): gpu, profile, profile_id, instance_id, start, size."""
    rows = []
    for line in _text_lines(text):
        m = _LGI_ROW.match(line.strip())
        if m:
            rows.append({"gpu": m.group(1), "profile": m.group(2), "profile_id": int(m.group(3)),
                         "instance_id": int(m.group(4)), "start": int(m.group(5)), "size": int(m.group(6))})
    if not rows and "No GPU instances found" not in as_text(text):
        raise MigParseError("no GPU instance rows in -lgi text")
    return pd.DataFrame(rows, columns=["gpu", "profile", "profile_id", "instance_id", "start", "size"])


def catalog_from_smi(lgip_text: str, lgipp_text: str, gpu_model: str = "custom", gpu: str = "0",
                     source: str = "nvidia-smi mig -lgip/-lgipp capture") -> pd.DataFrame:
    """Build a catalog (same columns as ``mig_profiles.csv``) for a GPU we do not ship, from its
    ``-lgip`` and ``-lgipp`` outputs; pass it as ``catalog=`` to :func:`place` / :func:`is_valid_layout`."""
    lgip, lgipp = parse_lgip(lgip_text), parse_lgipp(lgipp_text)
    lgip, lgipp = lgip[lgip["gpu"] == str(gpu)], lgipp[lgipp["gpu"] == str(gpu)]
    merged = lgip.merge(lgipp, on=["gpu", "profile_id"], how="left")
    missing = merged[merged["size"].isna()]
    if not missing.empty:
        raise MigParseError(f"profiles {list(missing['name'])} have no placement line in the -lgipp text")
    out = []
    for r in merged.itertuples():
        cm = re.match(r"(\d+)g", r.name)
        if not cm:
            raise MigParseError(f"cannot read the compute slices from profile name {r.name!r}")
        out.append({"gpu_model": gpu_model, "profile": r.name, "profile_id": r.profile_id, "memory_gib": r.memory_gib,
                    "compute_slices": int(cm.group(1)), "memory_slots": int(r.size), "max_count": r.total,
                    "placements": ";".join(str(s) for s in r.starts), "media_ext": "yes" if "+me" in r.name else "no",
                    "inferred": "no", "inferred_fields": "", "source": source})
    return pd.DataFrame(out, columns=CATALOG_COLUMNS)


# --------------------------------------------------------------------------------------------------
# mig-parted config, resource names
# --------------------------------------------------------------------------------------------------
def mig_parted_selector(layout: dict[str, int] | None, devices: str | list[int] = "all",
                        device_filter: str | list[str] | None = None) -> dict:
    """One device selector of a mig-parted config. ``layout`` None = MIG disabled, ``{}`` = MIG on, no instances."""
    sel: dict = {"devices": devices}
    if device_filter:
        sel["device-filter"] = device_filter
    sel["mig-enabled"] = layout is not None
    if layout is not None:
        sel["mig-devices"] = {k: int(v) for k, v in sorted(layout.items()) if int(v) > 0}
    return sel


def mig_parted_config(configs: dict[str, list[dict] | dict[str, int]]) -> str:
    """mig-parted YAML (``version: v1`` + ``mig-configs``) from ``{config_name: [selectors]}``.

    A value may also be a plain ``{profile: count}`` layout (applied to ``devices: all``).
    Apply with ``nvidia-mig-parted apply -f config.yaml -c <name>`` or the GPU Operator's MIG Manager
    (custom ConfigMap with key ``config.yaml``, node label ``nvidia.com/mig.config=<name>``).
    """
    import yaml

    doc = {"version": "v1", "mig-configs": {}}
    for name, sels in configs.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or len(name) > 63:
            raise InvalidParameter(f"mig-parted config name {name!r} must be a valid label value (<=63 chars, "
                                   "letters, digits, '.', '_', '-')")
        doc["mig-configs"][name] = [mig_parted_selector(sels)] if isinstance(sels, dict) else list(sels)
    return yaml.safe_dump(doc, sort_keys=False)


def validate_mig_parted_config(text: str, gpu_model: str | None = None) -> list[str]:
    """Problems in a mig-parted YAML (empty list = valid): structure per facts.md §2.4 and, when
    ``gpu_model`` is given, that every selector's ``mig-devices`` is a valid layout on that GPU."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return [f"not YAML: {e}"]
    problems = []
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        problems.append("missing 'version: v1'")
    cfgs = doc.get("mig-configs") if isinstance(doc, dict) else None
    if not isinstance(cfgs, dict) or not cfgs:
        return problems + ["missing or empty 'mig-configs' map"]
    for name, sels in cfgs.items():
        if not isinstance(sels, list) or not sels:
            problems.append(f"{name}: must be a non-empty list of device selectors")
            continue
        for i, s in enumerate(sels):
            where = f"{name}[{i}]"
            if not isinstance(s, dict):
                problems.append(f"{where}: selector must be a map")
                continue
            dev = s.get("devices")
            if not (dev == "all" or (isinstance(dev, list) and all(isinstance(d, int) and d >= 0 for d in dev))):
                problems.append(f"{where}: devices must be 'all' or a list of GPU indexes, got {dev!r}")
            if not isinstance(s.get("mig-enabled"), bool):
                problems.append(f"{where}: mig-enabled must be true or false")
            unknown = set(s) - {"devices", "device-filter", "mig-enabled", "mig-devices"}
            if unknown:
                problems.append(f"{where}: unknown keys {sorted(unknown)}")
            md = s.get("mig-devices", {})
            if s.get("mig-enabled") is False and md:
                problems.append(f"{where}: mig-devices given while mig-enabled is false")
            if not isinstance(md, dict) or not all(isinstance(v, int) and v >= 0 for v in md.values()):
                problems.append(f"{where}: mig-devices must map profile names to counts")
            elif gpu_model and md:
                try:
                    p = place(gpu_model, md)
                    if not p.fits:
                        problems.append(f"{where}: {p.reason}")
                except InvalidParameter as e:
                    problems.append(f"{where}: {e}")
    return problems


def resource_name(profile: str, strategy: str = "mixed") -> str:
    """Kubernetes extended resource that exposes a MIG device (facts.md §2.5): ``nvidia.com/gpu`` under the
    ``single`` strategy, ``nvidia.com/mig-<profile>`` under ``mixed`` (``+me`` advertised as ``.me``)."""
    strategy = str(strategy).lower()
    if strategy == "single":
        return "nvidia.com/gpu"
    if strategy == "mixed":
        return "nvidia.com/mig-" + profile.replace("+", ".")
    if strategy == "none":
        raise InvalidParameter("MIG strategy 'none' advertises whole GPUs only; MIG devices need 'single' or 'mixed'")
    raise InvalidParameter(f"MIG strategy must be 'single' or 'mixed', got {strategy!r}")


def pod_resources(profile: str, strategy: str = "mixed", count: int = 1) -> dict:
    """``resources`` block for a container that uses ``count`` MIG devices (requests = limits, integers)."""
    if int(count) < 1:
        raise InvalidParameter(f"count must be a positive integer, got {count}")
    r = {resource_name(profile, strategy): int(count)}
    return {"requests": dict(r), "limits": dict(r)}


def single_strategy_ok(layouts: Iterable[dict[str, int]]) -> tuple[bool, str]:
    """The ``single`` strategy needs every MIG device of a node to be the same profile."""
    kinds = {k for lay in layouts for k, v in lay.items() if v}
    if len(kinds) <= 1:
        return True, f"all MIG devices are {next(iter(kinds))}" if kinds else "no MIG devices"
    return False, f"node mixes profiles {sorted(kinds)}: use the mixed strategy (nvidia.com/mig-<profile>)"


# --------------------------------------------------------------------------------------------------
# guided MIG change (SOP)
# --------------------------------------------------------------------------------------------------
_GPU_RES = re.compile(r"^nvidia\.com/(gpu|mig-.+)$")


def outside_kubernetes_clients(fb_used: pd.DataFrame | None, node: str) -> list[str]:
    """GPUs / MIG instances of ``node`` whose memory is held (FB_USED above ``zombie_fb_used_min_mib``) with no
    pod attributed by dcgm-exporter: processes outside Kubernetes (or pods the exporter cannot map). ``fb_used``
    is a SUMMARY frame (e.g. ``stat="max"``); returns evidence strings."""
    if fb_used is None or fb_used.empty:
        return []
    from gpulib.core.knowledge import threshold

    held = threshold("zombie_fb_used_min_mib")
    df = fb_used[(fb_used["node"] == node) & (fb_used["pod"].fillna("").astype(str) == "")
                 & (pd.to_numeric(fb_used["value"], errors="coerce") > held)]
    return [f"GPU {r.gpu}{' ' + str(r.gpu_i_profile) if str(r.gpu_i_profile or '') not in ('', 'nan') else ''}: "
            f"{float(r.value):.0f} MiB used, no pod" for r in df.itertuples()]


def mig_change_sop(node: str, config_name: str, *, pods: pd.DataFrame | None = None,
                   nodes: pd.DataFrame | None = None, fb_used: pd.DataFrame | None = None,
                   namespace_operator: str = "gpu-operator") -> list[Finding]:
    """The guided MIG change for one node as Findings: pre-checks from live data (GPU pods still on the node,
    GPU memory held outside Kubernetes, current ``mig.config.state``), then cordon -> wait for GPU pods ->
    label ``nvidia.com/mig.config`` -> watch ``nvidia.com/mig.config.state`` -> check allocatable
    ``nvidia.com/mig-*`` -> uncordon.

    ``pods``/``nodes`` follow ``gpulib.core.schema.POD_COLUMNS``/``NODE_COLUMNS``, ``fb_used`` is a FB_USED SUMMARY
    frame (max over the window); omit them to get the SOP alone.
    """
    out: list[Finding] = []
    gpu_pods = []
    if pods is not None and not pods.empty:
        on = pods[(pods["node"] == node) & pods["phase"].isin(["Running", "Pending"])]
        for r in on.itertuples():
            mig = getattr(r, "mig_requests", None) or {}
            if (pd.notna(r.gpu_request) and float(r.gpu_request or 0) > 0) or (isinstance(mig, dict) and any(mig.values())):
                gpu_pods.append(f"{r.namespace}/{r.pod}")
    if gpu_pods:
        out.append(Finding(
            Severity.WARNING, f"{len(gpu_pods)} GPU pod(s) still running on {node}",
            summary="MIG Manager will evict or wait on GPU clients; reconfiguring under load kills their work.",
            sop_step="cordon the node and wait for (or drain) these pods before labelling",
            commands=[f"kubectl cordon {node}",
                      f"kubectl get pods -A --field-selector spec.nodeName={node} -o wide"],
            evidence=gpu_pods[:20], category="mig", node=node))
    outside = outside_kubernetes_clients(fb_used, node)
    if outside:
        out.append(Finding(
            Severity.WARNING, f"GPU memory held outside Kubernetes on {node}",
            summary="MIG Manager cannot reconfigure a GPU while any process holds it (DCGM, monitoring agents, "
                    "containers started outside the kubelet); the change ends in mig.config.state=failed.",
            sop_step="find and stop those processes on the node before labelling",
            commands=["sudo fuser -v /dev/nvidia*  # on the node", "nvidia-smi --query-compute-apps=pid,process_name,"
                      "used_memory --format=csv  # on the node"],
            evidence=outside[:20], category="mig", node=node))
    state = None
    if nodes is not None and not nodes.empty and node in set(nodes["node"]):
        row = nodes[nodes["node"] == node].iloc[0]
        state = row.get("mig_config_state") or None
        if str(row.get("mig_config") or "") == config_name and state == "success":
            out.append(Finding(Severity.OK, f"{node} already runs MIG config {config_name}",
                               evidence=[f"nvidia.com/mig.config={config_name}", "nvidia.com/mig.config.state=success"],
                               category="mig", node=node))
            return out
        if state == "failed":
            out.append(Finding(
                Severity.CRITICAL, f"previous MIG reconfiguration failed on {node}",
                summary="nvidia.com/mig.config.state=failed: read the MIG Manager log before relabelling",
                sop_step="check the mig-manager pod log on the node, fix the cause (GPU clients outside Kubernetes, "
                         "unsupported profile), then relabel",
                commands=[f"kubectl -n {namespace_operator} logs -l app=nvidia-mig-manager --tail=200 "
                          f"--field-selector spec.nodeName={node}",
                          "sudo fuser -v /dev/nvidia*  # on the node: GPU clients outside Kubernetes"],
                evidence=["nvidia.com/mig.config.state=failed"], category="mig", node=node))
    steps = [
        f"kubectl cordon {node}",
        f"kubectl get pods -A --field-selector spec.nodeName={node} -o json | "
        "jq -r '.items[] | select(any(.spec.containers[]; .resources.limits // {} | keys[] | "
        "test(\"nvidia.com/(gpu|mig-)\"))) | .metadata.namespace + \"/\" + .metadata.name'",
        "sudo fuser -v /dev/nvidia*  # on the node: no GPU clients outside Kubernetes (DCGM/monitoring agents)",
        f"kubectl label node {node} nvidia.com/mig.config={config_name} --overwrite",
        f"kubectl get node {node} -L nvidia.com/mig.config.state -w  # pending -> (rebooting) -> success | failed",
        f"kubectl get node {node} -o jsonpath='{{.status.allocatable}}' | tr ',' '\\n' | grep nvidia.com/",
        f"kubectl uncordon {node}",
    ]
    out.append(Finding(
        Severity.INFO, f"Guided MIG change on {node} to config {config_name}",
        summary="cordon -> wait for GPU pods to finish -> label nvidia.com/mig.config -> watch "
                "nvidia.com/mig.config.state until success -> check allocatable nvidia.com/mig-* -> uncordon",
        sop_step="run the commands in order; do not uncordon until mig.config.state=success and the allocatable "
                 "MIG resources match the config",
        commands=steps, evidence=[f"current mig.config.state: {state or 'unknown'}"],
        escalation="mig.config.state=failed twice or GPUs missing after success: collect nvidia-bug-report.sh and "
                   "open a vendor ticket",
        category="mig", node=node, data={"config": config_name}))
    return out
