"""A process-wide change shared by every profile that needs it, made once and undone once.

Some of what a training-step profile needs cannot be scoped to one model or one thread: a
method wrapped on a class (``Optimizer.apply``, ``GradientTape.gradient``), a global setting
(``tf.config.run_functions_eagerly``). If each profile made and undid such a change itself,
two profiles overlapping in two threads would undo in the wrong order - the second saves the
first one's change as "the original" and puts it back last, leaving Keras patched for good.

``SharedChange`` counts its users under a lock: the first ``acquire`` makes the change, the
last ``release`` undoes it, in whatever order profiles start and stop. What the change does
while it is in place must then be harmless to threads that are not profiling (the phase
hooks do nothing there; see ``phases.py``).
"""
from __future__ import annotations

import threading
from typing import Callable

__all__ = ["SharedChange"]


class SharedChange:
    """``make()`` applies the change and returns the function that undoes it."""

    def __init__(self, name: str, make: Callable[[], Callable[[], None]]) -> None:
        self.name = name
        self._make = make
        self._undo: Callable[[], None] | None = None
        self._users = 0
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Hold the change (making it if no one holds it); raises, changing nothing, if making it fails."""
        with self._lock:
            if self._users == 0:
                self._undo = self._make()
            self._users += 1

    def release(self) -> None:
        """Stop holding the change; the last holder undoes it."""
        with self._lock:
            if self._users == 0:
                raise RuntimeError(f"{self.name}: released more often than acquired")
            self._users -= 1
            if self._users == 0:
                undo, self._undo = self._undo, None
                if undo is not None:
                    undo()
