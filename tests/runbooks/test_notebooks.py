"""Every committed notebook: clean on disk, runs top to bottom on the demo fleet, and on live data."""

from __future__ import annotations

import json

import pytest

from gpulib import cli
from gpulib.catalogue import catalogue, find_notebook
from gpulib.execute import execute
from gpulib.inspection import resolve_params

NOTEBOOKS = sorted(catalogue().values(), key=lambda i: i.name)


@pytest.mark.parametrize("info", NOTEBOOKS, ids=[i.name for i in NOTEBOOKS])
def test_committed_notebook_is_clean(info):
    nb = json.loads(info.path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert nb["metadata"]["kernelspec"]["language"] == "python"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and not c.get("execution_count") for c in code), "strip outputs before committing"
    assert nb["cells"][0]["cell_type"] == "markdown" and info.title, "first cell is the '# Title' markdown"
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one papermill 'parameters' cell"
    names = {p.name for p in info.params}
    assert not names & {"token", "password", "bearer_token", "prometheus_token"}, "no secrets as parameters"
    if info.kind != "learn":
        assert {"source", "snapshot_dir"} <= names


@pytest.mark.notebook
@pytest.mark.parametrize("info", NOTEBOOKS, ids=[i.name for i in NOTEBOOKS])
def test_notebook_runs_on_demo(info, shared_runs):
    res = shared_runs.run(info.name)  # its defaults: the session's one `gpuops demo` run of it
    assert res.failed is None, res.failed
    assert res.errors == [], res.errors
    html = res.html.read_text()
    assert "Traceback" not in html and "Error" not in html.split("</style>")[-1][:0]  # no traceback rendered
    assert "In&nbsp;[" not in html, "HTML export must hide code prompts"
    if info.kind != "learn":
        assert res.findings, "a runbook always ends with at least one finding (OK counts)"
        assert "Recommended SOP step" in html


@pytest.mark.notebook
@pytest.mark.prometheus
def test_fleet_overview_same_verdict_on_live_and_no_secret_leaks(live_env, tmp_path, monkeypatch, shared_runs):
    monkeypatch.setenv("GPUOPS_PROMETHEUS_TOKEN", "s3cr3t-token-value-123")
    info = find_notebook("fleet_overview")
    live = execute(info, {"source": "live"}, tmp_path / "live", progress=False)
    demo = shared_runs.run("fleet_overview", source="demo")
    assert live.errors == [] and live.failed is None
    crit = lambda r: sorted(f.title for f in r.findings if f.severity.value == "critical")  # noqa: E731
    assert crit(live) == crit(demo)
    assert any("XID 79" in t for t in crit(live)) and any("Row-remap failure" in t for t in crit(live))
    for p in live.out_dir.iterdir():
        assert "s3cr3t-token-value-123" not in p.read_text(errors="replace"), p.name


@pytest.mark.notebook
def test_unreachable_prometheus_still_renders_and_exits_nonzero(tmp_path, monkeypatch, capsys):
    from tests.helpers.promharness import free_port

    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("GPUOPS_PROMETHEUS_URL", url)
    monkeypatch.setenv("GPUOPS_PROMETHEUS_RETRIES", "0")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "fleet_overview", "--source", "live", "-q", "-o", str(tmp_path / "out")])
    assert e.value.code == cli.EXIT_FAILED
    out_dir = next((tmp_path / "out").glob("*-fleet_overview-*"))
    html = (out_dir / "fleet_overview.html").read_text()
    assert "could not run" in html and "What to check" in html
    doc = json.loads((out_dir / "findings.json").read_text())
    assert doc["errors"] and doc["findings"][0]["title"].startswith("Runbook incomplete")
    assert "kubeconfig" in " ".join(doc["errors"]).lower() or url in " ".join(doc["errors"])


def test_incomplete_runbook_names_the_exact_rerun_command(monkeypatch):
    import gpulib.runbook as nb

    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)
    rb = nb.Runbook("xid_ecc_triage", source="demo", node="gpu node 7", window="6h", gpu="")
    with rb.step("Diagnosis"):
        rb.src.series("DCGM_FI_DEV_GPU_TEMP", "1h", node="gpu node 7")
    fl = rb.finish()
    assert fl[0].title.startswith("Runbook incomplete") and "gpu node 7" in fl[0].evidence[0]
    # a bad value is a usage error: the suggested re-run must not repeat it
    assert not any("gpu node 7" in c for c in fl[0].commands), fl[0].commands


def test_incomplete_findings_take_their_sop_text_from_core_sop(monkeypatch):
    """The two 'Runbook incomplete' findings write no SOP sentence of their own: summary and SOP step are the
    rows of gpulib/data/core/core_sop.csv (a planted table shows it), and every row of that table is used."""
    import pandas as pd

    import gpulib.runbook as nb
    from gpulib.core import sop as sopmod
    from gpulib.core.errors import InvalidParameter, SourceError
    from gpulib.core.knowledge import load_table

    assert sorted(load_table("core_sop")["key"]) == ["bad_parameter", "missing_data"]
    planted = pd.DataFrame(
        [
            {
                "key": k,
                "summary": f"planted summary {k}",
                "sop_step": f"planted step {k}",
                "escalation": "",
                "commands": "",
                "source": "definition: test",
            }
            for k in ("bad_parameter", "missing_data")
        ]
    )
    monkeypatch.setattr(sopmod, "load_table", lambda name: planted.copy() if name == "core_sop" else load_table(name))
    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)
    sopmod._rows.cache_clear()
    try:
        for exc, key in ((SourceError("no data"), "missing_data"), (InvalidParameter("no such node"), "bad_parameter")):
            rb = nb.Runbook("xid_ecc_triage", source="demo")
            with rb.step("Diagnosis"):
                raise exc
            top = rb.finish()[0]
            assert (top.summary, top.sop_step) == (f"planted summary {key}", f"planted step {key}")
    finally:
        sopmod._rows.cache_clear()


def test_run_it_line_shows_every_parameter_actually_used(monkeypatch):
    """The 'Run it' line repeats the run even if a notebook default changes: every parameter of the notebook's
    parameters cell with the value the kernel holds after papermill's injection (also those the notebook does not
    pass to Runbook, and defaults nobody gave), in the parameters cell's order; a secret never."""
    import shlex

    import gpulib.runbook as nb
    from gpulib.core import redact

    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)
    params = [p.name for p in find_notebook("operator_install").params]
    # what papermill's injected-parameters cell left in the kernel: replicas given, the rest notebook defaults
    kernel = {p.name: p.default for p in find_notebook("operator_install").params}
    kernel.update(replicas=8, operator_version="v24.6.2", demo_operator_state="gfd_missing")
    monkeypatch.setattr(nb, "_kernel_namespace", lambda: kernel, raising=False)
    rb = nb.Runbook("operator_install", source="demo", snapshot_dir="", demo_operator_state="gfd_missing")
    argv = shlex.split(rb.rerun_command())
    assert argv[:5] == ["gpuops", "run", "operator_install", "--source", "demo"]
    pairs = [(argv[i + 1], argv[i + 2]) for i in range(5, len(argv), 3)]
    assert all(argv[i] == "-p" for i in range(5, len(argv), 3))
    assert [k for k, _ in pairs] == [n for n in params if n not in ("source", "snapshot_dir")]
    got = dict(pairs)
    assert got["replicas"] == "8" and got["operator_version"] == "v24.6.2"  # not passed to Runbook(...)
    assert got["driver_preinstalled"] == "False" and got["mig_strategy"] == "none"  # defaults nobody gave
    assert got["demo_operator_state"] == "gfd_missing"
    # the CLI reads the line back to the same values
    info = find_notebook("operator_install")
    resolved = resolve_params(info, cli._pairs([f"{k}={v}" for k, v in pairs]))
    assert resolved["replicas"] == 8 and resolved["driver_preinstalled"] is False
    # outside a kernel (tests, plain Python) the notebook defaults stand in for what was not passed
    monkeypatch.setattr(nb, "_kernel_namespace", lambda: {}, raising=False)
    plain = shlex.split(nb.Runbook("operator_install", source="demo").rerun_command())
    assert "replicas" in plain and plain[plain.index("replicas") + 1] == "4"
    # a secret never: a registered secret value is masked, whatever parameter carries it
    redact.register("s3cr3t-value-xyz")
    try:
        kernel["operator_version"] = "s3cr3t-value-xyz"
        monkeypatch.setattr(nb, "_kernel_namespace", lambda: kernel, raising=False)
        assert "s3cr3t-value-xyz" not in nb.Runbook("operator_install", source="demo").rerun_command()
    finally:
        redact._registered.discard("s3cr3t-value-xyz")


#: the runbooks an on-call engineer opens on an alert (the others plan a deployment)
INCIDENT_RUNBOOKS = ("fleet_overview", "xid_ecc_triage", "nccl_check", "operator_install")
#: the headings of the kube-prometheus runbooks, https://runbooks.prometheus-operator.dev/
RUNBOOK_HEADINGS = ["Meaning", "Impact", "Diagnosis", "Mitigation"]


@pytest.mark.parametrize("name", INCIDENT_RUNBOOKS)
def test_incident_runbook_sections_are_meaning_impact_diagnosis_mitigation(name):
    """From its Meaning on, an incident runbook's top-level (##) sections are Meaning, Impact, Diagnosis,
    Mitigation in that order (a section before Meaning, e.g. operator_install's Install, is not part of the
    incident); topic headings are ### under one of them."""
    nb = json.loads(find_notebook(name).path.read_text())
    h2 = [
        ln[3:].strip()
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
        for ln in "".join(c["source"]).splitlines()
        if ln.startswith("## ")
    ]
    assert "Meaning" in h2, h2
    tail = h2[h2.index("Meaning") :]
    assert tail == RUNBOOK_HEADINGS, h2


#: DataFrame methods that filter, sort or group: analysis, which belongs in gpulib (docs/architecture.md,
#: "Notebooks stay thin"), e.g. gpulib/learn/frames.py for the lessons
_FRAME_OPS = {
    "query",
    "sort_values",
    "sort_index",
    "groupby",
    "nlargest",
    "nsmallest",
    "pivot_table",
    "drop_duplicates",
    "merge",
}
#: calls that build a boolean mask
_MASK_CALLS = {"isin", "contains", "startswith", "endswith", "between", "notna", "isna", "notnull", "isnull", "match"}


def _is_mask(node) -> bool:
    import ast

    return any(
        isinstance(n, ast.Compare)
        or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Invert))
        or (isinstance(n, ast.BinOp) and isinstance(n.op, (ast.BitAnd, ast.BitOr)))
        or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MASK_CALLS)
        for n in ast.walk(node)
    )


def pandas_filtering(code: str) -> list[str]:
    """Lines of ``code`` that filter, sort or group a frame: a frame method of ``_FRAME_OPS``, indexing with a
    boolean mask (``df[df.x > 0]``, ``df.loc[mask, col]``), or counting a mask (``(df.x > 0).sum()``)."""
    import ast

    out = []
    for n in ast.walk(ast.parse(code)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _FRAME_OPS:
            out.append(f"line {n.lineno}: .{n.func.attr}(")
        elif isinstance(n, ast.Subscript) and _is_mask(n.slice):
            out.append(f"line {n.lineno}: boolean indexing")
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("sum", "any", "all", "mean")
            and not isinstance(n.func.value, ast.Call)
            and _is_mask(n.func.value)
        ):
            out.append(f"line {n.lineno}: counting a mask")
    return sorted(out)


def test_the_filtering_check_catches_planted_cells():
    assert pandas_filtering('v = pods[pods["workload"].str.contains("llama")]') == ["line 1: boolean indexing"]
    assert pandas_filtering('best = ck.sort_values("x").iloc[0]\nw = v.groupby("a").agg(n=("p", "count"))') == [
        "line 1: .sort_values(",
        "line 2: .groupby(",
    ]
    assert pandas_filtering("hot = t.query('value > 80')") == ["line 1: .query("]
    assert pandas_filtering('n = int((inv["requested"] > inv["allocatable"]).sum())') == ["line 1: counting a mask"]
    assert pandas_filtering('sbe = q.loc[q["sbe"] > 0, "index"]') == ["line 1: boolean indexing"]
    # what a thin cell does: one call, a column, a row by position, a mapping lookup
    assert (
        pandas_filtering(
            'best = learn.best_row(ck, "x")\nn = int(inv["gpus"].sum())\nrow = nodes.iloc[0]\n'
            'f = s["window_hours"]\nok = len(v) > 0'
        )
        == []
    )


@pytest.mark.parametrize("info", NOTEBOOKS, ids=[i.name for i in NOTEBOOKS])
def test_no_pandas_filtering_in_any_notebook_cell(info):
    """Runbooks, the report and the lessons (runbooks/learn/) alike: the rows a cell needs come from a gpulib call."""
    nb = json.loads(info.path.read_text())
    bad = [
        f"cell {i}: {x}"
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code"
        for x in pandas_filtering("".join(c["source"]))
    ]
    assert not bad, "\n".join(bad)


def test_a_section_that_cannot_run_says_why(monkeypatch):
    """Runbook.ready: a section whose input is missing or empty renders a note naming the reason, never nothing."""
    import gpulib.runbook as nb
    from gpulib.core.errors import SourceError

    monkeypatch.delenv("GPUOPS_FINDINGS_PATH", raising=False)
    rb = nb.Runbook("xid_ecc_triage", source="demo", node="dgx-h100-1", gpu="5", window="6h")
    shown: list[str] = []
    monkeypatch.setattr(nb, "note", lambda text, level="info": shown.append(f"{level}: {text}"))
    assert rb.ready("x", [1]) is True and shown == []
    inp = None
    with rb.step("Gather the inputs"):
        raise SourceError("no nodes.json")
    shown.clear()
    assert rb.ready(inp) is False
    assert (
        len(shown) == 1
        and shown[0].startswith("warning: Not checked")
        and "<b>Gather the inputs</b> could not run" in shown[0]
    )
    assert rb.ready([], why="no workload to size") is False
    assert shown[1].startswith("info: Nothing to show: no workload to size") and "Gather the inputs" in shown[1]
    import numpy as np
    import pandas as pd

    assert rb.ready(np.bool_(False)) is False and rb.ready(pd.DataFrame()) is False and rb.ready(0) is False
    assert rb.ready(np.bool_(True), pd.DataFrame({"a": [1]}), object()) is True
    assert len(shown) == 5
    rb.src = None
    assert rb.ready() is False and "no data source" in shown[5]
    assert rb.failed_steps == ["Gather the inputs"] and len(rb.errors) == 1
