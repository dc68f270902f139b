"""Alert -> runbook + parameters, by the routes table generated beside the rules
(``deploy/prometheus/routes.yaml``, :func:`gpulib.xid.alert_routes`), and the checks every parameter passes.

Only runbooks of the catalogue and their parameters are accepted; values are converted as ``gpuops run -p``
converts them (:func:`gpulib.inspection.resolve_params`) and node names / GPU ids are checked by
:mod:`gpulib.core.validate`, so a label value from an alert never reaches PromQL or a shell unchecked.
Parameters that name files or folders, or pick the data source, are the server's to set, never a caller's.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import yaml

from gpulib.core import validate
from gpulib.core.errors import InvalidParameter
from gpulib.inspection import SERVER_ONLY, resolve_params, server_only
from gpulib.run.catalogue import catalogue
from gpulib.run.params import path_params
from gpulib.xid import alert_routes

#: parameters a page (GET /run/..., no token) may not set beyond :func:`gpulib.inspection.server_only`: what creates
#: or writes something with the server's credentials (``collect``: a privileged pod on the node). ``gpuops mcp``
#: refuses the same (``gpulib.mcp.tools.MCP_SERVER_ONLY``; tests/serve/test_page_guard.py holds them together)
PAGE_REFUSED = ("collect",)


def load_catalogue() -> dict[str, Any]:
    """The catalogue, read once: parsing every notebook per request is slow, and ``ast.parse`` (the parameter
    defaults' ``literal_eval``) from several threads at once can fail on CPython 3.11 ("AST constructor
    recursion depth mismatch"). Runs look their notebook up here too."""
    with _CAT_LOCK:
        return catalogue()


_CAT_LOCK = threading.Lock()


def load_routes(path: Path | None = None, cat: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    if path is None:
        return alert_routes()["routes"]
    doc = yaml.safe_load(Path(path).read_text()) or {}
    routes = doc.get("routes")
    if not isinstance(routes, dict):
        raise InvalidParameter(f"{path}: no routes: mapping", hint="generate it with gpuops alerts --base-url URL")
    cat = cat if cat is not None else load_catalogue()
    for alert, r in routes.items():
        if r.get("runbook") not in cat:
            raise InvalidParameter(
                f"{path}: alert {alert} routes to {r.get('runbook')!r}, which is not in the catalogue"
            )
    return routes


def check_params(runbook: str, raw: dict[str, str], cat: dict[str, Any], *, page: bool = False) -> dict[str, Any]:
    """Validated, typed parameters for ``runbook`` of ``cat`` (InvalidParameter / UnknownGPU on anything else);
    ``page``: asked by a page without a token, which may not set :data:`PAGE_REFUSED` either."""
    info = cat.get(runbook)
    if info is None or info.kind != "runbook":
        raise InvalidParameter(
            f"no runbook named {runbook!r}",
            hint="runbooks: " + ", ".join(n for n, i in cat.items() if i.kind == "runbook"),
        )
    paths = path_params(runbook)  # a file or folder on the server's machine (Param.kind): its operator names it
    for k in raw:
        if server_only(k) or k in paths or (page and k in PAGE_REFUSED):
            raise InvalidParameter(f"parameter {k!r} is set by the server, not by a request")
    params = resolve_params(info, [(k, str(v)) for k, v in raw.items()])
    if "node" in params:
        params["node"] = validate.node_name(params["node"])
    if "gpu" in params:
        params["gpu"] = validate.gpu_ref(params["gpu"]).value
    if "namespace" in params and params["namespace"]:
        params["namespace"] = validate.namespace(params["namespace"])
    return params


def side_effects(params: dict[str, Any]) -> bool:
    """Whether a run with ``params`` creates something (a :data:`PAGE_REFUSED` parameter set true): such a run gets
    no fast verdict (the fast path never creates anything); its notebook decides."""
    return any(str(params.get(k, "")).lower() in ("true", "1", "yes") for k in PAGE_REFUSED)


def route_alert(
    alert: dict[str, Any], routes: dict[str, dict[str, Any]], cat: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """(runbook, params) for one Alertmanager alert; InvalidParameter when it has no route or a bad label."""
    labels = alert.get("labels") or {}
    name = labels.get("alertname", "")
    route = routes.get(name)
    if route is None:
        raise InvalidParameter(f"alert {name!r} has no route", hint="routes come from deploy/prometheus/routes.yaml")
    raw = {}
    for param, spec in (route.get("params") or {}).items():
        val = next((labels[lb] for lb in spec.get("labels", []) if labels.get(lb)), None)
        if val is None:
            raise InvalidParameter(f"alert {name}: none of the labels {spec.get('labels')} is set for {param}")
        raw[param] = val
    return route["runbook"], check_params(route["runbook"], raw, cat)


#: a table of the server's decisions is pruned once it holds this many entries and twice what its last pruning left
PRUNE_MIN = 64


class Deduper:
    """One run per (alert group, runbook, parameters) within ``window`` seconds. A key older than the window decides
    nothing: such keys are dropped once the table has doubled since it was last pruned (each alert group is a key of
    its own, so without it the table grew by an entry per alert for the server's life)."""

    def __init__(self, window: float):
        self.window = window
        self._seen: dict[tuple, tuple[float, str]] = {}
        self._lock = threading.Lock()
        self._prune_at = PRUNE_MIN

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def _put(self, key: tuple, now: float, run_id: str) -> None:
        """``key`` seen now (the lock held); the keys past the window dropped when the table has doubled."""
        self._seen[key] = (now, run_id)
        if len(self._seen) > self._prune_at:
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window}
            self._prune_at = max(PRUNE_MIN, 2 * len(self._seen))

    @staticmethod
    def key(group: str, runbook: str, params: dict[str, Any]) -> tuple:
        return (group, runbook, tuple(sorted((k, str(v)) for k, v in params.items())))

    def claim(self, key: tuple, run_id_factory) -> tuple[str, bool]:
        """(run id, new?) -- the existing run within the window, else a new one from ``run_id_factory()``."""
        now = time.time()
        with self._lock:
            hit = self._seen.get(key)
            if hit and now - hit[0] < self.window:
                return hit[1], False
            run_id = run_id_factory()
            self._put(key, now, run_id)
            return run_id, True

    def lookup(self, key: tuple) -> str | None:
        """The run of ``key`` seen within the window, else None."""
        with self._lock:
            hit = self._seen.get(key)
            return hit[1] if hit and time.time() - hit[0] < self.window else None

    def remember(self, key: tuple, run_id: str) -> None:
        with self._lock:
            self._put(key, time.time(), run_id)

    def release(self, key: tuple, run_id: str) -> None:
        with self._lock:
            if self._seen.get(key, (0, None))[1] == run_id:
                del self._seen[key]


__all__ = [
    "PAGE_REFUSED",
    "SERVER_ONLY",
    "Deduper",
    "check_params",
    "load_catalogue",
    "load_routes",
    "route_alert",
    "server_only",
    "side_effects",
]
