"""Wall-clock execution time of a Keras model's forward pass, on a compiled call, and the Keras
backends it is measured on.

**TensorFlow backend:** the forward is compiled once with ``tf.function`` (graph mode, as
``model.predict`` runs it). ``model.predict_on_batch`` is not used because it would cache a
``predict_function`` on the user's model. **torch backend:** the forward runs under
``torch.no_grad()`` and is timed by the PyTorch backend (``backends/torch/timing.py``).

On TensorFlow the loop is ``deeplite_like.timing`` (shared with the PyTorch backend):
after ``warmup`` untimed calls (the first one traces the graph; the last, timed alone, sizes
the blocks), blocks of ``number_per_run`` back-to-back calls are timed until they have taken
``min_run_time`` seconds and there are at least ``min_blocks`` of them; a block's time divided
by its calls is one measurement. On a GPU the device is synchronised at the end of each block.
``tf.experimental`` has no benchmark timer that returns statistics.

Threads: TensorFlow fixes its intra-op thread pool when its runtime starts, which happened
before a model existed, so ``num_threads`` cannot be changed here: it is reported (the
configured ``tf.config.threading`` value, or the number of CPUs this process may use when it
is 0, TensorFlow's default) and a different request is an error saying how to set it;
``"auto"`` and ``None`` accept it as it is. A large spread or a busy machine is warned about
(``NoisyTimingWarning``) and noted in ``spread_warning``, as on PyTorch.

Measured backends: execution time (a ``tf.function`` on TensorFlow, ``torch.utils.benchmark``-
style blocks on torch) and peak activation memory (``memory.py``: a traced-graph simulation on
TensorFlow, a tensor-lifetime tracker on torch) need the framework under Keras. On another
backend (JAX) they are reported as *not measured*, with the reason ``unmeasured_reason`` gives,
instead of failing the whole status; counts, parameters and sizes are measured on every backend.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from deeplite_like.errors import check_seconds
from deeplite_like.backends.keras._tf import import_keras, import_tensorflow
from deeplite_like.backends.keras.inputs import naming_failures, require_batch_size
from deeplite_like.backends.keras.state import preserved_model_state
from deeplite_like.backends.keras.tensors import to_backend
from deeplite_like.device import Device, unavailable
from deeplite_like.results import TimingStats
from deeplite_like.timing import (AUTO, available_cpus, busy_note, check_num_threads, percentile as _percentile,
                                  summarise, time_blocks, warn_noisy)

keras = import_keras()

__all__ = ["MEASURED_BACKENDS", "TimingStats", "measure_execution_time", "unmeasured_reason"]

MEASURED_BACKENDS = ("tensorflow", "torch")


def _tf_threads(num_threads: int | str | None) -> tuple[int, str]:
    """TensorFlow's intra-op thread count, and why it was used (for ``'auto'``)."""
    tf = import_tensorflow()

    num_threads = check_num_threads(num_threads)
    configured = tf.config.threading.get_intra_op_parallelism_threads()
    effective = configured or available_cpus()
    if num_threads == AUTO:
        return effective, f"num_threads='auto': TensorFlow's {effective} threads (fixed when its runtime started)"
    if num_threads is not None and num_threads != effective:
        raise ValueError(
            f"TensorFlow runs with {effective} intra-op threads here and cannot change them once its runtime "
            f"started; call tf.config.threading.set_intra_op_parallelism_threads({int(num_threads)}) at the very "
            f"start of your program, before building the model, then omit num_threads")
    return effective, ""


def tensorflow_device(device: Any, argument: str = "device") -> Any:
    """``device`` parsed (a ``deeplite_like.Device``) and present for TensorFlow; else ``ValueError`` saying what is."""
    tf = import_tensorflow()
    try:
        parsed = Device.parse(device)
    except ValueError as exc:
        raise ValueError(f"{argument}={device!r}: {exc}") from None
    if parsed.kind == "meta":
        raise ValueError(f"{argument}='meta': a Keras model cannot be timed on the meta device (it runs no "
                         "arithmetic); pass 'cpu' or 'gpu', or leave it out")
    gpus = tf.config.list_logical_devices("GPU")
    if parsed.kind == "cuda" and (parsed.index or 0) >= len(gpus):
        available = ["cpu", *(f"cuda:{i}" for i in range(len(gpus)))]
        why = "TensorFlow is built without CUDA" if not tf.test.is_built_with_cuda() else \
            f"TensorFlow sees {len(gpus)} GPU(s)"
        raise unavailable(device, available, argument, "TensorFlow", why)
    return parsed


def _tensorflow_forward(model: keras.layers.Layer, inputs: Any, training: bool,
                        device: str | None) -> tuple[Callable[[], Any], Callable[[], None], str]:
    tf = import_tensorflow()

    compiled = tf.function(lambda x: model(x, training=training), autograph=False)
    target = None
    if device is not None:
        parsed = tensorflow_device(device)
        target = "/CPU:0" if parsed.kind == "cpu" else f"/GPU:{parsed.index or 0}"
        with tf.device(target):
            inputs = tf.nest.map_structure(tf.identity, inputs)

    def call() -> Any:
        if target is None:
            return compiled(inputs)
        with tf.device(target):
            return compiled(inputs)

    out = call()  # placement of the first result names the device actually used
    where = tf.nest.flatten(out)[0].device if tf.nest.flatten(out) else (target or "")
    return call, synchronizer("tensorflow"), where.rsplit("device:", 1)[-1].lower() or "cpu:0"


def synchronizer(backend: str) -> Callable[[], None]:
    """Waits for the accelerator (so that wall times are the device's); does nothing on CPU."""
    if backend == "tensorflow":
        tf = import_tensorflow()
        sync_devices = getattr(tf.test.experimental, "sync_devices", None)  # absent from older TensorFlow
        if sync_devices is not None and tf.config.list_logical_devices("GPU"):
            return sync_devices
    elif backend == "torch":
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.synchronize
    return lambda: None


def measure_execution_time(model: keras.layers.Layer, inputs: Any, device: Any = None, warmup: int = 3,
                           min_run_time: float = 0.5, num_threads: int | str | None = None,
                           batch_size: int | None = None, training: bool = False,
                           min_blocks: int = 5) -> TimingStats:
    """Time ``model(inputs, training=training)`` compiled (see the module docstring), seconds per batch.

    ``inputs`` is the model's input structure; ``batch_size`` defaults to the leading dimension
    of its first tensor. ``device`` (``'cpu'``, ``'gpu'``, ``'cuda:N'``) places the timed calls;
    ``None`` lets the framework place them. The model is left as found.
    """
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(f"measure_execution_time expects a Keras model, got {type(model).__name__}")
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1 (the first call compiles the graph), got {warmup}")
    check_seconds(min_run_time, "min_run_time")
    if min_blocks < 2:
        raise ValueError(f"min_blocks must be >= 2 to give a spread, got {min_blocks}")
    inputs = to_backend(inputs)
    batch_size = require_batch_size(inputs, batch_size, "measure_execution_time")
    backend = keras.config.backend()
    if backend == "torch":
        return _torch_timing(model, inputs, device, warmup, min_run_time, num_threads, batch_size, training)
    if backend != "tensorflow":
        raise NotImplementedError(f"execution time is measured on Keras' tensorflow and torch backends; this "
                                  f"Keras runs on {backend!r}")
    threads, reason = _tf_threads(num_threads)
    busy = busy_note()
    with preserved_model_state(model), naming_failures(model, inputs):
        call, sync, where = _tensorflow_forward(model, inputs, training, device)
        # _tensorflow_forward made the first call (the trace): one warm-up forward less to run
        blocks = time_blocks(call, sync, warmup=warmup - 1, min_run_time=min_run_time, min_blocks=min_blocks)
    blocks = dataclasses.replace(blocks, warmup_forwards=blocks.warmup_forwards + 1)
    stats = summarise(blocks, batch_size=batch_size, num_threads=threads, device=where, compiled="tf.function",
                      threads_reason=reason, busy=busy)
    warn_noisy(stats.spread_warning, f"execution time of {model.name}")
    return stats


def _torch_timing(model: keras.layers.Layer, inputs: Any, device: Any, warmup: int, min_run_time: float,
                  num_threads: int | None, batch_size: int, training: bool) -> TimingStats:
    from deeplite_like.backends.torch.latency import measure_execution_time as torch_timing

    with preserved_model_state(model), naming_failures(model, inputs):
        stats = torch_timing(model, (inputs,), {"training": training}, device=device, warmup=warmup,
                             min_run_time=min_run_time, num_threads=num_threads, batch_size=batch_size)
    return dataclasses.replace(stats, compiled="torch.no_grad eager")


def unmeasured_reason(what: str, backend: str) -> str | None:
    """Why ``what`` (``'memory'``, ``'execution time'``) is not measured on Keras' ``backend``; ``None`` if it is."""
    if backend in MEASURED_BACKENDS:
        return None
    return (f"{what} is not available on Keras' {backend!r} backend (measured on "
            f"{' and '.join(MEASURED_BACKENDS)}): run Keras with KERAS_BACKEND=tensorflow or torch to measure it")
