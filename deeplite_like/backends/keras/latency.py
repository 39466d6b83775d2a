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

**JAX backend:** the forward is ``jax.jit`` of ``model.stateless_call`` (the model's variables
passed as arguments, so nothing is baked into the program and the model is not touched); the
first call compiles it (one warm-up); every timed call ends with ``jax.block_until_ready`` on its
output, since JAX dispatches asynchronously. XLA's CPU client fixes its threads when it starts, as
TensorFlow does: the count is reported and a different request is an error.

Measured backends: execution time (a ``tf.function`` on TensorFlow, ``torch.utils.benchmark``-
style blocks on torch, ``jax.jit`` on JAX) and peak activation memory (``memory.py``: a
traced-graph simulation on TensorFlow, a tensor-lifetime tracker on torch, the compiled program's
buffer assignment on JAX) need the framework under Keras. On another backend they are reported as
*not measured*, with the reason ``unmeasured_reason`` gives, instead of failing the whole status;
counts, parameters and sizes are measured on every backend.
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

__all__ = ["MEASURED_BACKENDS", "TimingStats", "jax_forward", "measure_execution_time", "unmeasured_reason"]

MEASURED_BACKENDS = ("tensorflow", "torch", "jax")


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
    if backend == "jax":
        return _jax_timing(model, inputs, device, warmup, min_run_time, num_threads, batch_size, training, min_blocks)
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


def jax_forward(model: keras.layers.Layer, inputs: Any, training: bool) -> tuple[Any, tuple]:
    """``jax.jit`` of the model's stateless forward, and its arguments (variables, then inputs)."""
    import jax

    trainable = [v.value for v in model.trainable_variables]
    fixed = [v.value for v in model.non_trainable_variables]

    def forward(trainable: list, fixed: list, inputs: Any) -> Any:
        return model.stateless_call(trainable, fixed, inputs, training=training)[0]

    return jax.jit(forward), (trainable, fixed, inputs)


def _jax_device(device: Any) -> None:
    """Only the device JAX runs on by default is timed here; another is an error naming JAX's devices."""
    import jax

    if device is None:
        return
    try:
        parsed = Device.parse(device)
    except ValueError as exc:
        raise ValueError(f"device={device!r}: {exc}") from None
    platform = jax.devices()[0].platform
    if (parsed.kind == "cpu") != (platform == "cpu"):
        raise ValueError(f"device={device!r}: Keras on JAX runs on JAX's default devices, here "
                         f"{[str(d) for d in jax.devices()]}; leave device out (or set JAX_PLATFORMS before "
                         "starting Python)")


def _jax_timing(model: keras.layers.Layer, inputs: Any, device: Any, warmup: int, min_run_time: float,
                num_threads: int | str | None, batch_size: int, training: bool, min_blocks: int) -> TimingStats:
    import jax

    _jax_device(device)
    threads = available_cpus()
    requested = check_num_threads(num_threads)
    if isinstance(requested, int) and requested != threads:
        raise ValueError(f"XLA runs Keras-on-JAX with the {threads} threads of this process and cannot change them "
                         f"once JAX started; set XLA_FLAGS before starting Python, then omit num_threads")
    reason = f"num_threads='auto': XLA's {threads} threads (fixed when JAX started)" if requested == AUTO else ""
    busy = busy_note()
    with preserved_model_state(model), naming_failures(model, inputs):
        jitted, arguments = jax_forward(model, inputs, training)
        last: list[Any] = [jax.block_until_ready(jitted(*arguments))]  # the first call compiles the program

        def call() -> Any:
            last[0] = jitted(*arguments)
            return last[0]

        blocks = time_blocks(call, lambda: jax.block_until_ready(last[0]), warmup=warmup - 1,
                             min_run_time=min_run_time, min_blocks=min_blocks)
    blocks = dataclasses.replace(blocks, warmup_forwards=blocks.warmup_forwards + 1)
    where = str(jax.devices()[0]).lower().replace("cpudevice(id=0)", "cpu:0")
    stats = summarise(blocks, batch_size=batch_size, num_threads=threads, device=where, compiled="jax.jit",
                      threads_reason=reason, busy=busy)
    warn_noisy(stats.spread_warning, f"execution time of {model.name}")
    return stats


def unmeasured_reason(what: str, backend: str) -> str | None:
    """Why ``what`` (``'memory'``, ``'execution time'``) is not measured on Keras' ``backend``; ``None`` if it is."""
    if backend in MEASURED_BACKENDS:
        return None
    return (f"{what} is not available on Keras' {backend!r} backend (measured on tensorflow, torch and jax): "
            "run Keras with KERAS_BACKEND=tensorflow, torch or jax to measure it")
