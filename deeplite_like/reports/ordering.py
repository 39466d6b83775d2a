"""The fixed order of metric rows: built-in keys in ``metrics.BUILTIN_KEYS`` order, then user
keys in the order they were first seen."""
from __future__ import annotations

from collections.abc import Iterable

from deeplite_like.metrics import BUILTIN_KEYS


def ordered_keys(*key_sequences: Iterable[str]) -> list[str]:
    """Union of the keys, built-in ones first (their fixed order), then the others by first sight."""
    seen: dict[str, None] = {}
    for keys in key_sequences:
        for key in keys:
            seen.setdefault(key, None)
    builtin = [key for key in BUILTIN_KEYS if key in seen]
    return builtin + [key for key in seen if key not in BUILTIN_KEYS]


def make_display_filter_function(order: Iterable[str] | None = None, include_leftovers: bool = True,
                                 exclude: Iterable[str] | str | None = None):
    """A display filter for ``Profiler.display_status_filter_func`` (deeplite-profiler's helper).

    The filter takes ``{NAME: StatusKey}`` and returns the keys to show: those in ``order``
    (default: every built-in key) and, with ``include_leftovers``, every other key; keys in
    ``exclude`` (a name or names) are never shown. Reports still draw the rows in their fixed
    order (built-in keys first). Filtering changes what reports display, never what is
    computed or returned as values.
    """
    excluded = {exclude} if isinstance(exclude, str) else set(exclude or ())
    first = list(BUILTIN_KEYS) if order is None else list(order)

    def display_filter(statuses: dict) -> dict:
        chosen = {key: statuses[key] for key in first if key in statuses and key not in excluded}
        if include_leftovers:
            chosen.update({key: value for key, value in statuses.items()
                           if key not in chosen and key not in excluded})
        return chosen

    return display_filter
