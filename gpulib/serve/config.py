"""Settings of ``gpuops serve``; the webhook token comes from ``$GPUOPS_SERVE_TOKEN`` or a file, never a flag
(a flag shows in ``ps``), and is never printed or written anywhere."""

from __future__ import annotations

import hmac
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.core.errors import InvalidParameter
from gpulib.core.knowledge import settings
from gpulib.core.redact import register
from gpulib.core.settings import serve_options
from gpulib.core.validate import one_of
from gpulib.inspection import choose_source
from gpulib.kube.publish import parse_what

TOKEN_ENV = "GPUOPS_SERVE_TOKEN"
#: a replica's name (it names files in the shared run store)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
#: shorter tokens are refused (``openssl rand -hex 32`` gives 64 characters)
MIN_TOKEN_LEN = 16
#: the limits and deadlines of gpuops serve that are not command-line options: key, value, meaning and source
LIMITS = "serve_limits"


def limit(key: str):
    """A row of ``gpulib/data/serve/serve_limits.csv`` (its documented default)."""
    return settings(LIMITS)[key]


def read_token(token_file: Path | None = None, token: str | None = None, *, env: str = TOKEN_ENV) -> str:
    """The bearer token of an HTTP server of gpuops (``serve``, ``mcp``): ``token`` as given, else the file
    ``token_file``, else ``$env``; InvalidParameter (a usage error) when there is none or it is shorter than
    :data:`MIN_TOKEN_LEN`. The token is registered with :mod:`gpulib.core.redact`, so no output can show it."""

    if token is None:
        if token_file is not None:
            try:
                token = Path(token_file).read_text().strip()
            except OSError as exc:
                raise InvalidParameter(f"--token-file {token_file}: {exc.strerror}") from None
        else:
            token = os.environ.get(env, "").strip()
    if len(token or "") < MIN_TOKEN_LEN:
        raise InvalidParameter(
            f"no bearer token (or one shorter than {MIN_TOKEN_LEN} characters)",
            hint=f"set {env} or --token-file; e.g. `openssl rand -hex 32`",
        )
    register(token)
    return token


def bearer_refusal(authorization: str | None, token: str) -> tuple[int, str] | None:
    """Why a request with this ``Authorization`` header is refused: (401, why) without a bearer token, (403, why)
    with a wrong one (compared in constant time, :func:`hmac.compare_digest`); None when it carries ``token``."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return 401, "missing bearer token (Authorization: Bearer ...)"
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return 403, "wrong bearer token"
    return None


def _option(name: str, empty=""):
    """A field whose default is the option's row of ``gpulib/data/serve/serve_options.csv``
    (:func:`gpulib.core.settings.serve_options`), the one the command line shows; ``empty`` where the row has none."""

    def default():
        d = serve_options()[name].default
        return empty if d is None else d

    return field(default_factory=default)


@dataclass
class ServeConfig:
    """The settings of one server. Those that are options of ``gpuops serve`` take their default from its options
    table, so the command line and a ServeConfig built in Python never disagree."""

    out: Path
    token: str = field(repr=False)
    host: str = _option("host")
    port: int = _option("port")
    source: str = _option("source")
    routes_file: Path | None = _option("routes_file", None)
    kernels: int = _option("kernels")
    #: "fast": the verdict first (gpulib.run.verdict, in a worker thread of this process), the notebook after it as the
    #: evidence; "notebook": the notebook's findings are the verdict (the path before the fast verdict existed)
    verdict: str = _option("verdict")
    #: runs whose fast verdict is computed at once
    verdict_workers: int = _option("verdict_workers")
    #: "processes": each fast verdict in a worker process (gpulib.serve.runner.ProcessVerdicter, every core used);
    #: "threads": in a thread of this process (one core, shared with the HTTP handling)
    verdict_in: str = _option("verdict_in")
    #: "local": this process decides alone; "kubernetes": replicas claim each incident through a Lease (and may share
    #: one run store: gpulib/serve/store.py)
    claims: str = _option("claims")
    #: this replica's name in a shared run store (default $POD_NAME, else the host name); used with claims=kubernetes
    replica: str = _option("replica")
    #: "local": notebooks render in kernels of this server; "kubernetes": each render is a Job (gpulib/serve/jobs.py)
    renders: str = _option("renders")
    #: the render Jobs' image, run-store claim and namespace (default: the server's own pod's)
    render_image: str = _option("render_image")
    render_claim: str = _option("render_claim")
    render_namespace: str = _option("render_namespace")
    #: kernels kept started with gpulib imported for the renders (gpulib.warm); 0: each render starts its own
    warm_kernels: int = _option("warm_kernels")
    #: niceness added to the warm render kernels, so a storm's renders never slow its verdicts (0: as the server)
    render_nice: int = _option("render_nice")
    queue_limit: int = _option("queue_limit")
    run_timeout: int = _option("run_timeout")
    dedupe_window: int = _option("dedupe_window")
    fresh_for: int = _option("fresh_for")
    public_url: str = _option("public_url")
    notify_url: str | None = _option("notify_url", None)
    notify_format: str = _option("notify_format")
    #: what each verdict writes back to the cluster (gpulib/kube/publish.py): "", events, events,condition
    publish: str | None = _option("publish", None)
    max_body: int = _option("max_body")
    #: seconds a connection has to send its request line and headers (gpulib/serve/bodylimit.py HeaderDeadline)
    header_timeout: int = _option("header_timeout")
    retry_after: int = 30
    #: page-started runs (GET /run/..., no token) waiting at once, beside the alerts' queue_limit
    page_queue_limit: int = field(default_factory=lambda: int(limit("page_queue_limit")))
    #: new runs one client may start from pages per page_rate_window_s
    page_runs_per_client: int = field(default_factory=lambda: int(limit("page_runs_per_client")))
    page_rate_window_s: float = field(default_factory=lambda: float(limit("page_rate_window_s")))
    #: wall-clock seconds of one fast verdict (then INCOMPLETE, its worker replaced)
    verdict_deadline_s: float = field(default_factory=lambda: float(limit("verdict_deadline_s")))
    #: a verdict call running this long past its deadline makes /healthz unhealthy
    verdict_stuck_grace_s: float = field(default_factory=lambda: float(limit("verdict_stuck_grace_s")))

    @classmethod
    def build(cls, *, token_file: Path | None = None, token: str | None = None, **kw) -> "ServeConfig":
        token = read_token(token_file, token)
        kw = {k: v for k, v in kw.items() if v is not None}
        try:
            cls._check(kw)
        except InvalidParameter as exc:  # a server option, not a runbook parameter: point at the server's help
            if exc.hint != InvalidParameter.hint:
                raise
            raise InvalidParameter(
                exc.args[0], hint="`gpuops serve --help` lists every option and its values"
            ) from None
        cfg = cls(token=token, **kw)
        cfg.out = Path(cfg.out).resolve()
        if not cfg.public_url:
            cfg.public_url = f"http://{cfg.host}:{cfg.port}"
        cfg.public_url = cfg.public_url.rstrip("/")
        cfg.replica = cfg.replica or os.environ.get("POD_NAME") or socket.gethostname()
        return cfg

    @staticmethod
    def _check(kw: dict) -> None:
        """InvalidParameter for the first option in ``kw`` with a value the server cannot take."""
        for k in (
            "kernels",
            "queue_limit",
            "run_timeout",
            "max_body",
            "verdict_workers",
            "page_queue_limit",
            "header_timeout",
        ):
            if k in kw and int(kw[k]) < 1:
                raise InvalidParameter(f"--{k.replace('_', '-')} must be at least 1")
        for k in ("verdict_deadline_s", "verdict_stuck_grace_s", "page_rate_window_s"):
            if k in kw and not float(kw[k]) > 0:
                raise InvalidParameter(f"{k} must be more than 0 seconds")
        if not 0 <= int(kw.get("render_nice") or 0) <= 19:
            raise InvalidParameter("--render-nice must be 0 to 19")
        if int(kw.get("warm_kernels") or 0) < 0:
            raise InvalidParameter("--warm-kernels must be 0 or more")
        if "claims" in kw:
            one_of(kw["claims"], ("local", "kubernetes"), param="--claims")
        if "renders" in kw:
            one_of(kw["renders"], ("local", "kubernetes"), param="--renders")
        if kw.get("replica") and not _NAME.fullmatch(str(kw["replica"])):
            raise InvalidParameter(f"--replica {kw['replica']!r}: letters, digits, '.', '_' and '-' only (a file name)")
        if "verdict_in" in kw:
            one_of(kw["verdict_in"], ("processes", "threads"), param="--verdict-in")
        if "verdict" in kw:
            one_of(kw["verdict"], ("fast", "notebook"), param="--verdict")
        if "publish" in kw:
            parse_what(kw["publish"])
        if "notify_format" in kw:
            one_of(kw["notify_format"], ("slack", "json", "pagerduty"), param="--notify-format")
        if "source" in kw:  # the rules of gpuops run --source: a backend name or a snapshot folder
            choose_source(kw["source"])
