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
