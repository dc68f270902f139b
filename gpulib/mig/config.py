"""mig-parted configs: generation and validation of the ``version: v1`` / ``mig-configs:`` YAML that
``nvidia-mig-parted`` and the GPU Operator's MIG Manager apply (``NVIDIA/mig-parted:
deployments/systemd/config-default.yaml`` @ bd7160f4).
"""

from __future__ import annotations

import re

from gpulib.core.errors import InvalidParameter
from gpulib.mig.geometry import place
from gpulib.mig.parted_merge import schema_problems


# --------------------------------------------------------------------------------------------------
# mig-parted config, resource names
# --------------------------------------------------------------------------------------------------
def mig_parted_selector(
    layout: dict[str, int] | None, devices: str | list[int] = "all", device_filter: str | list[str] | None = None
) -> dict:
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
            raise InvalidParameter(
                f"mig-parted config name {name!r} must be a valid label value (<=63 chars, "
                "letters, digits, '.', '_', '-')"
            )
        doc["mig-configs"][name] = [mig_parted_selector(sels)] if isinstance(sels, dict) else list(sels)
    return yaml.safe_dump(doc, sort_keys=False)


def validate_mig_parted_config(text: str, gpu_model: str | None = None) -> list[str]:
    """Problems in a mig-parted YAML (empty list = valid): mig-parted's own parser rules
    (:func:`gpulib.mig.parted_merge.schema_problems`, ``NVIDIA/mig-parted: api/spec/v1/spec.go`` @bd7160f4) and,
    when ``gpu_model`` is given, that every selector's ``mig-devices`` is a valid layout on that GPU."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return [f"not YAML: {e}"]
    problems = schema_problems(doc)
    if problems or not gpu_model:
        return problems
    for name, sels in doc["mig-configs"].items():
        for i, s in enumerate(sels):
            md = s.get("mig-devices") or {}
            if not md:
                continue
            try:
                p = place(gpu_model, md)
                if not p.fits:
                    problems.append(f"{name}[{i}]: {p.reason}")
            except InvalidParameter as e:
                problems.append(f"{name}[{i}]: {e}")
    return problems
