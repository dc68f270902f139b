"""``live``: Prometheus (DCGM series) plus the Kubernetes API (nodes, pods) of a real cluster."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from gpulib.sources.prometheus import PrometheusSource


class LiveSource(PrometheusSource):
    """``connect("live")``: Prometheus settings from the environment (see :mod:`.prometheus`),
    Kubernetes from ``kubeconfig``/``context`` (default ``$KUBECONFIG``/``$GPUOPS_KUBE_CONTEXT``) or in-cluster."""

    name = "live"

    def __init__(self, prometheus_url: str | None = None, *, kubeconfig: str | Path | None = None,
                 context: str | None = None, in_cluster: bool | None = None, config: str | Path | None = None,
                 end: datetime | str | None = None, kube=None, **kwargs):
        super().__init__(prometheus_url or kwargs.pop("url", None), config=config, end=end, kube=kube)
        if kube is None:  # built on first use: no client import or kubeconfig read for DCGM-only work
            if in_cluster is None:
                in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not (kubeconfig or os.environ.get("KUBECONFIG"))
            context = context or os.environ.get("GPUOPS_KUBE_CONTEXT") or None

            def factory():
                from gpulib.kube.client import KubeCluster
                return KubeCluster(kubeconfig=kubeconfig, context=context, in_cluster=in_cluster)
            self._kube_factory = factory

    def describe(self) -> str:
        return f"live cluster (Prometheus at {self.settings.url})"
