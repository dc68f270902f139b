"""Names NVIDIA's device plugin, gpu-feature-discovery (GFD) and the GPU Operator publish on Kubernetes objects:
resource names (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``), node label keys, the ClusterPolicy
CRD, Kubernetes well-known labels, and the spot-node rules of ``gpulib/data/kube/spot_labels.csv``.

Sources: ``NVIDIA/k8s-device-plugin: README.md``, ``docs/gpu-feature-discovery/README.md``, ``api/config/v1/consts.go``
@ 1b826acc; ``NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go`` @ a22dbf67;
https://kubernetes.io/docs/reference/labels-annotations-taints/.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pandas as pd

from gpulib.core.knowledge import load_table

# --- names published by NVIDIA's device plugin / GFD / GPU Operator (NVIDIA/k8s-device-plugin: README.md,
# docs/gpu-feature-discovery/README.md, api/config/v1/consts.go @ 1b826acc) ---
GPU_RESOURCE = "nvidia.com/gpu"
#: what the device plugin advertises instead under time-slicing/MPS with ``renameByDefault: true``
#: (``NVIDIA/k8s-device-plugin: api/config/v1`` @ 1b826acc)
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
#: GFD appends this to ``nvidia.com/gpu.product`` when GPUs are replicated and NOT renamed
#: (``NVIDIA/k8s-device-plugin: docs/gpu-feature-discovery/README.md`` @ 1b826acc)
SHARED_PRODUCT_SUFFIX = "-SHARED"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_MEMORY = "nvidia.com/gpu.memory"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_SHARING = "nvidia.com/gpu.sharing-strategy"
LABEL_MACHINE = "nvidia.com/gpu.machine"
# Kubernetes well-known labels (kubernetes.io/docs/reference/labels-annotations-taints/)
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
LABEL_POD_TEMPLATE_HASH = "pod-template-hash"
ANNOTATION_MIRROR_POD = "kubernetes.io/config.mirror"
# ClusterPolicy CRD of the GPU Operator (NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go @ a22dbf67)
CLUSTERPOLICY_GROUP, CLUSTERPOLICY_VERSION, CLUSTERPOLICY_PLURAL = "nvidia.com", "v1", "clusterpolicies"
#: the ConfigMap MIG Manager reads when ClusterPolicy ``spec.migManager.config.name`` names none, and the key holding
#: the mig-parted document (NVIDIA/gpu-operator: controllers/object_controls.go ``MigPartedDefaultConfigMapName``,
#: assets/state-mig-manager/0400_configmap.yaml @ a22dbf67)
MIG_PARTED_DEFAULT_CONFIGMAP, MIG_PARTED_CONFIG_KEY = "default-mig-parted-config", "config.yaml"


@lru_cache(maxsize=1)
def _spot_rules() -> tuple[tuple[str, str], ...]:
    t = load_table("spot_labels")
    return tuple((str(r.label), str(r.value).lower()) for r in t.itertuples())


def is_spot(labels: dict) -> bool:
    """True when a node label marks spot/preemptible capacity (rules in ``data/kube/spot_labels.csv``)."""
    return any(str(labels.get(k, "")).lower() == v for k, v in _spot_rules())


def gpu_resource_name(row: Any) -> str:
    """The resource a node's device plugin advertises for whole or shared GPUs: ``nvidia.com/gpu.shared``
    when GPUs are replicated (``gpu_replicas`` > 1) and GFD's product has no ``-SHARED`` suffix (the plugin
    renamed them, ``renameByDefault: true``), else ``nvidia.com/gpu``. ``row``: a NODE_COLUMNS row."""
    reps = getattr(row, "gpu_replicas", pd.NA)
    product = str(getattr(row, "gpu_product", "") or "")
    if not pd.isna(reps) and int(reps) > 1 and product and not product.endswith(SHARED_PRODUCT_SUFFIX):
        return GPU_SHARED_RESOURCE
    return GPU_RESOURCE


# GPUCluster CRD of the GPU Operator's DRA stack (NVIDIA/gpu-operator: api/nvidia/v1alpha1/gpucluster_types.go
# @ a22dbf67, config/crd/bases/nvidia.com_gpuclusters.yaml: cluster-scoped, plural gpuclusters)
GPUCLUSTER_GROUP, GPUCLUSTER_VERSION, GPUCLUSTER_PLURAL = "nvidia.com", "v1alpha1", "gpuclusters"
