"""The result of ``estimate_training_memory``: plain byte fields, phases, timeline, allowance."""
from __future__ import annotations

from dataclasses import dataclass, field

from deeplite_like.units import format_bytes

__all__ = ["PhaseMemory", "TrainingMemory", "Allowance", "CUDA_BLOCK_BYTES"]

# The CUDA caching allocator rounds every block up to a multiple of 512 bytes.
CUDA_BLOCK_BYTES = 512


@dataclass(frozen=True)
class PhaseMemory:
    """Live bytes of one phase of the step: at its start, its largest, at its end."""

    name: str
    start_bytes: int
    peak_bytes: int
    end_bytes: int


@dataclass(frozen=True)
class Allowance:
    """What the tracker cannot see on a CUDA device, documented, never added to ``peak_bytes``.

    ``rounding_bytes``: exact extra of the caching allocator's 512-byte rounding over the
    blocks live at the peak (parameters, buffers and inputs included; computed from the record). ``cublas_workspace_bytes``:
    PyTorch's default cuBLAS workspace on Hopper (``CUBLAS_WORKSPACE_CONFIG`` unset: 32 MiB per
    handle/stream; 8 MiB + 128 KiB before Hopper). ``cuda_context_bytes``: the CUDA context and
    loaded kernels, driver- and GPU-dependent (typically 300-600 MiB with lazy module loading);
    given as a round 512 MiB. Fragmentation of the caching allocator's segments is not estimated.
    """

    rounding_bytes: int
    cublas_workspace_bytes: int = 32 * 2**20
    cuda_context_bytes: int = 512 * 2**20

    @property
    def total_bytes(self) -> int:
        return self.rounding_bytes + self.cublas_workspace_bytes + self.cuda_context_bytes


@dataclass(frozen=True)
class TrainingMemory:
    """Memory of one training step, per rank, in bytes (see ``estimate_training_memory``).

    ``params_bytes``, ``buffers_bytes``, ``input_bytes``: held before the step starts.
    ``grads_bytes``: the parameters' ``.grad`` after backward. ``optimizer_bytes``: the
    optimizer's state tensors that live with the parameters (read from ``optimizer.state``);
    ``optimizer_host_bytes``: its host-side scalars (torch's ``step`` counters, 4 bytes each).
    ``activations_bytes``: what the forward leaves alive at its end (the tensors saved for
    backward and the model's output). ``peak_bytes``: the largest live total of the step, at
    operator ``peak_op`` of module ``peak_module`` in phase ``peak_phase``. ``phases``: start /
    peak / end per phase. ``timeline``: (phase, live bytes) after every operator.
    ``activations_by_module``: the bytes of ``activations_bytes`` each module allocated.
    ``comm_buffer_bytes`` / ``gather_bytes``: what the sharding strategy adds (already inside
    ``peak_bytes``). ``allowance``: what is not seen, apart (``Allowance``). The loop measured:
    ``implementation`` of the optimizer step (``"foreach"``, ``"for-loop"``, ``"fused"``, ...),
    ``set_to_none`` of its ``zero_grad``, ``accumulation_steps`` micro-batches per optimizer step,
    ``zero_grad_at`` where the loop zeroes the gradients, ``keep_output`` whether it keeps its output
    and loss alive until the next step. FSDP2: ``mixed_precision`` (``"param bfloat16, reduce
    float32"``: the policy's dtypes), ``reshard_after_forward``, and ``offloaded_bytes``: under
    ``cpu_offload`` the rank's shards of parameters, gradients and states (``params_bytes`` +
    ``grads_bytes`` + ``optimizer_bytes``), held in host memory, in no device figure.
    """

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    peak_bytes: int
    peak_phase: str
    peak_module: str
    peak_op: str
    buffers_bytes: int
    input_bytes: int
    optimizer_host_bytes: int
    phases: tuple[PhaseMemory, ...]
    timeline: tuple[tuple[str, int], ...] = field(repr=False)
    activations_by_module: dict[str, int] = field(repr=False)
    allowance: Allowance
    batch_size: int
    optimizer: str
    autocast: str | None
    world_size: int
    sharding: str | None
    comm_buffer_bytes: int
    gather_bytes: int
    checkpointed: tuple[str, ...]
    steady_state: bool
    meta: bool
    implementation: str = "foreach"
    set_to_none: bool = True
    accumulation_steps: int = 1
    zero_grad_at: str = "start"
    keep_output: bool = False
    mixed_precision: str | None = None
    reshard_after_forward: bool = True
    offloaded_bytes: int = 0

    @property
    def peak_at(self) -> str:
        """Where the peak happened, e.g. ``"backward: aten.mm.default in 'layers.0.mlp'"``."""
        return f"{self.peak_phase}: {self.peak_op} in '{self.peak_module}'"

    @property
    def model_state_bytes(self) -> int:
        """Parameters + gradients + optimizer states (what ZeRO-style estimators count)."""
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    def fits(self, device_bytes: int) -> bool:
        """Whether the peak plus the allowance fits ``device_bytes``."""
        return self.peak_bytes + self.allowance.total_bytes <= device_bytes

    def summary(self) -> str:
        """A few lines in words (for a terminal); reports render the fields themselves."""
        lines = [f"training step, batch {self.batch_size}, optimizer {self.optimizer} ({self.implementation})"
                 + ("" if self.set_to_none else ", zero_grad(set_to_none=False)")
                 + (f", {self.accumulation_steps} micro-batches" if self.accumulation_steps > 1 else "")
                 + (f", zero_grad at {self.zero_grad_at}" if self.zero_grad_at != "start" else "")
                 + (", output kept across steps" if self.keep_output else "")
                 + (f", autocast {self.autocast}" if self.autocast else "")
                 + (f", {self.sharding} x{self.world_size} (per rank)" if self.sharding else "")
                 + (f", mixed precision {self.mixed_precision}" if self.mixed_precision else "")
                 + ("" if self.reshard_after_forward else ", no reshard after forward")
                 + (f", {format_bytes(self.offloaded_bytes)} offloaded to the host" if self.offloaded_bytes else "")]
        for label, value in (("parameters", self.params_bytes), ("gradients", self.grads_bytes),
                             ("optimizer states", self.optimizer_bytes),
                             ("activations (end of forward)", self.activations_bytes),
                             ("peak", self.peak_bytes)):
            lines.append(f"  {label:<30} {format_bytes(value):>12}")
        lines.append(f"  peak at {self.peak_at}")
        for phase in self.phases:
            lines.append(f"  {phase.name:<12} start {format_bytes(phase.start_bytes):>12}  "
                         f"peak {format_bytes(phase.peak_bytes):>12}  end {format_bytes(phase.end_bytes):>12}")
        lines.append(f"  not seen (apart): rounding {format_bytes(self.allowance.rounding_bytes)}, cuBLAS "
                     f"workspace {format_bytes(self.allowance.cublas_workspace_bytes)}, CUDA context "
                     f"~{format_bytes(self.allowance.cuda_context_bytes)}")
        return "\n".join(lines)
