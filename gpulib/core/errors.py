"""Exceptions raised by gpulib. Each names the URL, query or parameter at fault.

Every error derives from :class:`GpulibError` and carries a ``hint``: what to check next.
Runbooks catch ``GpulibError`` and render the message and hint instead of a traceback.
"""

from __future__ import annotations

from gpulib.core.redact import redact  # no secret in any message, whatever its origin


class GpulibError(Exception):
    """Base class. ``hint`` tells the user what to check."""

    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(redact(message))
        if hint is not None:
            self.hint = redact(hint)

    def __str__(self) -> str:  # message plus hint, so CLI users see both
        base = super().__str__()
        return f"{base} (hint: {self.hint})" if self.hint else base


def usage_text(exc: BaseException) -> str:
    """What ``gpuops`` prints for a usage error before it exits 2 (``error: <message> (hint: ...)``), secrets
    masked; ``gpuops mcp`` answers a bad parameter with the same text."""
    return redact(f"error: {exc}")


class InvalidParameter(GpulibError, ValueError):
    """A runbook/CLI parameter has a bad value."""

    hint = "`gpuops list <runbook>` says what each parameter takes (in a notebook: the comment beside it)"


class UnknownSetting(InvalidParameter, KeyError):
    """A key that a ``gpulib/data/<domain>/<name>.csv`` settings table does not have (one text for every table)."""

    def __init__(self, where: str, key: str, known: list[str]):
        self.where, self.key, self.known = where, key, list(known)
        super().__init__(
            f"{where} has no key {key!r}; known keys: {', '.join(self.known)}",
            hint=f"use one of the known keys, or add a row (with a source) to {where}",
        )

    def __str__(self) -> str:  # the message plus hint, not KeyError's quoted repr
        return f"{self.args[0]} (hint: {self.hint})"


class InvalidWindow(InvalidParameter):
    hint = "use a Prometheus duration such as 30m, 6h, 7d or 1h30m"


class UnknownNode(InvalidParameter):
    hint = "run `gpuops run fleet_overview` or `kubectl get nodes -l nvidia.com/gpu.present=true` to list GPU nodes"


class UnknownGPU(InvalidParameter):
    hint = "GPU is the index shown by `nvidia-smi` (0..N-1) or a UUID (GPU-...)"


class SourceError(GpulibError):
    """A data source could not answer."""

    hint = (
        "check that the data source (source=, snapshot_dir=, GPUOPS_PROMETHEUS_URL, KUBECONFIG) is reachable and "
        "complete"
    )


class NotProvided(SourceError):
    """This source does not have the data asked for (a capability of other backends)."""

    hint = "run the runbook with a source that has it (source='live' for the Kubernetes API and Prometheus)"


class PrometheusError(SourceError):
    hint = "check GPUOPS_PROMETHEUS_URL and run the query in the message in the Prometheus UI"

    def __init__(self, message: str, *, url: str = "", query: str = "", hint: str | None = None):
        self.url = url
        self.query = query
        super().__init__(message, hint=hint)


class PrometheusUnreachable(PrometheusError):
    hint = "check GPUOPS_PROMETHEUS_URL, that Prometheus is up (curl $URL/-/ready), and network policy/port-forward"


class PrometheusTimeout(PrometheusError):
    hint = (
        "shorten the window, raise GPUOPS_PROMETHEUS_TIMEOUT, or check Prometheus load "
        "(prometheus_engine_query_duration_seconds)"
    )


class PrometheusHTTPError(PrometheusError):
    hint = "check the HTTP status in the message: 401/403 credentials, 404 the URL path, 5xx Prometheus itself"

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
    hint = (
        "the URL answered, but not like the Prometheus HTTP API: check that GPUOPS_PROMETHEUS_URL points at "
        'Prometheus (not a login page or proxy) and try curl "$GPUOPS_PROMETHEUS_URL/api/v1/query?query=up"'
    )


class InvalidQuery(PrometheusError):
    hint = "the PromQL did not parse; check metric and label names"


class EmptyResult(SourceError):
    """A query returned no series."""

    hint = (
        "the metric may not be exported: check the dcgm-exporter counters CSV, the scrape target "
        '(up{job=~".*dcgm.*"}) and the label filters'
    )

    def __init__(self, message: str, *, query: str = "", hint: str | None = None):
        self.query = query
        super().__init__(message, hint=hint or None)


class NoInput(SourceError):
    """A verdict was asked for but none of its inputs could be read: the run is INCOMPLETE, never OK."""

    hint = (
        'check that dcgm-exporter runs and is scraped for this node in the window (up{job=~".*dcgm.*"}), '
        "or pass a saved kernel log / nvidia-smi -q"
    )


class KubernetesError(SourceError):
    hint = (
        "check the kubeconfig context, that the API server is reachable (kubectl cluster-info) and the RBAC "
        "rights of the user (kubectl auth can-i)"
    )

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None):
        self.status = status
        super().__init__(message, hint=hint)


class KubeconfigMissing(KubernetesError):
    hint = "set KUBECONFIG or pass kubeconfig=..., or run in-cluster with a service account"


class SnapshotError(SourceError):
    hint = (
        "a snapshot folder holds nodes.json (kubectl get nodes -o json), pods.json (kubectl get pods -A -o json) "
        "and metrics.txt (curl <dcgm-exporter>:9400/metrics)"
    )


class CollectError(KubernetesError):
    """Node evidence collection (``gpuops collect``, :mod:`gpulib.kube.collect`) failed. ``reason`` names the
    failure (``PodStuckPending``, ``ImagePullFailed``, ``PodFailed``, ``LogStreamCut``, ``CollectTimeout``,
    ``CleanupFailed``, ``CollectRefused``); ``result`` holds what was collected before it failed, if anything."""

    reason = "CollectFailed"
    hint = (
        "see `kubectl -n <namespace> describe pod <pod>` while it runs, and the collect settings "
        "(gpulib/data/kube/collect_settings.csv)"
    )

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        status: int | None = None,
        hint: str | None = None,
        result=None,
    ):
        if reason:
            self.reason = reason
        self.result = result
        super().__init__(f"{self.reason}: {message}", status=status, hint=hint)


# --------------------------------------------------------------------------------------------------
# domain errors (raised by one domain; re-exported by the module that raises them)
# --------------------------------------------------------------------------------------------------
class UnknownGPUModel(InvalidParameter):
    """A GPU model that is not in the MIG catalog (``gpulib/data/mig/mig_profiles.csv``)."""

    hint = (
        "use a catalog name (A30-24GB, A100-40GB, A100-80GB, H100-80GB, H100-94GB, H100-96GB, GH200-144GB, "
        "H200-141GB, B200) or a node's nvidia.com/gpu.product label; for another GPU build a catalog with "
        "gpulib.mig.smi_parsers.catalog_from_smi(lgip_text, lgipp_text)"
    )


class UnknownProfile(InvalidParameter):
    hint = "list the GPU's profiles with gpulib.mig.catalog.profiles(gpu_model) or `nvidia-smi mig -lgip`"


class MigConfigRefused(InvalidParameter):
    """A MIG Manager config change that would drop configs in use (:mod:`gpulib.mig.parted_merge`)."""

    hint = (
        "include the configs in use: let the source read the cluster's MIG Manager ConfigMap (source='live' with "
        "`get configmaps` in the operator namespace) or pass its config.yaml as current_mig_config (kubectl -n "
        "gpu-operator get cm <migManager.config.name> -o jsonpath='{.data.config\\.yaml}'), and relabel nodes only "
        "to names the file contains"
    )


class MigParseError(GpulibError):
    hint = "pass the full text printed by `nvidia-smi mig -lgip` / `nvidia-smi mig -lgipp` (run on the GPU node)"


class UnknownModel(InvalidParameter):
    hint = "pick a catalog model (gpulib.vllm.memory.models()) or pass a ModelSpec with the config.json shape"


class DoesNotFit(InvalidParameter):
    """Raised by :func:`gpulib.vllm.sizing.plan` with ``strict=True`` when no configuration fits."""

    hint = (
        "try more GPUs (tensor parallel), a GPU with more memory, a shorter context_len, fewer concurrent "
        "requests or an FP8 KV cache; strict=False returns the closest plan with its findings"
    )


class ContradictoryChoice(InvalidParameter):
    """Install choices that cannot work together (e.g. the driver container on nodes with a host driver)."""

    hint = "change one of the two conflicting parameters; the message names both"


class PriceFileError(InvalidParameter):
    hint = (
        "a price file is a CSV with columns model, provider, pricing (on_demand|spot), price_per_gpu_hour, "
        "currency, as_of, source; model is the canonical key from gpulib/data/nvidia/gpu_specs.csv (e.g. H100-80GB)"
    )


class ProbeError(GpulibError):
    hint = "run `python3 -m gpulib.nccl.probe --help`; needs torch with CUDA and 2+ GPUs, or all_reduce_perf on PATH"


class MalformedKubernetesObject(SourceError, ValueError):
    """A kubectl/API JSON document does not have the shape of the list it should be."""

    hint = (
        "pass the output of `kubectl get nodes -o json` / `kubectl get pods -A -o json` "
        "(a List with an `items` array), not YAML or `-o wide` text"
    )


class NVMLUnavailable(SourceError):
    """NVML could not be loaded or initialised (no NVIDIA driver on this machine)."""

    hint = "run on a GPU node with the NVIDIA driver loaded (nvidia-smi works) and nvidia-ml-py installed"


class LockBusy(GpulibError):
    """Another remediation holds the cluster-wide lock (:mod:`gpulib.kube.lease`)."""

    hint = (
        "another remediation holds the lock (Lease gpuops-remediation): wait for it to finish, or check "
        "`kubectl get lease gpuops-remediation -o yaml` for its holder"
    )


class RemediationRefused(GpulibError):
    """The circuit breaker (or another guard) refused an action."""

    hint = (
        "cordoning more GPU nodes at once risks the fleet's capacity: uncordon recovered nodes first, "
        "or pass a higher max_share= deliberately (audited)"
    )


class VerdictDeadline(GpulibError):
    """A fast verdict of ``gpuops serve`` did not finish within its wall-clock deadline (its worker was replaced)."""

    hint = (
        "a data source answered too slowly: check Prometheus (GPUOPS_PROMETHEUS_URL) and the Kubernetes API from the "
        "server's pod; the notebook of the run shows which step waited"
    )


class SnapshotFileRefused(SnapshotError):
    """A file of a snapshot folder that is not read: a symlink leaving the folder, a FIFO, a device or socket, or a
    file larger than the bound of ``gpulib/data/sources/snapshot_limits.csv``."""

    hint = (
        "a snapshot holds regular files captured from the cluster (kubectl JSON, dcgm-exporter scrapes, dmesg, "
        "nvidia-smi -q): copy the file into the folder as a regular file (cut a large log to its last part, e.g. "
        "`tail -c 16M`), then run again"
    )


class RunStoreError(GpulibError):
    """``gpuops serve``'s run store (``--out``) cannot be written (a full disk, a read-only volume): no run is made."""

    hint = "free space on the run store's volume (gpuops serve --out) or make it writable; /healthz shows the error"
