"""Kubernetes: labels and resource names, node/pod frames, the API client and dry-run-first remediation."""
from __future__ import annotations

import importlib

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    'ANNOTATION_MIRROR_POD': 'client',
    'DAEMONSET_COLUMNS': 'client',
    'DEFAULT_AUDIT_LOG': 'remediate',
    'GPU_RESOURCE': 'client',
    'GPU_SHARED_RESOURCE': 'client',
    'KubeCluster': 'client',
    'LABEL_COUNT': 'client',
    'LABEL_INSTANCE_TYPE': 'client',
    'LABEL_INSTANCE_TYPE_BETA': 'client',
    'LABEL_MACHINE': 'client',
    'LABEL_MEMORY': 'client',
    'LABEL_MIG_CONFIG': 'client',
    'LABEL_MIG_CONFIG_STATE': 'client',
    'LABEL_MIG_STRATEGY': 'client',
    'LABEL_POD_TEMPLATE_HASH': 'client',
    'LABEL_PRODUCT': 'client',
    'LABEL_REPLICAS': 'client',
    'LABEL_SHARING': 'client',
    'MIG_RESOURCE_PREFIX': 'client',
    'MalformedKubernetesObject': 'client',
    'NON_GPU_POD_COLUMNS': 'requests',
    'REQUEST_LIMIT_COLUMNS': 'requests',
    'RemediationRefused': 'remediate',
    'RemediationResult': 'remediate',
    'SHARED_PRODUCT_SUFFIX': 'client',
    'TAINT_EFFECTS': 'remediate',
    'audit_path': 'remediate',
    'check_circuit_breaker': 'remediate',
    'cluster_policy_status': 'client',
    'cordon': 'remediate',
    'daemonsets_frame': 'client',
    'drain': 'remediate',
    'eviction_body': 'client',
    'gpu_resource_name': 'client',
    'is_extended_gpu_resource': 'requests',
    'is_spot': 'client',
    'iter_gpu_nodes': 'client',
    'label': 'remediate',
    'node_row': 'client',
    'nodes_frame': 'client',
    'non_gpu_pods': 'requests',
    'pod_row': 'client',
    'pods_frame': 'client',
    'read_list': 'client',
    'request_limit_findings': 'requests',
    'request_limit_issues': 'requests',
    'request_limit_problems': 'requests',
    'resolve_owner': 'client',
    'resource_problems': 'requests',
    'set_mig_config': 'remediate',
    'system_namespaces': 'requests',
    'taint': 'remediate',
    'uncordon': 'remediate',
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
