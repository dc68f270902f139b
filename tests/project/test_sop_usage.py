"""The SOP-usage checker (tests/helpers/sop_usage.py) against planted code: a call may name its row through a
module-level literal dict (``sop("t", KEYS.get(kind, "k_other"), ...)``) and pass its values as a literal dict
(``**{"node": node}``), and the checker still proves every key is a row and every placeholder of every row the call
can reach is given; a key it cannot read, a ``**values`` it cannot read, a missing row or an unfilled placeholder
is reported."""

from __future__ import annotations

import textwrap

from tests.helpers.sop_usage import call_problems, sop_calls

ROWS = {
    "job_a": {"key": "job_a", "sop_step": "look at {host}", "commands": "kubectl -n {namespace} logs {pod}"},
    "job_b": {"key": "job_b", "sop_step": "check {peer}"},
    "job_other": {"key": "job_other", "sop_step": "not attributable"},
}


def _plant(tmp_path, source: str):
    pkg = tmp_path / "gpulib" / "planted"
    pkg.mkdir(parents=True)
    (pkg / "findings.py").write_text(textwrap.dedent(source))
    calls = sop_calls("planted", "t", root=tmp_path)
    assert calls, "the planted call was not read"
    return calls


def _problems(tmp_path, source: str) -> list[str]:
    return [p for where, key, given in _plant(tmp_path, source) for p in call_problems(where, key, given, ROWS)]


def test_a_key_table_and_literal_keywords_that_fill_every_row_pass(tmp_path):
    src = """
        _KEYS = {"a": "job_a", "b": "job_b"}

        def f(kind, host, namespace, pod, peer):
            return sop("t", _KEYS.get(kind, "job_other"), host=host, namespace=namespace, pod=pod, peer=peer)

        def g(kind, v):
            return sop("t", _KEYS[kind], **{"host": v, "namespace": v, "pod": v, "peer": v})
    """
    calls = _plant(tmp_path, src)
    assert sorted({k for _, k, _ in calls}) == ["job_a", "job_b", "job_other"]
    assert not [p for w, k, g in calls for p in call_problems(w, k, g, ROWS)]


def test_a_placeholder_left_unfilled_through_the_key_table_fails(tmp_path):
    # job_b fills {peer}; the one call that can reach it through the table does not give it
    src = """
        _KEYS = {"a": "job_a", "b": "job_b"}

        def f(kind, host, namespace, pod):
            return sop("t", _KEYS.get(kind, "job_other"), host=host, namespace=namespace, pod=pod)
    """
    problems = _problems(tmp_path, src)
    assert len(problems) == 1 and "'job_b'" in problems[0] and "peer" in problems[0], problems


def test_a_placeholder_left_unfilled_in_a_literal_keyword_dict_fails(tmp_path):
    src = """
        def f(v):
            return sop("t", "job_a", **{"host": v, "pod": v})
    """
    problems = _problems(tmp_path, src)
    assert len(problems) == 1 and "namespace" in problems[0], problems


def test_a_key_in_the_table_that_is_no_row_fails(tmp_path):
    src = """
        _KEYS = {"a": "job_a", "b": "job_bb"}

        def f(kind, v):
            return sop("t", _KEYS.get(kind, "job_other"), host=v, namespace=v, pod=v, peer=v)
    """
    problems = _problems(tmp_path, src)
    assert len(problems) == 1 and "'job_bb'" in problems[0] and "no row" in problems[0], problems


def test_a_default_key_that_is_no_row_fails(tmp_path):
    src = """
        _KEYS = {"a": "job_a"}

        def f(kind, v):
            return sop("t", _KEYS.get(kind, "job_gone"), host=v, namespace=v, pod=v)
    """
    problems = _problems(tmp_path, src)
    assert len(problems) == 1 and "'job_gone'" in problems[0], problems


def test_values_passed_as_a_name_fail(tmp_path):
    # **kw: the checker cannot see which values reach the row, even when the row fills nothing
    src = """
        def f(kw):
            return sop("t", "job_other", **kw)
    """
    problems = _problems(tmp_path, src)
    assert len(problems) == 1 and "**" in problems[0], problems


def test_a_key_built_at_run_time_fails(tmp_path):
    src = """
        _KEYS = {"a": "job_a"}

        def f(kind, v):
            return sop("t", "job_" + kind, host=v)

        def g(kind, v):
            return sop("t", _KEYS.get(kind, other()), host=v, namespace=v, pod=v)

        def h(kind, v):
            return sop("t", NOT_A_TABLE[kind], host=v)
    """
    problems = _problems(tmp_path, src)
    assert sum("not a string literal" in p for p in problems) == 3, problems


def test_a_key_table_with_a_value_built_at_run_time_fails(tmp_path):
    src = """
        _KEYS = {"a": "job_a", "b": "job_" + "b"}

        def f(kind, v):
            return sop("t", _KEYS[kind], host=v, namespace=v, pod=v, peer=v)
    """
    problems = _problems(tmp_path, src)
    assert any("not a string literal" in p for p in problems), problems
