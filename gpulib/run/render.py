"""The run engine: one run of a catalogued notebook, in this process, for ``gpuops run|demo|report``, ``gpuops
serve`` and ``gpuops mcp`` (papermill, warm kernels, the run's deadline, the HTML export).

Shaped like papermill's own split (https://github.com/nteract/papermill: ``execute.py`` runs, ``inspection.py``
reads the parameters, ``cli.py`` only parses): :func:`gpulib.run.params.prepare` resolves and validates a run's
parameters once, and :func:`execute` runs the notebook with papermill into its own folder, then masks secrets in the
executed notebook, exports a code-free HTML, reads its findings once into the :class:`RunResult` and hands the rest
to :mod:`gpulib.run.record` (status, ``summary.md``, the run index). Every run gets its own kernel with its own
environment (where to write findings), so runs in several threads of one process never share ``os.environ`` or the
working directory; with ``run_timeout`` the kernel and every process it started are killed when the time is up.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any, Iterable

from gpulib.catalogue import NotebookInfo
from gpulib.core.files import atomic_write
from gpulib.core.findings import load_findings, worst_severity
from gpulib.core.plotlyjs import charts_mode, write_plotly_js
from gpulib.core.redact import redact
from gpulib.core.settings import CHARTS_ENV, FINDINGS_ENV
from gpulib.inspection import CHARTS_PARAM, params_env
from gpulib.run import record as rr
from gpulib.run.diff import since_last_time
from gpulib.run.index_page import record, write_index
from gpulib.run.record import (
    EngineRecord,
    Status,
    new_run_dir,
    status_of,
    verdict_of,
    write_summary,
)

#: kernel logs errors only: no "running over TCP without encryption" (ipykernel kernelapp.py init_sockets)
KERNEL_ARGS = ("--IPKernelApp.log_level=ERROR",)


@dataclass
class RunResult:
    name: str
    out_dir: Path
    notebook: Path
    html: Path | None
    findings: list = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed: str | None = None
    usage_errors: list[str] = field(default_factory=list)
    #: the run was stopped at ``run_timeout`` (its kernel killed); ``failed`` says so
    timed_out: bool = False
    #: severity, cause, SOP step and commands of the top finding (:func:`gpulib.run.record.verdict_of`);
    #: empty when the run wrote no findings
    verdict: dict[str, Any] = field(default_factory=dict)
    #: the run used a pre-started kernel (:mod:`gpulib.warm`)
    warm: bool = False

    @property
    def worst(self) -> str:
        return worst_severity(self.findings).value

    @property
    def status(self) -> Status:
        """failed | bad parameter | incomplete | done (:func:`gpulib.run.record.status_of`)."""
        return status_of(self.failed, self.usage_errors, self.errors)


# ------------------------------------------------------------------------------------- execution
#: the HTML exporter of this process and the lock its use holds (:func:`export_html`)
_EXPORTER: list = []
_EXPORTER_LOCK = threading.Lock()


def export_html(nb_path: Path, html_path: Path, title: str) -> Path:
    """HTML without code cells (what a report reader wants), secrets masked.

    One exporter per process: a new one loads and compiles its Jinja templates again (nbconvert
    ``TemplateExporter.template`` and ``environment`` are cached on the instance,
    https://github.com/jupyter/nbconvert/blob/main/nbconvert/exporters/templateexporter.py), most of an export's
    time after the first in ``gpuops demo``, ``gpuops serve`` and the tests. Its use is locked: each export registers
    that notebook's filters on the exporter's one environment (``HTMLExporter.from_notebook_node``)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(nb_path), as_version=4)
    with _EXPORTER_LOCK:
        if not _EXPORTER:
            _EXPORTER.append(HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True))
        body, _ = _EXPORTER[0].from_notebook_node(nb, resources={"metadata": {"name": title}})
    html_path.write_text(redact(body))
    return html_path


def kernel_manager(env: dict[str, str], cwd: Path | None = None, unset: Iterable[str] = ()):
    """A kernel manager whose kernel gets ``env`` on top of this process' environment (less the names in
    ``unset``) and starts in ``cwd``, so concurrent runs in one process (threads) each tell their own kernel
    where to write findings, with no shared ``os.environ`` and no ``os.chdir``. An asynchronous manager, so its
    client never blocks nbclient's event loop on a message that cannot come, and nbclient's check of the kernel
    process notices a killed kernel (``DeadKernelError``) within a second."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    hidden = frozenset(unset)

    class OwnInterpreter(KernelSpecManager):
        """Every kernel name is this interpreter (the one with gpulib): a kernelspec named python3 that JupyterHub
        or a conda env put first on the Jupyter path never takes a run
        (https://jupyter-client.readthedocs.io/en/stable/kernels.html#kernel-specs)."""

        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name=f"Python {sys.version_info.major}.{sys.version_info.minor} (gpuops)",
                language="python",
                resource_dir="",
            )

    class RunKernelManager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            base = {k: v for k, v in (kw.get("env") or os.environ).items() if k not in hidden}
            kw["env"] = {**base, **env}
            if cwd is not None:
                kw["cwd"] = str(cwd)
            return await super()._async_pre_start_kernel(**kw)

        def client(self, **kw):  # remembered, so shutdown_kernel closes what nbclient leaves open
            kc = super().client(**kw)
            self.run_clients.append(kc)
            return kc

    km = RunKernelManager(kernel_name="python3", kernel_spec_manager=OwnInterpreter())
    km.run_env = dict(env)
    km.run_clients = []
    return km


#: seconds a kernel may take to answer (a warm kernel's preload, a run's environment set in it)
KERNEL_START_TIMEOUT_S = 120


def run_code(km, code: str, timeout: float = KERNEL_START_TIMEOUT_S) -> None:
    """Execute ``code`` in the kernel of ``km`` and wait for its reply (a client of its own, closed after).

    Over the shell channel alone: the request waits in ZeroMQ until a kernel still starting binds its socket, and the
    reply says how the code ended. A client's ``wait_for_ready`` and ``execute_interactive`` also listen on IOPub, and
    ``wait_for_ready`` ends by reading IOPub until it stays quiet for 0.2 s
    (https://github.com/jupyter/jupyter_client/blob/main/jupyter_client/client.py ``_async_wait_for_ready``): 0.2 s
    of each warm run spent waiting. A kernel that dies before it replies is noticed within a second."""
    from jupyter_core.utils import run_sync

    async def go():
        kc = km.client()
        kc.start_channels(iopub=False, stdin=False, hb=False, control=False)
        try:
            msg_id = kc.execute(code, allow_stdin=False)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    reply = await kc.get_shell_msg(timeout=1)
                except Empty:
                    if not await km.is_alive():
                        raise RuntimeError("warm kernel: it died before it replied") from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"warm kernel: no reply in {timeout:g} s") from None
                    continue
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
        finally:
            kc.stop_channels()
        if reply["content"].get("status") != "ok":
            raise RuntimeError(f"warm kernel: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")

    run_sync(go)()


def execute(
    info: NotebookInfo,
    params: dict[str, Any],
    out_root: Path,
    *,
    progress: bool = True,
    timeout: int = 900,
    out_dir: Path | None = None,
    env: dict[str, str] | None = None,
    unset_env: Iterable[str] = (),
    run_timeout: float | None = None,
    summary: bool = True,
    warm=None,
    charts: str | None = None,
) -> RunResult:
    """Execute one notebook with papermill into its own folder (:func:`new_run_dir`, or ``out_dir``).

    ``timeout``: per cell, in seconds; ``run_timeout``: for the whole run, after which the kernel and its
    process tree are killed and the run is failed (``timed_out``); ``env``: extra environment for this run's
    kernel only (e.g. another GPUOPS_PROMETHEUS_URL); ``unset_env``: names this process has that the kernel must
    not see (``gpuops serve``'s webhook token); ``summary``: write ``summary.md`` with this run's status and
    parameters (``gpuops serve`` writes its own, with the run's link); ``charts``: how the HTML ships plotly.js when
    the run's ``charts`` parameter does not say (:data:`gpulib.inspection.PLOTLY_JS_MODES`; default ``GPUOPS_CHARTS``,
    else inline: a report that opens offline); "shared" writes ``out_root/plotly-<version>.min.js`` once for every run
    under ``out_root``.

    The run's ``status.json`` moves through :class:`gpulib.run.record.EngineRecord` alone: queued, running, then
    its status; failed when this function raises (the error is raised on).
    """
    out_dir = out_dir if out_dir is not None else new_run_dir(out_root, info.name)
    rec = EngineRecord(out_dir)
    rec.queued(info.name, params)
    try:
        return _execute(
            info,
            params,
            out_root,
            out_dir,
            rec,
            progress=progress,
            timeout=timeout,
            env=env,
            unset_env=unset_env,
            run_timeout=run_timeout,
            summary=summary,
            warm=warm,
            charts=charts,
        )
    except Exception as exc:  # a full disk, a bug: the record says failed; the caller reports it
        rec.broken(exc)
        raise


def _execute(
    info: NotebookInfo,
    params: dict[str, Any],
    out_root: Path,
    out_dir: Path,
    rec: EngineRecord,
    *,
    progress: bool,
    timeout: int,
    env: dict[str, str] | None,
    unset_env: Iterable[str],
    run_timeout: float | None,
    summary: bool,
    warm,
    charts: str | None,
) -> RunResult:
    import papermill as pm

    out_nb = out_dir / f"{info.name}.ipynb"
    findings_path = out_dir / rr.FINDINGS_FILE
    res = RunResult(info.name, out_dir, out_nb, None)
    rec.started()
    write_index(out_root)  # the index lists the run while it runs
    mode = charts_mode(params.get(CHARTS_PARAM), charts)
    if mode == "shared":  # the one copy the run's HTML names (../plotly-<version>.min.js)
        write_plotly_js(out_root)
    run_env = {**(env or {}), **params_env(info.name, info.params), FINDINGS_ENV: str(findings_path), CHARTS_ENV: mode}
    km = warm.take() if warm is not None else None
    res.warm = km is not None
    if km is None:
        km = kernel_manager(run_env, info.path.parent, unset_env)
    watch = _Deadline(km, run_timeout) if run_timeout else None
    try:
        if res.warm:  # what a cold kernel gets when it starts: this run's environment and folder
            run_code(
                km,
                f"import os as _os; _os.environ.update({run_env!r}); _os.chdir({str(info.path.parent)!r}); del _os",
            )
        pm.execute_notebook(
            str(info.path),
            str(out_nb),
            parameters=params,
            kernel_name="python3",
            progress_bar=progress,
            execution_timeout=timeout,
            km=km,
            extra_arguments=list(KERNEL_ARGS),
            # written once when the run ends (papermill saves in a ``finally``, after a failed cell or a killed
            # kernel too), not after every cell: each save re-serialises the whole notebook, figures included
            # (papermill/execute.py ``request_save_on_cell_execute``, https://github.com/nteract/papermill)
            request_save_on_cell_execute=False,
        )
    except Exception as exc:  # papermill raises PapermillExecutionError with the cell's traceback
        res.failed = redact(f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc!r}")
    finally:  # a run that ended by itself as the time ran out did not time out
        if watch is not None:
            res.timed_out = watch.stop() and res.failed is not None
        shutdown_kernel(km)
    if res.timed_out:
        res.failed = f"timed out after {run_timeout:g} s: the run and its kernel were killed"
    if out_nb.exists():
        _redact_file(out_nb)
        if not res.timed_out:  # a killed run has no report, only its error
            try:
                res.html = export_html(out_nb, out_dir / f"{info.name}.html", info.title or info.name)
            except Exception as exc:  # an HTML failure must not hide the run's result
                res.errors.append(redact(f"HTML export failed: {exc}"))
    doc = _read_findings(res, findings_path, info)
    res.verdict = verdict_of(res.findings, doc) if doc is not None else {}
    if info.kind == "report" and doc is not None:  # the report opens with "Since last time" (gpulib.run.diff)
        try:
            since_last_time(out_root, out_dir, res.html)
        except Exception as exc:  # a diff that cannot be made must not hide the run's result
            res.errors.append(redact(f"since last time: {exc}"))
    if summary and info.kind != "learn":  # summary.md (verdict, cause, commands) beside the HTML
        write_summary(
            out_dir,
            {"runbook": info.name, "status": res.status, "params": params, "error": res.failed},
            res.html.name if res.html else out_nb.name,
            res.verdict,
        )
    rec.ended(res.status, res.failed)
    write_index(out_root, {out_dir.name: record(out_dir, (res.findings, doc) if doc is not None else None)})
    return res


def shutdown_kernel(km) -> None:
    """Stop the run's kernel. nbclient shuts down only a kernel it started itself: given ``km=``, papermill leaves
    the kernel running (nbclient ``NotebookClient.owns_km``,
    https://github.com/jupyter/nbclient/blob/main/nbclient/client.py), so without this every in-process run
    (``gpuops demo``, ``gpuops serve``) would leave one idle kernel process behind."""
    from jupyter_core.utils import run_sync

    try:
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)
    except Exception:
        pass
    process = getattr(km.provisioner, "process", None) if km.provisioner is not None else None
    if process is not None and process.poll() is None:
        kill_tree(process.pid)
    _close_clients(km)


def _close_clients(km) -> None:
    """Close the kernel clients made of ``km``: nbclient stops the channels only of a client whose kernel it started
    (``NotebookClient.async_setup_kernel``, ``cleanup_kc`` defaults to ``owns_km``,
    https://github.com/jupyter/nbclient/blob/main/nbclient/client.py), so each run left its client's channels, heartbeat
    thread and ZeroMQ context (about 10 descriptors and 2 sockets) open for the life of ``gpuops serve``
    (tests/serve/test_soak.py)."""
    for kc in getattr(km, "run_clients", ()):
        try:
            kc.stop_channels()
        except Exception:
            pass
        ctx = getattr(kc, "context", None)
        if ctx is not None and ctx is not getattr(km, "context", None) and not ctx.closed:
            ctx.destroy(linger=0)
    km.run_clients = []


def _read_findings(res: RunResult, path: Path, info: NotebookInfo) -> dict[str, Any] | None:
    """Read the run's findings.json (once) into ``res``; the document, or None when there is none."""
    if not path.exists():
        if res.failed is None and info.kind != "learn":
            res.errors.append("the notebook wrote no findings (did it call rb.finish()?)")
        return None
    try:
        res.findings, doc = load_findings(path)
    except (ValueError, OSError, KeyError, TypeError) as exc:  # cut or hand-edited: the run is not OK
        res.errors.append(redact(f"findings.json unreadable: {exc}"))
        return None
    res.errors += doc.get("errors", [])
    res.usage_errors += doc.get("usage_errors", [])
    return doc


def _redact_file(path: Path) -> None:
    """Mask configured secrets in an output file (the executed notebook), whatever cell printed them."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    clean = redact(text)
    if clean != text:
        atomic_write(path, clean)


# ---------------------------------------------------------------------------------- run timeout
class _Deadline:
    """Kills the kernel of ``km`` and every process it started once ``seconds`` have passed, and keeps killing
    until the run ends (a kernel still starting at the deadline is killed when it appears). jupyter_client starts
    the kernel in a session of its own (https://github.com/jupyter/jupyter_client/blob/main/jupyter_client/launcher.py),
    and a process the kernel starts may open yet another session, so the tree is found through /proc."""

    def __init__(self, km, seconds: float):
        self.km, self.seconds = km, seconds
        self.expired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gpuops-run-deadline", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        if self._done.wait(self.seconds):
            return
        self.expired = True
        while not self._done.is_set():
            process = getattr(self.km.provisioner, "process", None) if self.km.provisioner is not None else None
            if process is not None and process.poll() is None:
                kill_tree(process.pid)
            self._done.wait(0.2)

    def stop(self) -> bool:
        """End the watch; whether the deadline passed."""
        self._done.set()
        self._thread.join()
        return self.expired


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc; empty where there is no /proc)."""
    if not Path("/proc").is_dir():
        return []
    kids, out, todo = _children(), [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, its process group (when it is not ours) and every descendant, found before the kill."""
    pids = descendants(pid)
    try:
        pgid = os.getpgid(pid)
        if pgid != os.getpgrp():
            os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in [pid, *pids]:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def outcome(res: RunResult) -> dict[str, Any]:
    """A finished run as serve records it (:func:`gpulib.run.record.outcome`): done, incomplete (a step lacked its
    data: the errors), bad parameter (a value matched nothing), or failed (the run failed or timed out)."""
    return rr.outcome(res.failed, res.usage_errors, res.errors, res.verdict, res.warm)
