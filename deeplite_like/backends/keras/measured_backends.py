"""Which Keras backends this profiler measures memory and time on, and what it says elsewhere.

Peak activation memory (a traced-graph simulation on TensorFlow, a tensor-lifetime tracker on
torch) and execution time (a ``tf.function`` on TensorFlow, ``torch.utils.benchmark``-style
blocks on torch) need the framework under Keras. On another backend (JAX) they are reported
as *not measured*, with this reason, instead of failing the whole status; counts, parameters
and sizes are measured on every backend.
"""
from __future__ import annotations

__all__ = ["MEASURED_BACKENDS", "unmeasured_reason"]

MEASURED_BACKENDS = ("tensorflow", "torch")


def unmeasured_reason(what: str, backend: str) -> str | None:
    """Why ``what`` (``'memory'``, ``'execution time'``) is not measured on Keras' ``backend``; ``None`` if it is."""
    if backend in MEASURED_BACKENDS:
        return None
    return (f"{what} is not available on Keras' {backend!r} backend (measured on "
            f"{' and '.join(MEASURED_BACKENDS)}): run Keras with KERAS_BACKEND=tensorflow or torch to measure it")
