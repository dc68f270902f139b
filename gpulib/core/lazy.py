"""Lazy package exports (PEP 562 module ``__getattr__``: https://peps.python.org/pep-0562/), and one import deferred.

Each domain package's ``__init__`` lists ``_EXPORTS`` (public name -> submodule) and takes its module
``__getattr__``/``__dir__`` from :func:`lazy_exports`, so importing a package is cheap and a GPU node loads only
the submodules it calls. :func:`defer_iri_grammars` (called first thing by ``gpulib/__init__.py``) defers a
dependency's grammar build to its first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any, Callable


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name of ``exports`` is imported from its submodule on first
    use and cached in the package's ``namespace`` (its ``globals()``)."""

    def __getattr__(name: str) -> Any:
        try:
            module = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


#: the package jsonschema's format checkers import for the ``iri`` and ``iri-reference`` formats, if installed
#: (python-jsonschema/jsonschema: jsonschema/_format.py @b37f7be6, ``from rfc3987_syntax import is_valid_syntax``);
#: it builds its lark grammars at import (rfc3987-syntax 1.1.0: rfc3987_syntax/syntax_helpers.py builds one parser
#: per rule at module level), about a second of CPU in every process that imports nbformat, papermill or the
#: kubernetes client: https://github.com/python-jsonschema/jsonschema/issues/1428
_IRI_GRAMMARS = "rfc3987_syntax"
_iri_lock = threading.Lock()


def _real_iri_module() -> ModuleType:
    """The installed package, imported now in place of the stand-in."""
    with _iri_lock:
        mod = sys.modules.get(_IRI_GRAMMARS)
        if getattr(mod, "__gpulib_stand_in__", False):
            del sys.modules[_IRI_GRAMMARS]
            mod = importlib.import_module(_IRI_GRAMMARS)
        return mod  # type: ignore[return-value]


def defer_iri_grammars() -> None:
    """Put a stand-in for ``rfc3987_syntax`` in ``sys.modules`` if it is installed and not imported yet: its
    ``is_valid_syntax`` (what jsonschema imports) and any other name import the real package on first use, so a
    process that never checks an iri format never builds the grammars, and one that does gets the same answers."""
    spec = None if _IRI_GRAMMARS in sys.modules else importlib.util.find_spec(_IRI_GRAMMARS)
    if spec is None:
        return
    stand_in = ModuleType(_IRI_GRAMMARS, "stand-in until first use (gpulib.core.lazy.defer_iri_grammars)")
    stand_in.__spec__ = spec  # the real package's: importlib.util.find_spec() answers as before

    def is_valid_syntax(*args: Any, **kwargs: Any) -> Any:
        return _real_iri_module().is_valid_syntax(*args, **kwargs)

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real_iri_module(), name)

    stand_in.__dict__.update(is_valid_syntax=is_valid_syntax, __getattr__=__getattr__, __gpulib_stand_in__=True)
    sys.modules[_IRI_GRAMMARS] = stand_in
