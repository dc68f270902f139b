"""Settings of ``gpuops serve``; the webhook token comes from ``$GPUOPS_SERVE_TOKEN`` or a file, never a flag
(a flag shows in ``ps``), and is never printed or written anywhere."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gpulib.core.errors import InvalidParameter
from gpulib.core.validate import one_of
from gpulib.inspection import choose_source

TOKEN_ENV = "GPUOPS_SERVE_TOKEN"


@dataclass
class ServeConfig:
    out: Path
    token: str = field(repr=False)
    host: str = "127.0.0.1"
    port: int = 8080
    source: str = "demo"
    routes_file: Path | None = None
    kernels: int = 2
    #: "fast": the verdict first (gpulib.verdict, in a worker thread of this process), the notebook after it as the
    #: evidence; "notebook": the notebook's findings are the verdict (the path before the fast verdict existed)
    verdict: str = "fast"
    #: runs whose fast verdict is computed at once (threads of this process)
    verdict_workers: int = 2
    #: "local": this process decides alone; "kubernetes": replicas claim each incident through a Lease
    claims: str = "local"
    #: kernels kept started with gpulib imported for the renders (gpulib.warm); 0: each render starts its own
    warm_kernels: int = 0
    queue_limit: int = 50
    run_timeout: int = 600
    dedupe_window: int = 900
    fresh_for: int = 900
    public_url: str = ""
    notify_url: str | None = None
    notify_format: str = "slack"
    max_body: int = 1_000_000
    retry_after: int = 30

    @classmethod
    def build(cls, *, token_file: Path | None = None, token: str | None = None, **kw) -> "ServeConfig":
        if token is None:
            if token_file is not None:
                try:
                    token = Path(token_file).read_text().strip()
                except OSError as exc:
                    raise InvalidParameter(f"--token-file {token_file}: {exc.strerror}") from None
            else:
                token = os.environ.get(TOKEN_ENV, "").strip()
        if len(token or "") < 16:
            raise InvalidParameter(
                "no webhook token (or one shorter than 16 characters)",
                hint=f"set {TOKEN_ENV} or --token-file; e.g. `openssl rand -hex 32`",
            )
        kw = {k: v for k, v in kw.items() if v is not None}
        for k in ("kernels", "queue_limit", "run_timeout", "max_body", "verdict_workers"):
            if k in kw and int(kw[k]) < 1:
                raise InvalidParameter(f"--{k.replace('_', '-')} must be at least 1")
        if int(kw.get("warm_kernels") or 0) < 0:
            raise InvalidParameter("--warm-kernels must be 0 or more")
        if "claims" in kw:
            one_of(kw["claims"], ("local", "kubernetes"), param="--claims")
        if "verdict" in kw:
            one_of(kw["verdict"], ("fast", "notebook"), param="--verdict")
        if "notify_format" in kw:
            one_of(kw["notify_format"], ("slack", "json"), param="--notify-format")
        if "source" in kw:  # the rules of gpuops run --source: a backend name or a snapshot folder
            choose_source(kw["source"])
        cfg = cls(token=token, **kw)
        cfg.out = Path(cfg.out).resolve()
        if not cfg.public_url:
            cfg.public_url = f"http://{cfg.host}:{cfg.port}"
        cfg.public_url = cfg.public_url.rstrip("/")
        return cfg
