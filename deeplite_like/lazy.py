"""Lazy module attributes: names imported from their module on first use (PEP 562)."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


class NotProvidedError(ImportError):
    """A name of a peer's API (deeplite-profiler, DeepSpeed) deliberately not provided here.

    Raised by a module's ``__getattr__``, so ``from module import name`` shows the message (which
    says what to use instead) rather than a bare "cannot import name". docs/migration.rst lists
    every such name with the reason.
    """


def lazy_exports(module_name: str, exports: Mapping[str, str], namespace: dict[str, Any],
                 not_provided: Mapping[str, str] | None = None
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the module ``module_name`` whose ``namespace`` is its globals.

    ``exports`` maps a public name to the module defining it; the first access imports that
    module and caches the value in ``namespace``, so later accesses cost nothing.
    ``not_provided`` maps a peer's name that is deliberately absent to what to use instead:
    accessing it raises ``NotProvidedError`` with that advice.
    """
    not_provided = dict(not_provided or {})

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            if name in not_provided:
                raise NotProvidedError(f"{module_name}.{name} (deeplite-profiler / DeepSpeed name) is not provided: "
                                       f"{not_provided[name]} (see docs/migration.rst)", name=name)
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
