"""gpulib.core.lazy: the iri grammars jsonschema may import are built when a check first needs them, not at import.

jsonschema's format module imports ``rfc3987_syntax`` if it is installed, for the ``iri`` and ``iri-reference``
formats only (python-jsonschema/jsonschema: jsonschema/_format.py @b37f7be6), and that package builds its lark
grammars at import: about a second of CPU in every process that imports nbformat or papermill (every ``gpuops run``,
``gpuops serve``, the MCP server). The reference answers come from a process without gpulib."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
CHECKS = (
    "import jsonschema, sys; fc = jsonschema.FormatChecker(); "
    "print('lark' in sys.modules, 'iri' in fc.checkers, 'iri-reference' in fc.checkers); "
    "print(fc.conforms('https://example.com/p?q=1', 'iri'), fc.conforms('http://exa mple.com/', 'iri'), "
    "fc.conforms('../ä/b', 'iri-reference'), fc.conforms('http://[::1', 'iri-reference'))"
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("rfc3987_syntax") is None, reason="rfc3987_syntax is not installed: nothing to defer"
)


def _run(code: str) -> list[str]:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return p.stdout.splitlines()


def test_importing_gpulib_then_jsonschema_builds_no_grammar_and_checks_iris_as_jsonschema_does():
    reference = _run(CHECKS)
    with_gpulib = _run("import gpulib; " + CHECKS)
    # without gpulib the grammars are built at import; with it, not until the first iri check
    assert reference[0] == "True True True"
    assert with_gpulib[0] == "False True True"
    assert with_gpulib[1] == reference[1]


def test_papermill_import_builds_no_grammar():
    assert _run("import gpulib.run.render, papermill, nbformat, sys; print('lark' in sys.modules)") == ["False"]


def test_the_real_module_is_there_on_first_use():
    out = _run(
        "import gpulib, sys, rfc3987_syntax as r; print(type(r.is_valid_syntax).__name__, 'lark' in sys.modules); "
        "print(r.is_valid_syntax('iri', 'https://example.com/x'), 'lark' in sys.modules); "
        "import rfc3987_syntax; "
        "print(rfc3987_syntax is sys.modules['rfc3987_syntax'], hasattr(rfc3987_syntax, 'RFC3987_SYNTAX_TERMS'))"
    )
    assert out == ["function False", "True True", "True True"]


def test_find_spec_answers_as_without_the_stand_in():
    code = "import importlib.util as u; s = u.find_spec('rfc3987_syntax'); print(s.name, s.origin)"
    assert _run("import gpulib; " + code) == _run(code)


def test_the_kubernetes_client_is_imported_without_the_grammars():
    """kubernetes_client() imports jsonschema (through kubernetes_validate) without building the grammars; the iri
    checks are still there and answer on first use."""
    out = _run(
        "import sys; from gpulib.kube.client import kubernetes_client; kubernetes_client().CoreV1Api; "
        "import jsonschema; print('lark' in sys.modules, 'kubernetes_validate' in sys.modules, "
        "'iri' in jsonschema.FormatChecker.checkers); "
        "print(jsonschema.FormatChecker().conforms('https://example.com/x', 'iri'), 'lark' in sys.modules)"
    )
    assert out == ["False True True", "True True"]
