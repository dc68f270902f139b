"""mig-parted configs: generation and validation of the ``version: v1`` / ``mig-configs:`` YAML that
``nvidia-mig-parted`` and the GPU Operator's MIG Manager apply (``NVIDIA/mig-parted:
deployments/systemd/config-default.yaml`` @ bd7160f4).
"""
from __future__ import annotations

import re

from gpulib.core.errors import InvalidParameter
from gpulib.mig.geometry import place


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
    """Problems in a mig-parted YAML (empty list = valid): structure per ``NVIDIA/mig-parted:
    deployments/systemd/config-default.yaml`` @ bd7160f4 and, when
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
