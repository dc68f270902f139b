"""GPU Operator domain: install plan, pre-flight and post-install verification with one SOP per failed check, the
operator_install steps and their one verdict call (steps.findings)."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "ContradictoryChoice": "plan",
    "DEFAULT_COMPONENTS": "plan",
    "DEFAULT_OPERAND_TOLERATIONS": "pre_install",
    "EXPORTER_TARGET_COLUMNS": "post_install",
    "InstallPlan": "plan",
    "MIG_STRATEGIES": "plan",
    "SHARING": "plan",
    "TOGGLES": "plan",
    "check_cluster_policy": "post_install",
    "check_daemonsets": "post_install",
    "check_dcgm": "post_install",
    "check_nodes": "post_install",
    "check_validator": "post_install",
    "collect_state": "state",
    "components": "knowledge",
    "cuda_test_pod": "post_install",
    "daemonset_chart": "view",
    "daemonset_table": "view",
    "dcgm_presence": "post_install",
    "expected_devices": "post_install",
    "exporter_targets": "post_install",
    "install_plan": "plan",
    "manifest_text": "view",
    "node_table": "pre_install",
    "operator_state": "state",
    "plan_text": "view",
    "preflight": "pre_install",
    "setting": "knowledge",
    "sop": "findings",
    "sop_table": "knowledge",
    "state_from_objects": "state",
    "verify": "post_install",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
