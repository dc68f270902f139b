"""``gpuops serve``: its options, parsed into a :class:`gpulib.serve.ServeConfig` and served (:mod:`gpulib.cli`
registers the command). The options are not written here: each is a row of ``gpulib/data/serve/serve_options.csv``
(:func:`gpulib.core.settings.serve_options`: name, flags, type, default, environment variable, help), which
``ServeConfig`` and docs/settings.md read too, as datasette declares its settings once
(https://github.com/simonw/datasette/blob/main/datasette/app.py, ``SETTINGS``)."""

from __future__ import annotations

import inspect
from typing import Optional

import typer

from gpulib.core.errors import GpulibError
from gpulib.core.settings import serve_options
from gpulib.run.report import fail
from gpulib.serve import run_server
from gpulib.serve.config import ServeConfig


def serve_cmd(**options):
    """Serve runbooks over HTTP: Alertmanager's webhook runs the routed runbook; runbook_url links open the verdict.

    POST /alertmanager needs `Authorization: Bearer <token>` (Alertmanager's http_config.authorization);
    runs are dry runs (nothing is ever remediated) and every parameter is validated as `gpuops run` does.
    """
    try:
        cfg = ServeConfig.build(**options)
        run_server(cfg)  # the app is built before it listens: its own checks (e.g. --renders kubernetes) fail here
    except GpulibError as exc:
        fail(exc)


def _signature() -> inspect.Signature:
    """serve_cmd's parameters as typer reads them (https://typer.tiangolo.com/tutorial/options/help/): one per row
    of the options table, an option without a default typed ``Optional``."""
    params = []
    for o in serve_options().values():
        kind = o.type if o.default is not None else Optional[o.type]
        opt = typer.Option(o.default, *o.flags, help=o.help)
        params.append(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=kind))
    return inspect.Signature(params)


serve_cmd.__signature__ = _signature()
