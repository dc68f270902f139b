"""Shared fixtures: the demo scenario pinned in time, and a real Prometheus backfilled from it."""

from __future__ import annotations

import gc
import os
from datetime import datetime

import pytest

from tests.helpers.pinned import BACKFILL_WINDOW, DEMO_END, ROOT, SCRAPE
from tests.helpers.pinned import need_prometheus as _need_prometheus
from tests.helpers.promharness import PrometheusServer, backfill
from tests.helpers.shared_runs import SharedRuns

# the `k8s_double` fixture (the loopback Kubernetes API double) for every test that names it as an argument
pytest_plugins = ["tests.helpers.k8s_double"]


# The garbage collector's full passes scan every object a worker holds: the modules of all ~400 test files it collects
# (pandas, plotly, pydantic, IPython...) and what earlier files left alive. Per worker they cost 24-36 s of CPU (83-108
# full passes of 0.25-0.33 s each, and the render pool's collect after every in-process run, gpulib/serve/pool.py), a
# fifth of the worker's CPU. What is alive after collection, and after each test file, is frozen out of their reach
# (https://docs.python.org/3/library/gc.html#gc.freeze): what later becomes garbage is still freed by its reference
# count, and each pass scans only what the running file made.
def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None or nextitem.path != item.path:  # after the file's module fixtures are torn down
        gc.collect()
        gc.freeze()


@pytest.fixture(scope="session")
def demo_end() -> datetime:
    return DEMO_END


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory, _notebook_kernels) -> SharedRuns:
    """Notebook runs on the demo fleet made once per session, read by every test that needs them, on every xdist
    worker (tests/helpers/shared_runs.py): ``shared_runs.demo()`` is the one ``gpuops demo``,
    ``shared_runs.run(name, **params)`` one notebook's run, in this worker's kept kernel (:func:`_notebook_kernels`)."""
    base = tmp_path_factory.getbasetemp()
    where = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    runs = SharedRuns(where, kernels=_notebook_kernels)
    yield runs
    runs.close()


@pytest.fixture(scope="session")
def demo_pinned():
    """The demo source pinned to the integration scenario (same end and scrape interval as the backfill)."""
    import gpulib

    return gpulib.connect("demo", end=DEMO_END, scrape_interval=SCRAPE)


@pytest.fixture(scope="session")
def prometheus_scenarios(tmp_path_factory):
    """Start one Prometheus per label style on demand; stopped at session end."""
    servers: dict[tuple, object] = {}

    def get(label_style: str = "new", counters: str = "full"):
        key = (label_style, counters)
        if key not in servers:
            _need_prometheus()
            from gpulib.demo.simulator import FleetSimulator

            work = tmp_path_factory.mktemp(f"prom-{label_style}-{counters}")
            sim = FleetSimulator(end=DEMO_END, label_style=label_style, counters=counters, scrape_interval=SCRAPE)
            tsdb = backfill(sim, BACKFILL_WINDOW, work)
            servers[key] = PrometheusServer(tsdb, work)
        return servers[key]

    yield get
    for s in servers.values():
        s.stop()


@pytest.fixture(scope="session")
def prometheus(prometheus_scenarios):
    """A real Prometheus holding the default demo scenario (new label style, full counters)."""
    return prometheus_scenarios("new", "full")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No test reads the developer's Prometheus/Kubernetes settings or writes the real audit log."""
    for k in list(os.environ):
        if k.startswith("GPUOPS_PROMETHEUS_") or k in ("GPUOPS_CONFIG", "KUBECONFIG", "GPUOPS_KUBE_CONTEXT"):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("GPUOPS_AUDIT_LOG", str(tmp_path / "audit.jsonl"))


@pytest.fixture
def live_env(prometheus, tmp_path, monkeypatch):
    """Environment for ``source="live"``: the real Prometheus above plus a Kubernetes API double serving
    the same scenario's nodes and pods, window end pinned to the scenario's end (GPUOPS_END)."""
    from gpulib.demo.simulator import FleetSimulator
    from tests.helpers.k8s_double import start_k8s_double

    sim = FleetSimulator(end=DEMO_END, scrape_interval=SCRAPE)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, ",".join(filter(None, [os.environ.get(var, ""), "127.0.0.1"])))
    import gpulib
    from gpulib.mig import current_mig_config

    # the MIG Manager ConfigMap the fixture ClusterPolicy names holds what the demo's does (its nodes' layouts)
    mig_cm = {
        "metadata": {"name": "default-mig-parted-config", "namespace": "gpu-operator"},
        "data": {"config.yaml": current_mig_config(gpulib.connect("demo", end=DEMO_END)).text},
    }
    from gpulib.demo.dra_objects import resource_claims, resource_slices

    double = start_k8s_double(
        tmp_path,
        nodes=sim.nodes_json()["items"],
        pods=sim.pods_json()["items"],
        configmaps=[mig_cm],
        resource_claims=resource_claims(sim),  # the demo's DRA node: who holds its GPUs
        resource_slices=resource_slices(sim),
    )
    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", prometheus.url)
    monkeypatch.setenv("KUBECONFIG", str(double.kubeconfig))
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    yield double
    double.stop()


@pytest.fixture(scope="session")
def _notebook_kernels():
    """The kept kernel :func:`run_notebook`, ``kept_execute`` and the shared runs run in on this worker
    (tests/helpers/shared_runs.py ``KeptKernels``: emptied and its environment set to this process' before each run),
    instead of a cold kernel a run: one kernel, whichever runbook a test runs (``lend("notebook")``), as a kernel kept
    per runbook was stopped and started again whenever a worker moved between more runbooks than it kept."""
    from tests.helpers.shared_runs import KeptKernels

    kept = KeptKernels(keep=1)
    yield kept
    kept.close()


@pytest.fixture
def run_notebook(tmp_path, monkeypatch, _notebook_kernels):
    """Factory: ``run_notebook(path)(**params)`` executes a notebook with papermill against this checkout's
    gpulib (PYTHONPATH), window end pinned to ``DEMO_END``; returns (findings JSON, executed notebook text).
    The run has a kept kernel (:func:`_notebook_kernels`) whose environment is this test's at the call and whose
    folder is the checkout's, as a kernel papermill started would have."""
    import itertools
    import json

    from gpulib.execute import run_code

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("GPUOPS_END", DEMO_END.isoformat())
    counter = itertools.count()

    def factory(notebook):
        def run(**params):
            import papermill as pm

            n = next(counter)
            findings = tmp_path / f"findings-{n}.json"
            monkeypatch.setenv("GPUOPS_FINDINGS_PATH", str(findings))
            out = tmp_path / f"out-{n}.ipynb"
            km = _notebook_kernels.lend("notebook").take()
            try:
                run_code(km, f"import os as _os; _os.chdir({str(ROOT)!r}); del _os")
                pm.execute_notebook(
                    str(notebook),
                    str(out),
                    parameters=params,
                    kernel_name="python3",
                    progress_bar=False,
                    km=km,
                    # the notebook written once, when the run ends, as gpulib/run/render.py's runs are: saved at
                    # every cell's start and end (papermill's default), plotly.js inlined, it cost most of a run
                    request_save_on_cell_execute=False,
                )
            except BaseException:  # a kernel that failed a run is not lent again
                _notebook_kernels.drop("notebook")
                raise
            return json.loads(findings.read_text()), out.read_text()

        return run

    return factory


#: test files handed out first, the longest first, so that under ``-n 2 --dist loadfile`` no worker is left alone with
#: a long file at the end: the session's shared ``gpuops demo`` run (tests/project/test_rendered_html.py makes it, one
#: worker) while tests/test_verdict.py renders the decision-table rows on the other (those the demo holds last, see
#: :func:`_demo_rows_last`), so the files that read either find them made; durations in README.md ("Tests")
FIRST = [
    "tests/project/test_rendered_html.py",
    "tests/test_verdict.py",
    "tests/project/test_fault_matrix.py",
    "tests/serve/test_e2e.py",
    "tests/project/test_printed_commands.py",
    "tests/learn/test_lessons.py",
    "tests/project/test_one_rule.py",
    "tests/project/test_packaging.py",
]


def _demo_rows_last(item) -> tuple[bool, str]:
    """Sort key inside a file for a test of a shared notebook run (a ``runbook`` and ``params`` parametrization):
    the runs ``gpuops demo`` makes (a runbook's defaults) after the others, which are grouped by runbook (one kernel
    per runbook, tests/helpers/shared_runs.py); any other test keeps its place among the first."""
    spec = getattr(item, "callspec", None)
    if spec is None or not {"runbook", "params"} <= set(spec.params):
        return (False, "")
    from gpulib.catalogue import find_notebook

    name = spec.params["runbook"]
    defaults = {p.name: p.default for p in find_notebook(name).params}
    merged = {**defaults, "source": "demo", **spec.params["params"]}
    return (merged == {**defaults, "source": defaults.get("source", "demo")}, name)


VERDICT_ROWS = "tests/test_verdict.py::test_fast_verdict_equals_the_notebooks"


def pytest_collection_modifyitems(items):
    rank = {f: i for i, f in enumerate(FIRST)}
    verdict = [i for i in items if i.nodeid.startswith(f"{VERDICT_ROWS}[")]
    if verdict:  # the file's other tests keep their order; its notebook rows are ordered among themselves
        slots = [items.index(i) for i in verdict]
        for slot, item in zip(slots, sorted(verdict, key=_demo_rows_last)):
            items[slot] = item
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(FIRST)))  # stable: file order kept


@pytest.fixture
def kept_execute(_notebook_kernels):
    """``gpulib.execute.execute`` in this worker's kept kernel (:func:`_notebook_kernels`: emptied, its environment
    this process' at the call, the run's own environment and folder set in it by ``execute(warm=...)``), for the tests
    of what a runbook says rather than of how its kernel starts: a cold kernel's start and imports were about half
    the CPU of such a run. A run that failed drops the kernel."""
    from gpulib.execute import execute

    def run(info, params, out_root, **kw):
        res = execute(info, params, out_root, warm=_notebook_kernels.lend("notebook"), **kw)
        if res.failed:
            _notebook_kernels.drop("notebook")
        return res

    return run
