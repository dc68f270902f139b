"""Kubernetes: labels and resource names, node/pod frames, the API client and dry-run-first remediation."""

from __future__ import annotations

from gpulib.core.lazy import lazy_exports

#: public name -> submodule defining it; imported on first use (PEP 562), so importing the package is cheap
#: and a GPU node loads only what it calls
_EXPORTS = {
    "ANNOTATION_MIRROR_POD": "labels",
    "DAEMONSET_COLUMNS": "frames",
    "DEFAULT_AUDIT_LOG": "remediate",
    "GPU_RESOURCE": "labels",
    "GPU_SHARED_RESOURCE": "labels",
    "KubeCluster": "client",
    "LABEL_COUNT": "labels",
    "LABEL_INSTANCE_TYPE": "labels",
    "LABEL_INSTANCE_TYPE_BETA": "labels",
    "LABEL_MACHINE": "labels",
    "LABEL_MEMORY": "labels",
    "LABEL_MIG_CONFIG": "labels",
    "LABEL_MIG_CONFIG_STATE": "labels",
    "LABEL_MIG_STRATEGY": "labels",
    "LABEL_POD_TEMPLATE_HASH": "labels",
    "LABEL_PRODUCT": "labels",
    "LABEL_REPLICAS": "labels",
    "LABEL_SHARING": "labels",
    "MIG_PARTED_CONFIG_KEY": "labels",
    "MIG_PARTED_DEFAULT_CONFIGMAP": "labels",
    "MIG_RESOURCE_PREFIX": "labels",
    "MalformedKubernetesObject": "frames",
    "NON_GPU_POD_COLUMNS": "requests",
    "REQUEST_LIMIT_COLUMNS": "requests",
    "RemediationRefused": "remediate",
    "RemediationResult": "remediate",
    "SHARED_PRODUCT_SUFFIX": "labels",
    "TAINT_EFFECTS": "remediate",
    "audit_path": "remediate",
    "check_circuit_breaker": "remediate",
    "cluster_policy_status": "frames",
    "configmap_config_yaml": "frames",
    "cordon": "remediate",
    "daemonsets_frame": "frames",
    "drain": "remediate",
    "eviction_body": "client",
    "gpu_resource_name": "labels",
    "is_extended_gpu_resource": "requests",
    "is_spot": "labels",
    "iter_gpu_nodes": "frames",
    "label": "remediate",
    "mig_parted_configmap": "frames",
    "node_row": "frames",
    "nodes_frame": "frames",
    "non_gpu_pods": "requests",
    "requests_nvidia": "requests",
    "pod_row": "frames",
    "pods_frame": "frames",
    "read_list": "frames",
    "request_limit_findings": "requests",
    "request_limit_issues": "requests",
    "request_limit_problems": "requests",
    "resolve_owner": "frames",
    "resource_problems": "requests",
    "set_mig_config": "remediate",
    "system_namespaces": "requests",
    "taint": "remediate",
    "uncordon": "remediate",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
