"""``--dtype float16|bfloat16``: profile a copy of the model cast to a lower precision.

The model as loaded is never changed: a deep copy is cast (``Module.to(dtype)``), and the
inputs' floating-point tensors with it (integer tensors such as token ids stay as they are).
PyTorch models only.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading import LoadedModel

DTYPES = ("float16", "bfloat16")


def cast_copy(loaded: LoadedModel, inputs: tuple[tuple, dict], dtype: str) -> tuple[LoadedModel, tuple[tuple, dict]]:
    """A ``LoadedModel`` holding a copy of the model cast to ``dtype``, and the inputs cast alike."""
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}: not a supported precision", f"use one of {', '.join(DTYPES)}")
    if loaded.framework != "torch":
        raise UsageError(f"--dtype casts PyTorch models; {loaded.spec!r} is a {loaded.framework} model",
                         "drop --dtype, or set a Keras dtype policy in the model's own code")
    import torch
    from torch.utils._pytree import tree_map

    target = getattr(torch, dtype)
    try:
        model = copy.deepcopy(loaded.model)
    except Exception as exc:  # a model holding something that cannot be copied: say so, never cast the original
        raise UsageError(f"--dtype {dtype}: {loaded.spec!r} cannot be copied to cast it ({type(exc).__name__}: {exc})",
                         "drop --dtype, or build the model in that dtype in its factory") from None
    model.to(target)
    before = {str(p.dtype).removeprefix("torch.") for p in loaded.model.parameters() if p.is_floating_point()}

    def cast(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(target)
        return value

    note = f"profiled a copy cast to {dtype}" + (f" (the model as loaded is {', '.join(sorted(before))})"
                                                  if before else "")
    return dataclasses.replace(loaded, model=model, notes=[*loaded.notes, note]), tree_map(cast, inputs)
