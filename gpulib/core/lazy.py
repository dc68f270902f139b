"""Lazy package exports (PEP 562 module ``__getattr__``: https://peps.python.org/pep-0562/).

Each domain package's ``__init__`` lists ``_EXPORTS`` (public name -> submodule) and takes its module
``__getattr__``/``__dir__`` from :func:`lazy_exports`, so importing a package is cheap and a GPU node loads only
the submodules it calls.
"""

from __future__ import annotations

import importlib
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
