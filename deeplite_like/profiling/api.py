"""``get_model_profile``: the detailed profile of one call of a model, DeepSpeed-style, any backend.

Its arguments are checked before anything runs: each check names the argument, the value given
and what is accepted, so that a wrong ``module_depth="2"`` fails at once instead of after a
profile, or not at all. The backend's profile module is found from its ``Backend`` record
(``deeplite_like.backends``) and imported only then.
"""
from __future__ import annotations

import numbers
import os
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from deeplite_like.backends import backend_for
from deeplite_like.errors import called_as, check_flag

if TYPE_CHECKING:  # (the result module imports this one for its argument checks)
    from deeplite_like.profiling.result import ModelProfile


def get_model_profile(model: Any, input_shape: Sequence[int] | None = None, args: Sequence[Any] | None = None,
                      kwargs: Mapping[str, Any] | None = None, print_profile: bool = True, detailed: bool = True,
                      module_depth: int = -1, top_modules: int = 3, warm_up: int = 1, as_string: bool | None = None,
                      output_file: str | os.PathLike | None = None, ignore_modules: Iterable[Any] | None = None,
                      func_name: str = "forward", backward: bool = False, meta: bool = False, *,
                      module_latency: bool = True, loss_fn: Any = None, mode: str | None = None) -> ModelProfile:
    """Profile one call of ``model``: totals, phases and the per-module tree (a ``ModelProfile``).

    The backend is picked from the model's type (a torch module or a Keras model). The model is
    left as found (mode, parameters, buffers, gradients, hooks).

    Args:
        model: the model.
        input_shape: the shape of one floating-point input tensor, batch dimension included
            (``(8, 3, 224, 224)``). Only for models that take one float tensor: a model that takes
            integer ids or several inputs gets them through ``args``/``kwargs``.
        args, kwargs: the inputs of the call (instead of ``input_shape``).
        print_profile: print the report (or write it to ``output_file``).
        detailed: include the module tree in the printed report.
        module_depth: deepest depth shown in the tree and the aggregated view (-1: all).
        top_modules: how many module types per depth the aggregated view ranks.
        warm_up: calls before the timed ones, untimed (PyTorch: the counted call is the first of
            them: the default profile runs the model three times, counted, timed, timed per module).
        as_string: write figures with SI prefixes (``1.23 GFLOPs``) rather than raw numbers (the
            default); given ``True`` explicitly, the result also unpacks as DeepSpeed's three strings.
        output_file: write the report there (``.json``: JSON, ``.html``: HTML, else text).
        ignore_modules: module types (classes, or class names) whose cost is excluded from the
            totals and listed as excluded.
        func_name: the entry point to profile (``"forward"``; ``"generate"`` for a text model).
        backward: also run and count the backward pass of the output (summed, or ``loss_fn(out)``).
        meta: count without running real arithmetic (torch: on the meta device); no latency.
        module_latency: time each module's forward (on CUDA with a synchronisation around each).
        loss_fn: ``loss_fn(output) -> scalar`` for ``backward=True``.
        mode: DeepSpeed's name for ``func_name`` (``mode='generate'``); give one of the two.

    Every argument is checked before the model runs: a wrong type or value is a ``TypeError`` /
    ``ValueError`` naming the argument. A failing forward raises, as DeepSpeed's does, the model's
    own exception (PyTorch), with a note naming the module that failed and the inputs it got; a
    Keras model's is a ``deeplite_like.ForwardError`` naming the layer, the original its cause.

    Returns:
        The ``ModelProfile``: ``.params``, ``.macs``, ``.flops``, ``.forward_latency_s``,
        ``.forward_flops_per_s``, ``.phases``, ``.root`` (the tree), ``.aggregated()``,
        ``.to_dict()``, ``.to_text()``, ``.save(path)``. It unpacks as DeepSpeed's tuple:
        ``flops, macs, params = get_model_profile(...)`` (raw ints; strings with ``as_string=True``).
    """
    if mode is not None:
        if func_name not in ("forward", mode):
            raise ValueError(f"get_model_profile got func_name={func_name!r} and mode={mode!r}; they name the same "
                             "thing (the method to profile): give one of them")
        func_name = mode
    if not isinstance(warm_up, int) or isinstance(warm_up, bool) or warm_up < 0:
        raise ValueError(f"warm_up must be a non-negative int, got {warm_up!r}")
    for name, value in (("print_profile", print_profile), ("detailed", detailed), ("backward", backward),
                        ("meta", meta), ("module_latency", module_latency)):
        check_flag(value, name, "get_model_profile")
    if as_string is not None:  # (None: not given, raw ints back and a formatted report)
        check_flag(as_string, "as_string", "get_model_profile")
    check_view_options(module_depth, top_modules)
    input_shape = check_input_shape(input_shape)
    with called_as("get_model_profile"):
        profile = profile_module(model).build_model_profile(
            model, input_shape=input_shape, args=args, kwargs=kwargs, warm_up=warm_up, ignore_modules=ignore_modules,
            func_name=func_name, backward=backward, meta=meta, module_latency=module_latency, loss_fn=loss_fn)
    profile.strings = as_string is True
    as_string = as_string is not False
    if output_file is not None:
        profile.save(output_file, module_depth, top_modules, detailed, as_string)
    elif print_profile:
        print(profile.to_text(module_depth, top_modules, detailed, as_string))
    return profile


_EXAMPLE_SHAPE = "input_shape=(8, 3, 224, 224)"


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _as_written(value: Any, fallback: int) -> int:
    """The int a str such as ``"2"`` spells, for the 'e.g.' of a message; else ``fallback``."""
    text = value.strip() if isinstance(value, str) else ""
    return int(text) if text.lstrip("-").isdigit() else fallback


def check_view_options(module_depth: Any, top_modules: Any) -> None:
    """``module_depth``: an int >= -1 (-1 or ``None``: every depth); ``top_modules``: an int >= 1."""
    depth_rule = "module_depth must be an int >= -1 (the deepest module depth shown; -1 shows all)"
    if module_depth is not None and not _is_int(module_depth):
        raise TypeError(f"{depth_rule}, got {type(module_depth).__name__} {module_depth!r}; e.g. "
                        f"module_depth={_as_written(module_depth, 2)}")
    if module_depth is not None and module_depth < -1:
        raise ValueError(f"{depth_rule}, got {module_depth}")
    top_rule = "top_modules must be an int >= 1 (how many module types per depth are ranked)"
    if not _is_int(top_modules):
        raise TypeError(f"{top_rule}, got {type(top_modules).__name__} {top_modules!r}; e.g. "
                        f"top_modules={_as_written(top_modules, 3)}")
    if top_modules < 1:
        raise ValueError(f"{top_rule}, got {top_modules}")


def check_input_shape(input_shape: Any) -> tuple[int, ...] | None:
    """``input_shape`` as a tuple of ints >= 1 (batch dimension included), or ``None`` when not given."""
    if input_shape is None:
        return None
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise TypeError(f"input_shape must be a sequence of ints, batch dimension included ({_EXAMPLE_SHAPE}), got "
                        f"{type(input_shape).__name__} {input_shape!r}")
    shape = tuple(input_shape)
    if not shape:
        raise ValueError(f"input_shape=() has no dimension; give the batch dimension first ({_EXAMPLE_SHAPE})")
    for position, dim in enumerate(shape):
        if dim is None or (_is_int(dim) and dim == -1):
            fixed = tuple(1 if d is None or (_is_int(d) and d == -1) else d for d in shape)
            raise ValueError(f"input_shape={shape!r}: dimension {position} is {dim!r}, but a profile runs one real call "
                             f"on a tensor of exactly that shape: give every size, the batch too, e.g. "
                             f"input_shape={fixed!r}")
        if not _is_int(dim) or dim < 1:
            raise ValueError(f"input_shape={shape!r}: dimension {position} is {dim!r}; every dimension must be an "
                             f"int >= 1, batch dimension included ({_EXAMPLE_SHAPE})")
    return tuple(int(d) for d in shape)


def profile_module(model: Any) -> Any:
    """The profile module of the backend that handles ``model`` (a Keras model is checked first)."""
    return backend_for(model).load_profile()
