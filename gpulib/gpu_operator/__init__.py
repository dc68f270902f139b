"""GPU Operator domain: install plan, pre-flight and post-install verification with one SOP per failed check."""
from __future__ import annotations

import importlib

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'ContradictoryChoice': 'analysis',
    'DEFAULT_COMPONENTS': 'analysis',
    'DEFAULT_OPERAND_TOLERATIONS': 'analysis',
    'EXPORTER_TARGET_COLUMNS': 'analysis',
    'InstallPlan': 'analysis',
    'MIG_STRATEGIES': 'analysis',
    'SCENARIOS': 'analysis',
    'SHARING': 'analysis',
    'TOGGLES': 'analysis',
    'check_cluster_policy': 'analysis',
    'check_daemonsets': 'analysis',
    'check_dcgm': 'analysis',
    'check_nodes': 'analysis',
    'check_validator': 'analysis',
    'collect_state': 'analysis',
    'components': 'analysis',
    'cuda_test_pod': 'analysis',
    'daemonset_chart': 'view',
    'daemonset_table': 'view',
    'dcgm_presence': 'analysis',
    'demo_objects': 'analysis',
    'expected_devices': 'analysis',
    'exporter_targets': 'analysis',
    'install_plan': 'analysis',
    'manifest_text': 'view',
    'node_table': 'analysis',
    'plan_text': 'view',
    'preflight': 'analysis',
    'setting': 'analysis',
    'sop': 'analysis',
    'sop_table': 'analysis',
    'state_from_objects': 'analysis',
    'verify': 'analysis',
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
