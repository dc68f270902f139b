"""MIG and GPU-sharing domain: geometry and profiles, nvidia-smi mig parsers, the packing plan, sharing advice, views."""
from __future__ import annotations

import importlib

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'CATALOG_COLUMNS': 'catalog',
    'CAVEATS': 'sharing',
    'FRAGMENTATION_WEIGHT': 'plan',
    'GpuLayout': 'plan',
    'ISOLATION': 'sharing',
    'LAYOUT_COLUMNS': 'view',
    'MigParseError': 'smi_parsers',
    'PlacedInstance': 'geometry',
    'Placement': 'geometry',
    'Plan': 'plan',
    'Profile': 'catalog',
    'UnknownGPUModel': 'catalog',
    'UnknownProfile': 'catalog',
    'WORKLOADS': 'sharing',
    'Workload': 'plan',
    'catalog_from_smi': 'smi_parsers',
    'choose_profile': 'plan',
    'clusterpolicy_patch': 'sharing',
    'current_gpus_for': 'view',
    'current_layout': 'view',
    'device_plugin_configmap': 'sharing',
    'device_memory_gib': 'catalog',
    'get_profile': 'catalog',
    'gpu_models': 'catalog',
    'gpu_price': 'view',
    'headroom_table': 'view',
    'inventory_for': 'view',
    'is_mig_capable': 'catalog',
    'is_valid_layout': 'geometry',
    'layout_findings': 'findings',
    'looks_preallocated': 'plan',
    'mig_change_sop': 'findings',
    'MigConfigRefused': 'parted_merge',
    'mig_parted_config': 'config',
    'safe_config': 'parted_merge',
    'config_for_cluster': 'parted_merge',
    'schema_problems': 'parted_merge',
    'default_configs': 'parted_merge',
    'mig_parted_selector': 'config',
    'mps_config': 'sharing',
    'outside_kubernetes_clients': 'findings',
    'parse_lgi': 'smi_parsers',
    'parse_lgip': 'smi_parsers',
    'parse_lgipp': 'smi_parsers',
    'place': 'geometry',
    'plan_layout': 'plan',
    'plan_ffd': 'plan',
    'pod_requests_table': 'view',
    'pod_resources': 'resources',
    'profile_objects': 'catalog',
    'profiles': 'catalog',
    'proposed_layout': 'view',
    'recommend': 'sharing',
    'resolve_gpu_model': 'catalog',
    'resource_name': 'resources',
    'savings': 'view',
    'savings_chart': 'view',
    'select_nodes': 'view',
    'sharing_commands': 'sharing',
    'single_strategy_ok': 'resources',
    'size_from_usage': 'plan',
    'slot_geometry': 'catalog',
    'slot_diagram': 'view',
    'stranded_slots': 'geometry',
    'target_model': 'view',
    'time_slicing_config': 'sharing',
    'valid_layouts': 'geometry',
    'validate_mig_parted_config': 'config',
    'workloads_from_sizing': 'plan',
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
