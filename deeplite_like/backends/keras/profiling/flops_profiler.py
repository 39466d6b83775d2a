"""``KerasFlopsProfiler``: the core ``FlopsProfiler`` around a Keras training step.

Between ``start_profile()`` and ``stop_profile()``, in the thread that called them:

* every layer call of the model is recorded (the counting engine's ``LayerRecorder``, set on
  the model's layers only) and priced per layer as ``count_ops`` prices it: the forward;
* the operators that run outside the layers are counted one by one per phase (backward inside
  ``GradientTape.gradient`` or an autograd node, optimizer inside ``Optimizer.apply``, other:
  the loss, metrics) by the backend's operator counter (``counters.py``, ``phases.py``).

What this touches outside the model, and how it is put back: the phase hooks on two classes
and, on TensorFlow, ``tf.config.run_functions_eagerly(True)`` - both shared by the running
profiles and undone when the last one stops, the user's previous eager setting restored (see
``shared.py``, ``counters.py``). Stop the profile also when the step raises (``with
FlopsProfiler(model):`` does). The profile's notes say that latencies were taken while
counting (and, on TensorFlow, with ``tf.function``s run eagerly).
"""
from __future__ import annotations

from typing import Any, Iterable

from deeplite_like.profiling.flops_profiler import FlopsProfiler
from deeplite_like.profiling.result import ModelProfile

from .._tf import import_keras
from ..params import parameter_stats
from .assemble import profile_of
from .session import Session

__all__ = ["FLOPS_PROFILER", "KerasFlopsProfiler"]

keras = import_keras()


class KerasFlopsProfiler(FlopsProfiler):
    """``FlopsProfiler`` of a Keras model: around ``train_on_batch`` or a custom ``GradientTape`` step.

    See the module docstring for what is counted how. ``process_group`` is a ``torch.distributed``
    notion: give ``model_parallel_size`` instead. ``start_profile()`` and ``stop_profile()`` run
    in the thread that trains; only that thread and this model are profiled.
    """

    def __init__(self, model: Any, ds_engine: Any = None, recompute_fwd_factor: float = 0.0, *,
                 model_parallel_size: int | None = None, process_group: Any = None,
                 module_latency: bool = True, ignore_modules: Iterable[Any] | None = None) -> None:
        if not isinstance(model, keras.Layer):
            raise TypeError(f"KerasFlopsProfiler expects a Keras model or layer, got {type(model).__name__}")
        if process_group is not None:
            raise TypeError("process_group is a torch.distributed group; for a Keras model pass "
                            "model_parallel_size=<devices one copy of the model is split over>")
        super().__init__(model, ds_engine, recompute_fwd_factor, model_parallel_size=model_parallel_size,
                         module_latency=module_latency,
                         ignore_modules=ignore_modules)
        self._session: Session | None = None
        self._ignore: list[Any] = []
        self._params: Any = None

    def _start(self, ignore: list[Any]) -> None:
        self._ignore = ignore
        self._params = parameter_stats(self.model) if getattr(self.model, "built", False) else None
        session = Session(self.model, self.module_latency)
        session.start()
        self._session = session

    def _stop(self) -> None:
        self._session.stop()

    def _discard(self) -> None:
        self._session = None

    def _build(self, step: int | None) -> ModelProfile:
        session = self._session
        stats = self._params if self._params is not None else parameter_stats(self.model)
        latencies = {"backward": session.phases.seconds["backward"] or None,
                     "optimizer": session.phases.seconds["optimizer"] or None}
        duration = session.duration_s
        other = duration - session.recorder.forward_s - sum(v or 0.0 for v in latencies.values())
        latencies["other"] = max(0.0, other)
        notes = ["Latencies were measured while counting (every operator passes through the operator hook"
                 + (", and tf.functions run eagerly" if session.backend == "tensorflow" else "")
                 + "): they are not those of an un-profiled step."]
        return profile_of(session, module_latency=self.module_latency, ignore=self._ignore,
                          params=stats.total_params, trainable=stats.trainable_params,
                          forward_latency=session.recorder.forward_s or None, latencies=latencies, duration=duration,
                          layer_seconds=session.recorder.seconds, step=step, mp=self._model_parallel_size() or 1,
                          notes=notes)


#: The class the core's ``FlopsProfiler(model)`` instantiates for a Keras model.
FLOPS_PROFILER = KerasFlopsProfiler
