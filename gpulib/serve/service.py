"""The run service of ``gpuops serve``: runs, the pools and the metrics; the HTTP layer (:mod:`gpulib.serve.app`) only
translates."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

import gpulib.serve.notify as notify
from gpulib.core.errors import GpulibError, RunStoreError, VerdictDeadline
from gpulib.core.knowledge import settings
from gpulib.core.plotlyjs import write_plotly_js
from gpulib.core.redact import redact
from gpulib.kube.client import KubeCluster
from gpulib.kube.publish import parse_what, publish_run
from gpulib.run.params import prepare
from gpulib.run.record import RunRecord, Status, findings_file, read_verdict, write_summary
from gpulib.serve.config import TOKEN_ENV, ServeConfig, limit
from gpulib.serve.deadline import Deadlined, incomplete
from gpulib.serve.jobs import JobRenders, own_pod_target
from gpulib.serve.pagelimit import ClientRate
from gpulib.serve.payload import Alert, WebhookPayload
from gpulib.serve.pool import QueueFull, WorkerPool
from gpulib.serve.routing import Deduper, load_catalogue, load_routes, route_alert, side_effects
from gpulib.serve.runner import EngineRunner, FastVerdicter, ProcessVerdicter
from gpulib.serve.store import SETTINGS as STORE_SETTINGS
from gpulib.serve.store import RunStore
from gpulib.serve.storms import (
    MANUAL_PRIORITY,
    OTHER_RANK,
    KubeClaims,
    Storms,
    alert_time,
    covers,
    incident_key,
    priority,
    seen_count,
    xid_code,
)
from gpulib.warm import WarmKernels

#: the queue lane of page-started runs, and their priority: after every alert's (gpulib.serve.storms.priority)
PAGE = "page"
PAGE_PRIORITY = (OTHER_RANK + 1, 0)
#: the queue lane of runs accepted before a restart and never started: no limit (each was accepted once already)
RESTART = "restart"
Runner = Callable[[Path, str, dict[str, Any], float], dict[str, Any]]
Verdicter = Callable[[Path, str, dict[str, Any]], Optional[dict[str, Any]]]


class Service:
    """Runs, the pool and the metrics; the HTTP layer below only translates."""

    def __init__(self, cfg: ServeConfig, runner: Runner | None = None, verdicter: Verdicter | None = None):
        self.cfg = cfg
        self.store = RunStore(cfg.out, replica=cfg.replica if cfg.claims == "kubernetes" else None)
        try:  # the one plotly.js every report of the store names (a render writes it too, when it could not be here)
            write_plotly_js(self.store.root)
        except OSError as exc:
            self.store.error = f"the run store {self.store.root} cannot be written (plotly.js): {exc.strerror or exc}"
        self.catalogue = load_catalogue()
        self.routes = load_routes(cfg.routes_file, self.catalogue)
        self.dedupe = Deduper(cfg.dedupe_window)
        self.notifier = notify.Notifier(cfg.notify_url, cfg.notify_format)
        self.storms = Storms(cfg.dedupe_window)
        #: incident claims across replicas (None: this process decides alone)
        self.claims = KubeClaims(cfg.dedupe_window) if cfg.claims == "kubernetes" else None
        jobs = None
        if runner is None and cfg.renders == "kubernetes":  # each render a Job from this server's image
            cluster = KubeCluster.from_environment()
            target = own_pod_target(
                cluster, cfg.out, image=cfg.render_image, claim=cfg.render_claim, namespace=cfg.render_namespace
            )
            jobs = JobRenders(cluster, target)
        #: the fast verdict (default with the default runner and --verdict fast); None: the notebook decides
        if verdicter is None and runner is None and cfg.verdict == "fast":
            if cfg.verdict_in == "processes":
                verdicter = ProcessVerdicter(cfg.verdict_workers, unset=(TOKEN_ENV,))
            else:
                verdicter = FastVerdicter(self.catalogue.__getitem__)
        self.verdicter = verdicter
        #: the one call of the fast verdict, with its wall-clock deadline (gpulib/serve/deadline.py)
        self.decide = (
            Deadlined(verdicter, cfg.verdict_deadline_s, cfg.verdict_stuck_grace_s) if verdicter is not None else None
        )
        self.warm = (
            WarmKernels(cfg.warm_kernels, unset=(TOKEN_ENV,), nice=cfg.render_nice)
            if runner is None and jobs is None and cfg.warm_kernels
            else None
        )
        self.runner = runner or jobs or EngineRunner(self.catalogue.__getitem__, self.warm)
        self.registry = CollectorRegistry()
        self.m_runs = Counter(
            "gpuops_serve_runs_total",
            "Finished runs by runbook and outcome",
            ["runbook", "outcome"],
            registry=self.registry,
        )
        self.m_alerts = Counter(
            "gpuops_serve_alerts_total",
            "Alerts received by what was done with them",
            ["action"],
            registry=self.registry,
        )
        self.m_duration = Histogram(
            "gpuops_serve_run_duration_seconds",
            "Run wall time",
            ["runbook"],
            buckets=(5, 10, 20, 30, 60, 120, 300, 600, 1200),
            registry=self.registry,
        )
        self.m_verdict = Histogram(
            "gpuops_serve_verdict_seconds",
            "From the request that created a run to its verdict (fast verdict, else the notebook's)",
            ["runbook"],
            buckets=(0.5, 1, 2, 3, 5, 10, 15, 30, 60, 120, 300),
            registry=self.registry,
        )
        self.m_rejected = Counter(
            "gpuops_serve_queue_full_total", "Requests answered 503 because the queue was full", registry=self.registry
        )
        # with a fast verdict, the queue limit applies to the verdicts; renders queue behind them without a limit
        # (each already has its verdict out), so a storm's evidence is late rather than lost
        # page-started runs wait in a lane of their own (PAGE), never in the alerts' share
        lanes = {PAGE: cfg.page_queue_limit, RESTART: 0}
        self.pool = WorkerPool(
            self._render,
            cfg.kernels,
            0 if self.verdicter else cfg.queue_limit,
            self._broken,
            lanes=lanes,
            release_memory=True,  # a render's freed memory goes back to the system (gpulib/serve/pool.py)
        )
        self.verdicts = (
            WorkerPool(self._verdict, cfg.verdict_workers, cfg.queue_limit, self._broken, lanes=lanes)
            if self.verdicter
            else None
        )
        self.page_rate = ClientRate(cfg.page_runs_per_client, cfg.page_rate_window_s, int(limit("page_rate_clients")))
        if self.verdicter is not None and hasattr(self.verdicter, "warm"):
            threading.Thread(target=self.verdicter.warm, name="gpuops-warm", daemon=True).start()
        Gauge("gpuops_serve_queue_depth", "Runs waiting for a kernel", registry=self.registry).set_function(
            lambda: self.pool.depth
        )
        Gauge("gpuops_serve_runs_active", "Runs executing now", registry=self.registry).set_function(
            lambda: self.pool.active
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requeue()
        self.adopt()
        if self.store.replica is not None:  # a shared store: the other replicas see this one alive
            threading.Thread(target=self._heartbeat, name="gpuops-heartbeat", daemon=True).start()

    def requeue(self) -> list[str]:
        """Runs accepted before the server stopped (a crash or kill -9 included) and never started are queued again in
        their priority order (:meth:`gpulib.serve.store.RunStore.not_started`), marked ``requeued``: an alert that was
        answered 202 is never dropped by a restart. Their ids."""
        return self._take(self.store.not_started())

    def adopt(self) -> list[str]:
        """In a shared store: the runs gone replicas accepted and never started, adopted by this one (at most one
        replica takes each: :meth:`gpulib.serve.store.RunStore.adopt`) and queued as :meth:`requeue` does. Their ids."""
        return self._take(self.store.orphans())

    def _take(self, recs: list[dict[str, Any]]) -> list[str]:
        ids = []
        for rec in recs:
            if self.store.adopt(rec) is None:  # another replica took it first
                continue
            prio = tuple(rec.get("priority") or MANUAL_PRIORITY)
            (self.verdicts or self.pool).submit(rec["id"], prio, RESTART)
            ids.append(rec["id"])
        return ids

    def _heartbeat(self) -> None:
        every = float(settings(STORE_SETTINGS)["heartbeat_s"])
        while not self._stop.wait(every):
            try:
                self.store.beat()
            except OSError:  # a store that cannot be written now: the next beat tries again
                pass
            try:
                self.adopt()  # a replica that went away since: its accepted runs are run here
            except Exception:  # never the heartbeat's end (this replica would look gone): the next beat tries again
                pass

    def _verdicts_first(self) -> None:
        """Wait while verdicts are queued or being computed (at most ``verdicts_first_max_wait_s``): in a storm the
        notebooks, which share this server's CPUs, start after every verdict is out instead of slowing them."""
        if self.verdicts is None:
            return
        end = time.monotonic() + float(settings(STORE_SETTINGS)["verdicts_first_max_wait_s"])
        while not self.verdicts.idle() and time.monotonic() < end and not self._stop.is_set():
            time.sleep(0.1)

    def stuck_verdicts(self) -> int:
        """Verdict calls still running well past their deadline (/healthz and /readyz say so)."""
        return self.decide.stuck() if self.decide is not None else 0

    def close(self) -> None:
        """Stop the warm kernels and the verdict processes (the server's shutdown)."""
        self._stop.set()
        if self.warm is not None:
            self.warm.close()
        if hasattr(self.verdicter, "close"):
            self.verdicter.close()

    def _broken(self, run_id: str, exc: Exception) -> None:
        """A run the server could not finish (an error outside its runner, e.g. writing summary.md): shown failed."""
        self.store.update_with(run_id, lambda rec: RunRecord(rec).broken(exc, time.time()))

    # ------------------------------------------------------------------------------- runs
    def link(self, run_id: str) -> str:
        return f"{self.cfg.public_url}/runs/{run_id}"

    def start(
        self,
        runbook: str,
        params: dict[str, Any],
        trigger: dict[str, Any],
        priority: tuple = MANUAL_PRIORITY,
        gpus: list[str] | None = None,
        lane: str = "",
    ) -> dict[str, Any]:
        """A new queued run (QueueFull when the queue is at its limit; the run is then forgotten); ``priority``:
        :func:`gpulib.serve.storms.priority` (lower first); ``gpus``: the alerted GPUs (default: its ``gpu``);
        ``lane``: :data:`PAGE` for a run a page started (its own share of the queue, after every alert)."""
        rec = self.store.create(runbook, params, trigger=trigger)
        if gpus is None:
            gpus = [str(params["gpu"])] if "gpu" in params else []
        rec = self.store.update(rec["id"], priority=list(priority), gpus=gpus)
        try:
            (self.verdicts or self.pool).submit(rec["id"], priority, lane)
        except QueueFull:
            self.store.forget(rec["id"])
            self.m_rejected.inc()
            raise
        return rec

    def join(self, timeout: float = 60) -> bool:
        """Wait until every queued verdict and render is done (tests and shutdown)."""
        end = time.monotonic() + timeout
        if self.verdicts is not None and not self.verdicts.join(timeout):
            return False
        return self.pool.join(max(0.1, end - time.monotonic())) and (self.verdicts is None or self.verdicts.join(1))

    def _prepared(self, rec: dict[str, Any]) -> dict[str, Any]:
        # the request's parameters were checked when it came in; here the server's source is added
        return prepare(self.catalogue[rec["runbook"]], given=rec["params"], source=self.cfg.source)

    def _notify(self, run_id: str, rec: dict[str, Any]) -> None:
        err, fields = self.notifier.verdict(rec, self.link(run_id))
        if err or fields:
            self.store.update(run_id, **fields, **({"notify_error": err} if err else {}))

    def _notify_attached(self, run_id: str | None, alert: dict[str, Any]) -> None:
        rec = self.store.get(run_id) if run_id else None
        err = self.notifier.attached(rec, self.link(run_id), alert) if rec else None
        if err:
            self.store.update(run_id, notify_error=err)

    def _notify_resolved(self, alert: Alert) -> None:
        try:
            runbook, params = route_alert(alert.model_dump(), self.routes, self.catalogue)
        except GpulibError:  # an alert we never routed: nothing was opened for it
            return
        err = self.notifier.resolved(runbook, params)
        if err:
            self.store.log_alert({"time": time.time(), "action": "notify_error", "reason": err})

    def _verdict(self, run_id: str) -> None:
        """The fast verdict: the record, summary.md and the notification carry it at once; the notebook follows."""
        if not self.store.claim(run_id):  # another replica adopted it while this one's heartbeat lagged
            return
        rec = self.store.update_with(run_id, lambda rec: RunRecord(rec).started(time.time()))
        folder = self.store.folder(run_id)
        try:
            params = self._prepared(rec)
            # the fast verdict never creates anything (a collection pod): such a run is decided by its notebook
            out = None if side_effects(params) else self.decide(folder, rec["runbook"], params)
        except VerdictDeadline as exc:  # a slow data source: INCOMPLETE now, the notebook renders what it can
            out = incomplete(folder, rec["runbook"], rec["params"], exc)
        except GpulibError as exc:  # e.g. a live run without the node the runbook needs: no notebook either
            out = {"status": Status.FAILED, "error": redact(str(exc)), "verdict": {}, "render": False}
        except Exception as exc:  # a verdict bug: the notebook decides instead
            self.store.update(run_id, verdict_error=f"{type(exc).__name__}: {exc}"[:1000])
            out = None
        if out is None:  # no fast verdict for this runbook: the notebook's findings are the verdict
            self.pool.submit(run_id, tuple(rec.get("priority") or MANUAL_PRIORITY))
            return
        now = time.time()
        if out.get("render") is False or out["status"] == Status.BAD_PARAMETER:  # no verdict: no notebook either
            status = out["status"] if out.get("render") is not False else Status.FAILED
            rec = self.store.update_with(run_id, lambda rec: RunRecord(rec).refused(out["error"], now, status))
            self._close(run_id, rec, {})
            return
        rec = self.store.update_with(run_id, lambda rec: RunRecord(rec).decided(out, now))
        self.m_verdict.labels(rec["runbook"]).observe(now - rec["created"])
        write_summary(folder, {**rec, "status": out["status"]}, self.link(run_id), out["verdict"], rendering=True)
        self._notify(run_id, rec)
        self.pool.submit(run_id, tuple(rec.get("priority") or MANUAL_PRIORITY))

    def _render(self, run_id: str) -> None:
        """The notebook: the evidence of a run with a fast verdict, or the verdict itself without one."""
        if self.verdicts is None and not self.store.claim(run_id):  # the run starts here: as in _verdict
            return
        rec = self.store.get(run_id)
        fast = rec.get("verdict_by") == "fast"
        if fast and not isinstance(self.runner, JobRenders):  # renders on this server's CPUs: verdicts first
            self._verdicts_first()
        rec = self.store.update_with(run_id, lambda rec: RunRecord(rec).render_started(time.time()))
        folder = self.store.folder(run_id)
        try:
            params = self._prepared(rec)
            outcome = self.runner(folder, rec["runbook"], params, self.cfg.run_timeout)
        except GpulibError as exc:  # e.g. a live run without the node the runbook needs
            outcome = {"status": Status.FAILED, "error": redact(str(exc))}
        except Exception as exc:  # a runner bug must not kill the worker thread
            outcome = {"status": Status.FAILED, "error": f"{type(exc).__name__}: {exc}"}
        v = outcome["verdict"] if "verdict" in outcome else read_verdict(folder)
        now = time.time()
        changed = False

        def change(rec: dict[str, Any]) -> dict[str, Any]:
            nonlocal changed
            upd, changed = RunRecord(rec).rendered(outcome, v, now)
            return upd

        rec = self.store.update_with(run_id, change)
        if not fast:
            self.m_verdict.labels(rec["runbook"]).observe(now - rec["created"])
            self._close(run_id, rec, v)
        else:
            kept = outcome["status"] == Status.FAILED and not v  # the fast verdict stands
            self._close(run_id, rec, (rec["verdict"] or {}) if kept else v, notify_again=changed)

    def _close(self, run_id: str, rec: dict[str, Any], v: dict[str, Any], *, notify_again: bool = True) -> None:
        write_summary(self.store.folder(run_id), rec, self.link(run_id), v)
        self.m_runs.labels(
            rec["runbook"], rec["status"] if rec["status"] != Status.DONE else (rec["severity"] or "ok")
        ).inc()
        self.m_duration.labels(rec["runbook"]).observe(rec["finished"] - rec["started"])
        if notify_again:
            self._notify(run_id, rec)
        self._publish(run_id)

    def _publish(self, run_id: str) -> None:
        """``--publish``: the run's verdict as an Event on its node (and the node condition), gpulib/kube/publish.py."""
        what = parse_what(self.cfg.publish)
        if not what:
            return
        try:
            self._cluster = getattr(self, "_cluster", None) or KubeCluster.from_environment()
            node = (self.store.get(run_id) or {}).get("params", {}).get("node")
            lines = publish_run(
                findings_file(self.store.folder(run_id)), what, self.link(run_id), self._cluster, [node] if node else []
            )
        except GpulibError as exc:
            lines = [redact(f"could not publish: {exc}")]
        self.store.update(run_id, published=lines)

    # ----------------------------------------------------------------------------- alerts
    def handle(self, payload: WebhookPayload) -> tuple[int, dict[str, Any]]:
        """Each alert of the payload is exactly one of: a new run, attached to its incident's run, a dedupe (an alert
        already seen), held (its XID class needs a repeat, gpulib/serve/storms.py), resolved or rejected."""
        out: dict[str, Any] = {
            "runs": [],
            "attached": [],
            "deduped": [],
            "held": 0,
            "elsewhere": 0,
            "resolved": 0,
            "rejected": [],
        }
        for alert in payload.alerts:
            name = alert.labels.get("alertname", "")
            entry = {
                "time": time.time(),
                "groupKey": payload.groupKey,
                "alertname": name,
                "status": alert.status,
                "fingerprint": alert.fingerprint,
                "labels": alert.labels,
            }
            if alert.status == "resolved":
                self._notify_resolved(alert)
                out["resolved"] += 1
                self.store.log_alert({**entry, "action": "resolved"})
                self.m_alerts.labels("resolved").inc()
                continue
            try:
                runbook, params = route_alert(alert.model_dump(), self.routes, self.catalogue)
            except GpulibError as exc:
                out["rejected"].append(f"{name}: {exc}")
                self.store.log_alert({**entry, "action": "rejected", "reason": str(exc)})
                self.m_alerts.labels("rejected").inc()
                continue
            trigger = {
                "alertname": name,
                "groupKey": payload.groupKey,
                "fingerprint": alert.fingerprint,
                "runbook_url": alert.annotations.get("runbook_url", ""),
                "severity": alert.labels.get("severity", ""),
                "silence_url": notify.silence_url(payload.externalURL, alert.labels),
            }
            try:
                action, run_id = self._admit(payload.groupKey, alert, runbook, params, trigger)
            except QueueFull:
                self.store.log_alert({**entry, "action": "queue_full", "runbook": runbook, "params": params})
                self.m_alerts.labels("queue_full").inc()
                return 503, {"detail": f"run queue is full ({self.cfg.queue_limit} waiting); retry later", **out}
            except RunStoreError as exc:  # a full disk: no run was made; Alertmanager retries after Retry-After
                self.store.log_alert({**entry, "action": "store_full", "runbook": runbook, "params": params})
                self.m_alerts.labels("store_full").inc()
                return 507, {"detail": f"{exc}; retry later", **out}
            if action in ("held", "elsewhere"):
                out[action] += 1
            else:
                out[{"run": "runs", "attach": "attached", "dedupe": "deduped"}[action]].append(run_id)
            if action == "held":
                entry["reason"] = trigger.get("held_reason", "")
            if action == "attach":
                self._notify_attached(run_id, {**trigger, "params": params})
            self.store.log_alert({**entry, "action": action, "run": run_id, "runbook": runbook, "params": params})
            self.m_alerts.labels(action).inc()
        return 202, out

    def _admit(
        self, group: str, alert: Alert, runbook: str, params: dict[str, Any], trigger: dict[str, Any]
    ) -> tuple[str, str | None]:
        """(run | attach | dedupe | held, run id) for one firing alert (QueueFull when a new run does not fit)."""
        key = Deduper.key(group, runbook, params)
        inc_key = incident_key(runbook, params)
        gpu = str(params["gpu"]) if "gpu" in params else None
        with self.storms.lock:
            seen = self.dedupe.lookup(key)
            if seen is not None:
                return "dedupe", seen
            code = xid_code(alert.labels, alert.annotations)
            if code is not None:
                t = alert_time(alert.startsAt, time.time())
                firing = (alert.labels.get("alertname"), alert.startsAt or key)
                d = self.storms.sight((inc_key, gpu), code, firing, t, seen_count(alert.annotations))
                if d.action == "dedupe":
                    return "dedupe", None
                if d.action in ("hold", "ignore"):
                    trigger["held_reason"] = d.reason
                    return "held", None
                if d.evidence:
                    trigger = {
                        **trigger,
                        "repeats": d.occurrences,
                        "repeat_rule": self.storms.rule(code).xid_class,
                        "repeat_evidence": d.evidence,
                    }
            inc = self.storms.open_incident(inc_key)
            if inc is not None and (covers(inc, gpu) or self._widen(inc, gpu)):
                self._attach(inc.run_id, {**trigger, "time": time.time(), "params": params}, gpu)
                self.dedupe.remember(key, inc.run_id)
                return "attach", inc.run_id
            if self.claims is not None and not self._claimed(inc_key, trigger):
                return "elsewhere", None
            repeat = self.storms.is_repeat(inc_key)
            gpus = None
            if inc is not None and gpu is not None:  # the node's run is under way: one follow-up for every GPU
                gpus, params = [gpu], {**params, "gpu": ""}
            rec = self.start(runbook, params, trigger, priority=priority(trigger["severity"], repeat), gpus=gpus)
            self.storms.opened(inc_key, rec["id"], "" if gpus is not None else gpu)
            self.dedupe.remember(key, rec["id"])
            return "run", rec["id"]

    def _claimed(self, inc_key: tuple, trigger: dict[str, Any]) -> bool:
        """Whether this replica runs the incident (its Lease claimed); an unanswerable claim runs it here."""
        try:
            return self.claims(inc_key)
        except Exception as exc:  # the API server is down or refuses: never lose the alert
            trigger["claim_error"] = redact(f"{type(exc).__name__}: {exc}")[:500]
            return True

    def _widen(self, inc, gpu: str | None) -> bool:
        """A run still queued takes every GPU of its node (``gpu=""``), the alerted ones listed in ``gpus``."""
        if gpu is None:
            return False

        def change(rec):
            gpus = list(dict.fromkeys([*(rec.get("gpus") or [str(rec["params"].get("gpu", ""))]), gpu]))
            return {"params": {**rec["params"], "gpu": ""}, "gpus": gpus}

        if self.store.update_if(inc.run_id, Status.QUEUED, change) is None:
            return False
        inc.gpus.add("")
        return True

    def _attach(self, run_id: str, entry: dict[str, Any], gpu: str | None) -> None:
        """``entry`` (a later alert of the run's incident) listed on the run, its GPU among the run's ``gpus``."""

        def change(rec):
            gpus = list(rec.get("gpus") or [])
            return {
                "attached": [*(rec.get("attached") or []), entry],
                "gpus": gpus + [gpu] if gpu and gpu not in gpus else gpus,
            }

        self.store.update_with(run_id, change)
