"""The Kubernetes objects of a sized vLLM deployment (:class:`gpulib.vllm.sizing.DeploymentPlan`): Deployment (probes,
model cache volume, /dev/shm), Service, PodDisruptionBudget and HPA (autoscaling/v2 on a Prometheus-Adapter per-pod
metric), the Prometheus Adapter rules behind that metric, and a strict validation against the Kubernetes schema.
Settings (image, port, paths, HPA targets) come from ``gpulib/data/vllm/vllm_deploy.csv``.
"""

from __future__ import annotations

from typing import Any, Iterable

from gpulib.core import validate
from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import settings
from gpulib.vllm.sizing import DeploymentPlan, setting

__all__ = ["manifests", "adapter_rules", "validate_manifests"]


def _f(key: str) -> float:
    return settings("vllm_deploy").number(key)


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "vllm"}


def manifests(
    p: DeploymentPlan,
    *,
    name: str = "vllm",
    namespace: str = "inference",
    replicas: int = 1,
    gpu_product: str | None = None,
    cache_pvc: str | None = None,
    hf_token_secret: str | None = "hf-token",
    image: str | None = None,
) -> list[dict]:
    """Deployment, Service, PodDisruptionBudget and HorizontalPodAutoscaler for a plan.

    ``gpu_product``: the GFD ``nvidia.com/gpu.product`` label to pin (nodeSelector). ``cache_pvc``: a PVC for
    the model cache (else an emptyDir, re-downloaded on every start). ``hf_token_secret``: Secret with key
    ``token`` for gated models (None: no token). The HPA scales on waiting requests, or on p99 end-to-end
    latency when the plan has ``latency_p99_s`` (both served by Prometheus Adapter, see :func:`adapter_rules`).
    """
    validate.object_name(name, param="name", kind="Deployment/Service")
    if len(name) > 63:  # the Service of the same name is a DNS-1035 label
        raise InvalidParameter(f"name={name[:70]!r}... is longer than 63 characters (a Service name is a DNS label)")
    validate.namespace(namespace)
    if not p.fits:
        raise InvalidParameter(f"no manifests for a plan that does not fit: {p.findings[0].title}")
    if int(replicas) < 1:
        raise InvalidParameter(f"replicas={replicas}: need at least 1")
    port = int(setting("vllm_port"))
    labels = _labels(name)
    resource = p.mig_resource or "nvidia.com/gpu"
    count = 1 if p.mig_resource else p.tp
    probe = {
        "httpGet": {"path": setting("vllm_health_path"), "port": "http"},
        "periodSeconds": int(_f("probe_period_s")),
    }
    env = [{"name": "HF_HOME", "value": setting("model_cache_path")}]
    if hf_token_secret:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": hf_token_secret, "key": "token", "optional": True}},
            }
        )
    container = {
        "name": "vllm",
        "image": image or setting("vllm_image"),
        "args": p.vllm_args() + ["--port", str(port)],
        "ports": [{"name": "http", "containerPort": port}],
        "env": env,
        "resources": {"limits": {resource: count}, "requests": {resource: count}},
        "startupProbe": {**probe, "failureThreshold": int(_f("startup_failure_threshold"))},
        "readinessProbe": probe,
        "livenessProbe": {**probe, "failureThreshold": int(_f("liveness_failure_threshold"))},
        "volumeMounts": [
            {"name": "model-cache", "mountPath": setting("model_cache_path")},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    cache = {
        "name": "model-cache",
        **({"persistentVolumeClaim": {"claimName": cache_pvc}} if cache_pvc else {"emptyDir": {}}),
    }
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [cache, {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": setting("shm_size")}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if gpu_product:
        pod_spec["nodeSelector"] = {"nvidia.com/gpu.product": gpu_product}
    meta = lambda kind_suffix="": {"name": name + kind_suffix, "namespace": namespace, "labels": labels}  # noqa: E731
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(),
        "spec": {
            "replicas": int(replicas),
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(port),
                        "prometheus.io/path": setting("vllm_metrics_path"),
                    },
                },
                "spec": pod_spec,
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(),
        "spec": {"selector": labels, "ports": [{"name": "http", "port": port, "targetPort": "http"}]},
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
    }
    if p.latency_p99_s:
        metric = {"name": "vllm_e2e_request_latency_seconds_p99"}
        target = {"type": "AverageValue", "averageValue": f"{int(round(p.latency_p99_s * 1000))}m"}
    else:
        metric = {"name": "vllm_num_requests_waiting"}
        target = {"type": "AverageValue", "averageValue": str(int(_f("hpa_waiting_target")))}
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": meta(),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": int(replicas),
            "maxReplicas": int(replicas * _f("hpa_max_replicas_factor")),
            "metrics": [{"type": "Pods", "pods": {"metric": metric, "target": target}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}},
        },
    }
    return [deployment, service, pdb, hpa]


def adapter_rules() -> str:
    """Prometheus Adapter rules exposing the HPA metrics per pod (``vllm_num_requests_waiting``,
    ``vllm_e2e_request_latency_seconds_p99``)."""
    return """rules:
- seriesQuery: 'vllm:num_requests_waiting{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "vllm:num_requests_waiting", as: "vllm_num_requests_waiting"}
  metricsQuery: 'avg_over_time(vllm:num_requests_waiting{<<.LabelMatchers>>}[2m])'
- seriesQuery: 'vllm:e2e_request_latency_seconds_bucket{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "vllm:e2e_request_latency_seconds_bucket", as: "vllm_e2e_request_latency_seconds_p99"}
  metricsQuery: 'histogram_quantile(0.99, sum by (le, <<.GroupBy>>) (rate(vllm:e2e_request_latency_seconds_bucket{<<.LabelMatchers>>}[5m])))'
"""


def validate_manifests(objs: Iterable[dict], version: str = "1.29") -> list[str]:
    """Validate with kubernetes-validate (strict); returns ``["Deployment/vllm: ok", ...]`` or raises InvalidParameter."""
    import kubernetes_validate

    out = []
    for o in objs:
        where = f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
        try:
            kubernetes_validate.validate(o, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise InvalidParameter(f"{where} is not valid Kubernetes {version}: {str(exc).splitlines()[0]}") from exc
        out.append(f"{where}: valid for Kubernetes {version}")
    return out
