"""What the tools of ``gpuops mcp`` do, as plain functions over the package's own modules: the catalogue and its
parameters (:mod:`gpulib.inspection`), a run through the one run engine (:mod:`gpulib.run.render`), a run folder read
back (:mod:`gpulib.run.record`), the XID catalog and its SOP rows (:mod:`gpulib.xid`) and the node-evidence pod
(:mod:`gpulib.kube.collect`). Each returns a JSON-ready dict; a usage error is an
:class:`~gpulib.core.errors.InvalidParameter`, whose text the server answers with (what ``gpuops`` prints before it
exits 2). Nothing here applies anything: runs are the runbooks' dry runs and the collection is only planned.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml

from gpulib.core.errors import InvalidParameter
from gpulib.core.redact import redact_obj
from gpulib.core.validate import command
from gpulib.inspection import choose_source, server_only
from gpulib.kube import collect as kc
from gpulib.run import render
from gpulib.run.catalogue import catalogue, find_notebook
from gpulib.run.index_page import read_run
from gpulib.run.params import check_targets, path_params, prepare
from gpulib.run.record import ACTIVE, RUN_ID, Status
from gpulib.xid import lookup, sop

#: parameters a caller of gpuops mcp may not set beyond the server's own (gpulib.inspection.SERVER_ONLY):
#: ``collect`` makes a live run create a privileged pod on the node, which an assistant must not decide
MCP_SERVER_ONLY = ("collect",)
#: runs listed when read_run is called without a run id
RECENT_RUNS = 20
#: what every answer about a run says about the commands in it
DRY_RUN_NOTE = "dry run: nothing was applied; the commands are for an engineer to run after reading the verdict"


def _text(value: Any) -> str:
    """A parameter value as ``gpuops run -p KEY VALUE`` takes it, so it is checked by the same rules."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


class Tools:
    """The tools over one output root (``out``: run folders) and one data source (``source``, as ``--source``).

    ``kernels``: runs at once (more calls wait); ``run_timeout``: seconds before a run's kernel is killed;
    ``unset_env``: names of this process' environment a run's kernel must not see (the server's token)."""

    def __init__(
        self,
        out: Path,
        source: str | None = "demo",
        *,
        kernels: int = 2,
        run_timeout: float | None = 600,
        unset_env: tuple[str, ...] = (),
    ):
        if kernels < 1:
            raise InvalidParameter("--kernels must be at least 1")
        choose_source(source)  # the rules of gpuops run --source, checked at start
        self.out = Path(out).resolve()
        self.source = source
        self.run_timeout = run_timeout
        self.unset_env = tuple(unset_env)
        self._slots = threading.BoundedSemaphore(kernels)
        #: the catalogue is read under a lock: tools run in threads, and ``ast.parse`` (the parameter defaults'
        #: ``literal_eval``) from several threads at once can fail on CPython 3.11 (gpulib/serve/routing.py)
        self._catalogue_lock = threading.Lock()

    # ------------------------------------------------------------------------------- runbooks
    def list_runbooks(self) -> dict[str, Any]:
        runbooks = []
        with self._catalogue_lock:
            infos = list(catalogue().values())
        for info in infos:
            if info.kind == "learn":
                continue
            runbooks.append(
                {
                    "name": info.name,
                    "kind": info.kind,
                    "title": info.title,
                    "description": info.description,
                    "parameters": [
                        {
                            "name": p.name,
                            "default": p.default,
                            "type": type(p.default).__name__,
                            "help": p.help,
                            "set_by": "server" if self._server_only(p.name, info.name) else "caller",
                        }
                        for p in info.params
                    ],
                }
            )
        return redact_obj({"source": self.source or "the notebook's default", "runbooks": runbooks})

    @staticmethod
    def _server_only(name: str, runbook: str) -> bool:
        """Only the server sets it: :func:`gpulib.inspection.server_only`, :data:`MCP_SERVER_ONLY`, and a file or
        folder the runbook declares (``Param.kind``)."""
        return server_only(name) or name in MCP_SERVER_ONLY or name in path_params(runbook)

    def run_runbook(self, runbook: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._catalogue_lock:
            info = find_notebook(runbook)
        if info.kind == "learn":
            raise InvalidParameter(f"{info.name} is a lesson, not a runbook", hint="list_runbooks names the runbooks")
        given = dict(parameters or {})
        for key in given:
            if self._server_only(key, info.name):
                raise InvalidParameter(f"parameter {key!r} is set by the server, not by a request")
        params = prepare(info, [(k, _text(v)) for k, v in given.items()], source=self.source)
        check_targets(params)  # a node the source does not have: the same answer as gpuops run, and no run folder
        with self._slots:
            res = render.execute(
                info, params, self.out, progress=False, run_timeout=self.run_timeout, unset_env=self.unset_env
            )
        if res.usage_errors:  # a value that passed the checks but matched nothing (e.g. a node not in the fleet)
            raise InvalidParameter("; ".join(map(str, res.usage_errors)), hint=f"the run is {res.out_dir.name}")
        return self._answer(read_run(res.out_dir, full=True), res.out_dir)

    def _answer(self, rec: dict[str, Any], folder: Path) -> dict[str, Any]:
        status = rec["status"]
        if status == Status.INCOMPLETE:
            message = (
                "INCOMPLETE: a step could not get its data, so this verdict is not the whole picture and is never an "
                "all-clear; missing: " + "; ".join(map(str, rec["errors"]))
            )
        elif status in (Status.FAILED, Status.INTERRUPTED):
            message = f"FAILED: {rec['error'] or 'the run did not finish'}"
        elif status == Status.BAD_PARAMETER:
            message = f"BAD PARAMETER: {rec['error'] or 'a value matched nothing'}; no verdict"
        elif status in ACTIVE:
            message = "RUNNING: the run has not finished; read it again later"
        else:
            n = len(rec["findings"]) if isinstance(rec["findings"], list) else rec["findings"]
            message = f"done: worst finding {rec['severity'] or 'none'}, {n} finding(s)"
        html = folder / rec["html"] if rec.get("html") else None
        return redact_obj(
            {
                "run_id": rec["id"],
                "runbook": rec["runbook"],
                "status": status,
                "message": message,
                "verdict": {k: rec[k] for k in ("severity", "cause", "node", "gpu", "sop_step")},
                "next_commands": rec["commands"],
                "note": DRY_RUN_NOTE,
                "findings": rec["findings"],
                "missing_data": rec["errors"],
                "parameters": rec["params"],
                "started": rec["started"],
                "finished": rec["finished"],
                "html": str(html) if html else None,
                "html_url": html.as_uri() if html else None,
                "summary_md": rec.get("summary", ""),
            }
        )

    # ------------------------------------------------------------------------------- past runs
    def read_run(self, run_id: str = "") -> dict[str, Any]:
        run_id = (run_id or "").strip()
        if not run_id:
            folders = sorted((p for p in self.out.glob("*") if p.is_dir() and RUN_ID.match(p.name)), reverse=True)
            keep = ("id", "runbook", "status", "severity", "cause", "node", "gpu", "created")
            runs = [{k: r[k] for k in keep} for r in map(read_run, folders[:RECENT_RUNS])]
            return redact_obj({"out": str(self.out), "runs": runs})
        folder = self.out / run_id
        if not RUN_ID.match(run_id) or not folder.is_dir():
            raise InvalidParameter(
                f"no run {run_id[:80]!r} under {self.out}",
                hint="a run id looks like 20261201T064500Z-xid_ecc_triage-1a2b3c; read_run without one lists them",
            )
        return self._answer(read_run(folder, full=True), folder)

    # ------------------------------------------------------------------------------------- XID
    @staticmethod
    def xid_lookup(code: int | str) -> dict[str, Any]:

        rec = lookup(code)
        buckets = [rec.immediate_action] + (
            [rec.investigatory_action] if rec.investigatory_action not in ("", rec.immediate_action) else []
        )
        sops = []
        for bucket in buckets:
            row = sop(bucket)
            sops.append(
                {
                    "bucket": bucket,
                    **{k: row.get(k, "") for k in ("verdict", "severity", "sop_step", "commands", "escalation")},
                    "source": row.get("source", ""),
                }
            )
        return redact_obj(
            {
                **{
                    k: getattr(rec, k)
                    for k in ("code", "known", "mnemonic", "title", "description", "category", "fatal")
                },
                "immediate_action": rec.immediate_action,
                "investigatory_action": rec.investigatory_action,
                "dcgm_severity": rec.dcgm_severity,
                "notes": rec.notes,
                "source": rec.source,
                "sop": sops,
                "note": "commands are templates: a run of xid_ecc_triage fills {node}, {gpu} and the pods on the GPU",
            }
        )

    # --------------------------------------------------------------------------------- collect
    @staticmethod
    def plan_collection(node: str, diag_level: int | str = 0) -> dict[str, Any]:

        try:
            diag_level = int(str(diag_level).strip() or 0)
        except ValueError:
            raise InvalidParameter(f"diag level {diag_level!r}: use 0 (none) or 1-4 (dcgmi diag -r LEVEL)") from None
        spec = kc.pod_spec(node, diag_level=diag_level or None)
        kc.validate_spec(spec)
        level = ["--diag", str(diag_level)] if diag_level else []
        name = spec["spec"]["nodeName"]
        answer = {
            "dry_run": True,
            "node": name,
            "namespace": spec["metadata"]["namespace"],
            "sections": [{"section": c["section"], "command": c["command"]} for c in kc.sections(diag_level or None)],
            "pod_yaml": yaml.safe_dump(spec, sort_keys=False),
            "apply_command": command("gpuops", "collect", name, "--apply", *level),
            "then": command("gpuops", "run", "xid_ecc_triage", "-p", "node", name) + " --snapshot FOLDER",
            "note": "nothing was created: an engineer runs apply_command, which writes the snapshot FOLDER "
            "that 'then' reads",
        }
        if diag_level:
            answer["warning"] = (
                f"dcgmi diag -r {diag_level} loads every GPU of {name} for minutes; gpuops collect refuses it while "
                "GPU pods run there unless --force"
            )
        return redact_obj(answer)
