"""Lazy module attributes: names imported from their module on first use (PEP 562)."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(module_name: str, exports: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the module ``module_name`` whose ``namespace`` is its globals.

    ``exports`` maps a public name to the module defining it; the first access imports that
    module and caches the value in ``namespace``, so later accesses cost nothing.
    """

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
