"""Measurement records shared by every backend (no framework imports).

Backends fill these; ``Compute*`` functions turn them into status values. Keeping one
definition means a field means the same thing whichever framework measured it.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ParamStats:
    """Counts in elements, sizes in bytes.

    ``by_dtype`` maps a dtype name (``'float32'``, ``'qint8'``) to the bytes of *parameters*
    of that dtype (its values sum to ``param_bytes``); ``buffer_by_dtype`` does the same for
    buffers (PyTorch buffers; Keras state weights such as batch-norm moving statistics).
    ``buffer_count`` is the number of buffer *elements* (BatchNorm2d(16): 16 + 16 + 1).
    """

    total_params: int
    trainable_params: int
    non_trainable_params: int
    param_bytes: int
    buffer_count: int
    buffer_bytes: int
    by_dtype: dict[str, int] = field(default_factory=dict)
    buffer_by_dtype: dict[str, int] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        """Parameter plus buffer bytes: what loading the model's state costs."""
        return self.param_bytes + self.buffer_bytes


@dataclass(frozen=True)
class ActivationMemory:
    """Activation memory of one forward pass, in bytes; each backend's ``MemoryStats`` adds how it measured.

    ``peak_bytes``: largest live total (inputs + activations + outputs) at any operator.
    ``input_bytes``: bytes the inputs cover (a view of a larger batch counts its own samples
    only). ``output_bytes``: what the outputs keep alive. ``end_bytes``: live total when the
    forward returned. ``allocated_bytes``: sum of every allocation made during the forward.
    ``per_sample_peak_bytes`` = ``peak_bytes / batch_size``. ``peak_op`` / ``peak_module``: the
    operator that reached the peak and the qualified name of the innermost module (layer)
    running it (``''`` is the model itself).
    """

    peak_bytes: int
    input_bytes: int
    output_bytes: int
    end_bytes: int
    allocated_bytes: int
    batch_size: int
    per_sample_peak_bytes: float
    peak_op: str
    peak_module: str

    @property
    def peak_at(self) -> str:
        """Where the peak happened, e.g. ``"aten.relu.default in '1'"``."""
        return f"{self.peak_op} in '{self.peak_module}'"

    @property
    def activation_peak_bytes(self) -> int:
        """Peak bytes beyond the inputs: what the forward itself added at its worst."""
        return self.peak_bytes - self.input_bytes


@dataclass(frozen=True)
class TimingStats:
    """Forward-pass time of one batch, in seconds.

    ``median_s``, ``iqr_s`` (75th - 25th percentile), ``mean_s``, ``min_s`` are statistics over
    ``times`` measurements; each measurement is the mean time of ``number_per_run``
    back-to-back forwards. ``per_sample_s`` = ``median_s / batch_size``; ``throughput`` =
    ``batch_size / median_s`` in samples per second. ``compiled`` says how the forward ran
    (``''`` for a plain eager call).

    ``q1_s`` and ``q3_s`` are the 25th and 75th percentiles (``iqr_s = q3_s - q1_s``);
    ``forwards`` is every forward the measurement ran, ``warmup_forwards`` of them not kept as
    measurements (the warm-up, and with ``num_threads='auto'`` a measurement it discarded).
    ``threads_reason`` says why ``num_threads`` was used when it was picked (``num_threads='auto'``);
    ``spread_warning`` is ``''``, or why the figure may be noise and what to do (``timing_noise``).
    """

    median_s: float
    iqr_s: float
    mean_s: float
    min_s: float
    times: int
    number_per_run: int
    batch_size: int
    per_sample_s: float
    throughput: float
    num_threads: int
    device: str
    raw_s: tuple[float, ...]
    compiled: str = ""
    q1_s: float = 0.0
    q3_s: float = 0.0
    forwards: int = 0
    warmup_forwards: int = 0
    threads_reason: str = ""
    spread_warning: str = ""

    @property
    def quartiles_s(self) -> tuple[float, float]:
        """``(q1, q3)``: the 25th and 75th percentiles of the measurements (linear interpolation,
        as NumPy's default), in seconds; ``(median, median)`` without raw measurements."""
        if self.q1_s or self.q3_s:  # measured by the timing loop
            return (self.q1_s, self.q3_s)
        if not self.raw_s:
            return (self.median_s, self.median_s)
        from deeplite_like.timing_loop import percentile  # here: timing_loop imports this module

        return (percentile(self.raw_s, 25), percentile(self.raw_s, 75))

    def throughput_interval(self) -> tuple[float, float]:
        """Samples per second at the third and first quartile times: the throughput's spread."""
        q1, q3 = self.quartiles_s
        return (self.batch_size / q3 if q3 else float("inf"), self.batch_size / q1 if q1 else float("inf"))
