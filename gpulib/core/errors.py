"""Exceptions raised by gpulib. Each names the URL, query or parameter at fault.

Every error derives from :class:`GpulibError` and carries a ``hint``: what to check next.
Runbooks catch ``GpulibError`` and render the message and hint instead of a traceback.
"""
from __future__ import annotations


class GpulibError(Exception):
    """Base class. ``hint`` tells the user what to check."""

    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None):
        from gpulib.core.redact import redact  # no secret in any message, whatever its origin
        super().__init__(redact(message))
        if hint is not None:
            self.hint = redact(hint)

    def __str__(self) -> str:  # message plus hint, so CLI users see both
        base = super().__str__()
        return f"{base} (hint: {self.hint})" if self.hint else base


class InvalidParameter(GpulibError, ValueError):
    """A runbook/CLI parameter has a bad value."""


class InvalidWindow(InvalidParameter):
    hint = "use a Prometheus duration such as 30m, 6h, 7d or 1h30m"


class UnknownNode(InvalidParameter):
    hint = "run `gpuops run fleet_overview` or `kubectl get nodes -l nvidia.com/gpu.present=true` to list GPU nodes"


class UnknownGPU(InvalidParameter):
    hint = "GPU is the index shown by `nvidia-smi` (0..N-1) or a UUID (GPU-...)"


class SourceError(GpulibError):
    """A data source could not answer."""


class PrometheusError(SourceError):
    def __init__(self, message: str, *, url: str = "", query: str = "", hint: str | None = None):
        self.url = url
        self.query = query
        super().__init__(message, hint=hint)


class PrometheusUnreachable(PrometheusError):
    hint = "check GPUOPS_PROMETHEUS_URL, that Prometheus is up (curl $URL/-/ready), and network policy/port-forward"


class PrometheusTimeout(PrometheusError):
    hint = "shorten the window, raise GPUOPS_PROMETHEUS_TIMEOUT, or check Prometheus load (prometheus_engine_query_duration_seconds)"


class PrometheusHTTPError(PrometheusError):
    def __init__(self, message: str, *, status: int, url: str = "", query: str = "", hint: str | None = None):
        self.status = status
        if hint is None:
            if status in (401, 403):
                hint = "check GPUOPS_PROMETHEUS_TOKEN / GPUOPS_PROMETHEUS_TOKEN_FILE or basic-auth user/password"
            elif status >= 500:
                hint = "Prometheus answered with a server error; check its logs and load, then retry"
            else:
                hint = "check the URL path (Thanos/Mimir may need a prefix such as /prometheus)"
        super().__init__(message, url=url, query=query, hint=hint)


class PrometheusBadResponse(PrometheusError):
    hint = ("the URL answered, but not like the Prometheus HTTP API: check that GPUOPS_PROMETHEUS_URL points at "
            "Prometheus (not a login page or proxy) and try curl \"$GPUOPS_PROMETHEUS_URL/api/v1/query?query=up\"")


class InvalidQuery(PrometheusError):
    hint = "the PromQL did not parse; check metric and label names"


class EmptyResult(SourceError):
    """A query returned no series."""

    def __init__(self, message: str, *, query: str = "", hint: str | None = None):
        self.query = query
        super().__init__(message, hint=hint or (
            "the metric may not be exported: check the dcgm-exporter counters CSV, the scrape target "
            "(up{job=~\".*dcgm.*\"}) and the label filters"))


class NoInput(SourceError):
    """A verdict was asked for but none of its inputs could be read: the run is INCOMPLETE, never OK."""

    hint = ("check that dcgm-exporter runs and is scraped for this node in the window (up{job=~\".*dcgm.*\"}), "
            "or pass a saved kernel log / nvidia-smi -q")


class KubernetesError(SourceError):
    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None):
        self.status = status
        super().__init__(message, hint=hint)


class KubeconfigMissing(KubernetesError):
    hint = "set KUBECONFIG or pass kubeconfig=..., or run in-cluster with a service account"


class SnapshotError(SourceError):
    hint = "a snapshot folder holds nodes.json (kubectl get nodes -o json), pods.json (kubectl get pods -A -o json) and metrics.txt (curl <dcgm-exporter>:9400/metrics)"


class CollectError(KubernetesError):
    """Node evidence collection (``gpuops collect``, :mod:`gpulib.kube.collect`) failed. ``reason`` names the
    failure (``PodStuckPending``, ``ImagePullFailed``, ``PodFailed``, ``LogStreamCut``, ``CollectTimeout``,
    ``CleanupFailed``, ``CollectRefused``); ``result`` holds what was collected before it failed, if anything."""

    reason = "CollectFailed"
    hint = "see `kubectl -n <namespace> describe pod <pod>` while it runs, and the collect settings (gpulib/data/kube/collect_settings.csv)"

    def __init__(self, message: str, *, reason: str | None = None, status: int | None = None, hint: str | None = None,
                 result=None):
        if reason:
            self.reason = reason
        self.result = result
        super().__init__(f"{self.reason}: {message}", status=status, hint=hint)
