"""The operators each recorded layer call runs itself, priced one by one (a layer's own arithmetic).

A layer with a formula is priced by it. A layer without one - a custom layer, a ``Lambda``, a
subclassed ``Model.call`` doing ``ops.matmul`` next to its sublayers, ``ConvLSTM2D`` - is
priced by the framework operators it runs *itself*, outside the layers it calls (those are
priced by their own formulas), as the torch engine prices aten ops:

TensorFlow
    An op callback (``tensorflow.python.framework.op_callbacks``, thread-local) sees every eager
    op, priced by ``formulas.tf_ops.tf_op_cost`` (``tf.MatMul``, ``tf.Softmax``...).
torch
    A ``TorchDispatchMode`` (thread-local) sees every aten op, priced by the torch backend's
    formula table (``aten.bmm``...).
JAX
    No operator hook: ``own_ops`` returns ``None`` and a layer without a formula is priced as
    before (a container's cost is its children's; a leaf is untracked).

Each op goes to the innermost recorded call running when it ran (``LayerRecorder.current``);
ops with no cost known and not known free are kept by name (``OpTap.unknown``), to be listed
in ``OpCount.untracked`` when their call is priced op by op: never dropped silently.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from deeplite_like.opcount import OpStats

from .recorder import LayerRecorder

__all__ = ["OpTap", "own_ops"]


class OpTap:
    """Per recorded call (by index): ``costs[i][op name]`` and ``unknown[i][op name] -> calls``."""

    def __init__(self, recorder: LayerRecorder) -> None:
        self.costs: dict[int, dict[str, OpStats]] = {}
        self.unknown: dict[int, dict[str, int]] = {}
        self._recorder = recorder

    def add(self, name: str, cost: tuple[int, int] | None) -> None:
        """One op run by the current call: its ``(macs, flops)``, or ``None`` when its cost is unknown."""
        index = self._recorder.current
        if index < 0:
            return  # outside every layer call (input conversion before the model's call)
        if cost is None:
            table = self.unknown.setdefault(index, {})
            table[name] = table.get(name, 0) + 1
            return
        self.costs.setdefault(index, {}).setdefault(name, OpStats()).add(int(cost[0]), int(cost[1]), 1)


@contextlib.contextmanager
def own_ops(recorder: LayerRecorder, backend: str, ledger: Any = None) -> Iterator[OpTap | None]:
    """Tap the ops run while the block runs, in this thread, for Keras' ``backend`` (None: no hook).

    ``ledger`` (torch only): a storage ledger told of every op's outputs (``memory.py``).
    """
    if backend == "tensorflow":
        with _tf_tap(OpTap(recorder)) as tap:
            yield tap
    elif backend == "torch":
        with _torch_tap(OpTap(recorder), ledger) as tap:
            yield tap
    else:
        yield None


@contextlib.contextmanager
def _tf_tap(tap: OpTap) -> Iterator[OpTap]:
    from tensorflow.python.framework import op_callbacks

    from .formulas.tf_ops import tf_op_cost

    def on_op(op_type: Any, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None, graph: Any = None) -> None:
        if graph is not None:  # an op added to a graph being traced, not run
            return None
        name = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        tap.add(f"tf.{name}", tf_op_cost(name, tuple(inputs or ()), attrs, tuple(outputs or ())))
        return None

    op_callbacks.add_op_callback(on_op)
    try:
        yield tap
    finally:
        with contextlib.suppress(KeyError, ValueError):  # removed already (op_callbacks.clear_op_callbacks())
            op_callbacks.remove_op_callback(on_op)


@contextlib.contextmanager
def _torch_tap(tap: OpTap, ledger: Any) -> Iterator[OpTap]:
    from deeplite_like.backends.torch.dispatch_mode import make

    from .torch_ops import OpPricingMode

    with make(OpPricingMode, tap.add, ledger):
        yield tap
