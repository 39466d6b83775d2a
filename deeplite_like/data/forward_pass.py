"""The forward pass: which parts of a batch are the model's inputs, at which batch size.

A ``ForwardPass`` says which parts of a batch are the model's inputs and which its targets.
``ForwardPass.inputs_for`` also resizes the inputs to another batch size **by taking real
samples**: the first ``n`` samples when ``n`` is smaller than the batch, and the batch repeated
cyclically (sample ``i`` is sample ``i % b``) when ``n`` is larger. Dtypes, per-sample shapes
and value ranges are kept (token ids stay valid ids); nothing is synthesised at random.
``ModelInputPattern`` is deeplite-profiler's spelling of the same choice, and
``ForwardPassSplits`` data splits that carry their ``ForwardPass``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from deeplite_like.data.adapters import (_is_namedtuple, _leaves, _map_leaves, _quoted, _sample_bytes, _where,
                                         adapter_for, describe)
from deeplite_like.data.adapters import first_batch
from deeplite_like.errors import DataError, check_fits_in_memory
from deeplite_like.units import format_bytes


@dataclass(frozen=True)
class Inputs:
    """Model inputs: positional ``args`` and keyword ``kwargs``; unpacks as ``args, kwargs``."""

    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.args, (tuple, list)):
            raise TypeError(
                f"Inputs.args must be a tuple of positional inputs, got {type(self.args).__name__}; "
                f"write Inputs(args=(x,)) for a single input"
            )
        if not isinstance(self.kwargs, Mapping):
            raise TypeError(f"Inputs.kwargs must be a mapping, got {type(self.kwargs).__name__}")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", dict(self.kwargs))

    def __iter__(self) -> Iterator[Any]:
        return iter((self.args, self.kwargs))


Key = Union[int, str]
_NOT_GIVEN: Any = object()  # (tells deeplite's explicit ``model_input_pattern=None`` from the default)
InputSpec = Union[Key, Sequence[Key], Mapping[Key, str], None]
TargetSpec = Union[Key, Sequence[Key], Callable[[Any], Any], None]


def _check_key(key: object, what: str) -> None:
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(
            f"ForwardPass({what}=...): a key is an int (position in a tuple batch) or a str (key "
            f"of a dict batch); got {type(key).__name__} {key!r}"
        )


class ForwardPass:
    """Which parts of a batch are the model's inputs, and which its targets.

    Args:
        inputs: which elements of a batch are the model inputs:

            * ``None`` (default): a tensor batch is the one input; a tuple / list batch
              ``(x, y, ...)`` has its first element as the one input; a dict batch must name
              its keys; any other object is passed as the one input;
            * ``0`` or ``"image"``: that element of a tuple / dict batch, as the one positional
              input (a str also reads a named tuple's field);
            * ``(0, 1)``: several positional inputs, by position;
            * ``("input_ids", "attention_mask")``: keyword inputs, with the batch keys as names;
            * ``{"ids": "input_ids"}``: keyword inputs, batch key -> keyword name.
        targets: which elements are the targets, for evaluation helpers: ``None`` (default,
            element 1 of a tuple / list batch), a key, a tuple of keys (a tuple of targets),
            or a function ``fn(batch) -> targets``.
        extract: instead of ``inputs``, a function ``fn(batch)`` returning the inputs: a tensor
            (the one input), a tuple or list (positional inputs), or ``Inputs(args, kwargs)``.
            Returning a dict is refused as ambiguous: wrap it in ``Inputs``.
        model_input_pattern: deeplite-profiler's spelling of ``inputs`` (a ``ModelInputPattern``):
            one entry per element of a tuple batch, ``'_'`` to skip it or the position it takes
            among the model's positional inputs. ``(0, '_')`` is ``x`` of ``(x, y)``;
            ``('_', 1, 0)`` calls ``model(batch[2], batch[1])``.
        expecting_common_inputs: deeplite-profiler's flag: the inputs are tensors, or tuples,
            lists and dicts of tensors, so ``infer_sampler(batch)`` can describe them and
            ``create_random_model_inputs`` make random ones. Inputs of any structure are
            profiled either way.

    ``forward_pass(batch)`` returns ``(args, kwargs)`` for ``model(*args, **kwargs)``.

    deeplite-profiler's calling convention keeps deeplite's checks: a ``ForwardPass`` (or
    subclass) given ``model_input_pattern=None`` explicitly must override
    ``extract_model_inputs``, and one given ``expecting_common_inputs=False`` must override
    ``create_random_model_inputs``; otherwise it is a ``TypeError``, as in deeplite. Its subclass
    hooks are honoured: an overridden ``extract_model_inputs(batch)`` gives the inputs (a tuple:
    positional; a dict: keyword inputs; ``Inputs``; anything else: the one input), and an
    overridden ``create_random_model_inputs(batch_size)`` gives the inputs of a run at that
    batch size instead of samples taken from the data. ``model_call(model, x, device)`` is what
    ``perform`` / ``random_perform`` call; the profiler's own measurements call
    ``model(*args, **kwargs)`` on the extracted inputs, and never use random inputs unless
    ``create_random_model_inputs`` is overridden.
    """

    def __init__(
        self,
        inputs: InputSpec = None,
        *,
        targets: TargetSpec = None,
        extract: Callable[[Any], Any] | None = None,
        model_input_pattern: Sequence[Key] | None = _NOT_GIVEN,
        expecting_common_inputs: bool = _NOT_GIVEN,
    ) -> None:
        deeplite_style = model_input_pattern is not _NOT_GIVEN or expecting_common_inputs is not _NOT_GIVEN
        model_input_pattern = None if model_input_pattern is _NOT_GIVEN else model_input_pattern
        expecting_common_inputs = True if expecting_common_inputs is _NOT_GIVEN else bool(expecting_common_inputs)
        if deeplite_style and inputs is None and extract is None:
            self._check_deeplite_hooks(model_input_pattern, expecting_common_inputs)
        self.mip = ModelInputPattern(model_input_pattern) if model_input_pattern is not None else None
        self._pattern = self.mip
        self.expecting_common_inputs = expecting_common_inputs
        self._tensor_sampler: Any = None
        if self._pattern is not None and (inputs is not None or extract is not None):
            raise TypeError("ForwardPass takes one of inputs=, extract= or model_input_pattern=")
        if extract is not None and inputs is not None:
            raise TypeError("ForwardPass takes inputs= or extract=, not both")
        if extract is not None and not callable(extract):
            raise TypeError(f"ForwardPass(extract=...) must be callable, got {type(extract).__name__}")
        self._inputs = self._validate_inputs(inputs)
        self._targets = self._validate_targets(targets)
        self._extract = extract

    def _check_deeplite_hooks(self, model_input_pattern: Any, expecting_common_inputs: bool) -> None:
        """deeplite's rule: what the pattern and the flag do not provide, a subclass method must."""
        name = type(self).__name__
        if model_input_pattern is None and not _overrides(self, "extract_model_inputs"):
            raise TypeError(f"{name}(model_input_pattern=None): without a pattern, {name} must define "
                            "extract_model_inputs(batch); give model_input_pattern=(0, '_') (or inputs=) or "
                            "define the method")
        if not expecting_common_inputs and not _overrides(self, "create_random_model_inputs"):
            raise TypeError(f"{name}(expecting_common_inputs=False): inputs that are not tensors (or tuples, lists, "
                            f"dicts of tensors) cannot be made up, so {name} must define "
                            "create_random_model_inputs(batch_size)")

    @staticmethod
    def _validate_inputs(inputs: InputSpec) -> InputSpec:
        if inputs is None or isinstance(inputs, (int, str)):
            if inputs is not None:
                _check_key(inputs, "inputs")
            return inputs
        if isinstance(inputs, Mapping):
            if not inputs:
                raise ValueError("ForwardPass(inputs={}) names no input")
            for key, name in inputs.items():
                _check_key(key, "inputs")
                if not isinstance(name, str) or not name.isidentifier():
                    raise TypeError(
                        f"ForwardPass(inputs={{{key!r}: {name!r}}}): the value is the keyword "
                        f"argument name and must be an identifier str"
                    )
            return dict(inputs)
        if isinstance(inputs, (tuple, list)):
            keys = tuple(inputs)
            if not keys:
                raise ValueError("ForwardPass(inputs=()) names no input")
            for key in keys:
                _check_key(key, "inputs")
            kinds = {type(k) for k in keys}
            if len(kinds) > 1:
                raise TypeError(
                    f"ForwardPass(inputs={keys!r}) mixes positions and keys; positions give "
                    f"positional inputs, keys keyword inputs. Use extract=fn for a mix"
                )
            if kinds == {str}:
                bad = [k for k in keys if not k.isidentifier()]
                if bad:
                    raise TypeError(
                        f"ForwardPass(inputs={keys!r}): {bad[0]!r} is not a valid keyword name; "
                        f"map it to one, e.g. inputs={{{bad[0]!r}: 'name'}}"
                    )
            return keys
        raise TypeError(
            f"ForwardPass(inputs=...) takes None, a position, a key, a tuple of them, or a "
            f"mapping batch key -> keyword name; got {type(inputs).__name__}"
        )

    @staticmethod
    def _validate_targets(targets: TargetSpec) -> TargetSpec:
        if targets is None or callable(targets):
            return targets
        if isinstance(targets, (tuple, list)):
            if not targets:
                raise ValueError("ForwardPass(targets=()) names no target")
            for key in targets:
                _check_key(key, "targets")
            return tuple(targets)
        _check_key(targets, "targets")
        return targets

    def __repr__(self) -> str:
        parts = []
        if self._pattern is not None:
            parts.append(f"model_input_pattern={tuple(self._pattern)!r}")
        if self._inputs is not None:
            parts.append(f"inputs={self._inputs!r}")
        if self._extract is not None:
            parts.append(f"extract={getattr(self._extract, '__qualname__', self._extract)!s}")
        if self._targets is not None:
            target = getattr(self._targets, "__qualname__", None) if callable(self._targets) else None
            parts.append(f"targets={target or repr(self._targets)}")
        return f"ForwardPass({', '.join(parts)})"

    # -- reading a batch ------------------------------------------------------------------

    @staticmethod
    def _take(batch: Any, key: Key, split: str | None, role: str) -> Any:
        """``batch[key]`` (or a named tuple's field), or a ``DataError`` naming what is there."""
        head = f"{_where(split)}cannot take {role} {key!r} from batch {describe(batch)}"
        if isinstance(batch, Mapping):
            if key in batch:
                return batch[key]
            raise DataError(f"{head}; keys: {_quoted(sorted(batch.keys(), key=str))}")
        if isinstance(batch, (tuple, list)):
            if isinstance(key, int):
                if -len(batch) <= key < len(batch):
                    return batch[key]
                count = len(batch)
                raise DataError(f"{head}; it has {count} element{'s' if count != 1 else ''}")
            if _is_namedtuple(batch) and key in type(batch)._fields:
                return getattr(batch, key)
            if _is_namedtuple(batch):
                raise DataError(f"{head}; fields: {_quoted(type(batch)._fields)}")
            raise DataError(f"{head}; it is a {type(batch).__name__}: take elements by position")
        raise DataError(f"{head}; it is not a tuple, list or dict")

    def __call__(self, batch: Any, split: str | None = None) -> tuple[tuple, dict]:
        """The model inputs in ``batch``, as ``(args, kwargs)``. ``split`` names it in errors."""
        if _overrides(self, "extract_model_inputs"):
            return self._hook_inputs(self.extract_model_inputs, batch, split, "extract_model_inputs")
        if self._extract is not None:
            return self._call_extract(batch, split)
        if self._pattern is not None:
            return self._take_pattern(batch, split), {}
        spec = self._inputs
        if spec is None:
            if adapter_for(batch) is not None:
                return (batch,), {}
            if isinstance(batch, Mapping):
                keys = sorted(batch.keys(), key=str)
                one, several = (keys[0] if keys else "x"), tuple(keys[:2]) or ("x", "y")
                raise DataError(
                    f"{_where(split)}batch {describe(batch)} is a dict; name its model inputs: "
                    f"ForwardPass(inputs={one!r}) for one positional input, or "
                    f"ForwardPass(inputs={several!r}) for keyword inputs"
                )
            if isinstance(batch, (tuple, list)):
                if not batch:
                    raise DataError(f"{_where(split)}batch {describe(batch)} is empty; it holds no model input")
                return (batch[0],), {}
            return (batch,), {}
        if isinstance(spec, (int, str)):
            return (self._take(batch, spec, split, "input"),), {}
        if isinstance(spec, Mapping):
            return (), {name: self._take(batch, key, split, "input") for key, name in spec.items()}
        if isinstance(spec[0], int):
            return tuple(self._take(batch, k, split, "input") for k in spec), {}
        return (), {k: self._take(batch, k, split, "input") for k in spec}

    def _take_pattern(self, batch: Any, split: str | None) -> tuple:
        return self._pattern.rearrange_from_pattern(batch, split)

    def _hook_inputs(self, hook: Callable[..., Any], argument: Any, split: str | None,
                     name: str) -> tuple[tuple, dict]:
        """``(args, kwargs)`` from what a deeplite-style hook returned."""
        result = hook(argument)
        if isinstance(result, Mapping):
            if not all(isinstance(k, str) for k in result):
                raise DataError(f"{_where(split)}{type(self).__name__}.{name} returned a dict with non-str keys "
                                f"{describe(result)}; keyword inputs need str names")
            return (), dict(result)
        return _args_kwargs(result)

    # -- deeplite-profiler's hooks ---------------------------------------------------------

    def extract_model_inputs(self, batch: Any) -> Any:
        """The model inputs of ``batch`` in deeplite-profiler's shape: a tuple of positional inputs
        (``Inputs`` when there are keyword inputs). A subclass may override it, returning a tuple
        of positional inputs, a dict of keyword inputs, ``Inputs`` or the one input."""
        args, kwargs = self(batch)
        return Inputs(args, kwargs) if kwargs else args

    @property
    def _tensor_sampler_cls(self) -> Any:
        """The framework's ``TensorSampler`` class (deeplite's hook): ``TorchForwardPass`` and
        ``TFForwardPass`` (in the backends) have one; a plain ``ForwardPass`` has none."""
        raise TypeError(f"{type(self).__name__} has no tensor sampler: use the backend's forward pass "
                        "(deeplite_like.backends.torch.TorchForwardPass, deeplite_like.backends.keras.TFForwardPass) "
                        "or define the _tensor_sampler_cls property")

    def infer_sampler(self, batch: Any) -> None:
        """Describe the inputs of ``batch`` (shapes, dtypes) for ``create_random_model_inputs`` and
        ``get_model_input_shapes`` (deeplite's method; nothing to do when not expecting common inputs)."""
        if not self.expecting_common_inputs:
            return
        x = self.extract_model_inputs(batch)
        self._tensor_sampler = self._tensor_sampler_cls(x if isinstance(x, tuple) else (x,))

    def _sampler(self, method: str) -> Any:
        if not self.expecting_common_inputs:
            raise NotImplementedError(f"{type(self).__name__}.{method}: expecting_common_inputs is False; "
                                      f"define {method} in the subclass")
        if self._tensor_sampler is None:
            raise TypeError(f"{type(self).__name__}.{method}: no inputs described yet; call infer_sampler(batch) "
                            "with a batch of the data first")
        return self._tensor_sampler

    def create_random_model_inputs(self, batch_size: int) -> Any:
        """Random inputs at ``batch_size`` shaped as the batch given to ``infer_sampler`` (deeplite's hook).

        Used only by ``random_perform``: the profiler's measurements take real samples
        (``inputs_for``) unless a subclass overrides this method."""
        return self._sampler("create_random_model_inputs").create_random_tensors(batch_size)

    def get_model_input_shapes(self) -> tuple:
        """The shape of every input tensor (per sample), flattened (deeplite's method)."""
        return self._sampler("get_model_input_shapes").get_flat_shapes_tuple()

    def model_call(self, model: Any, x: Any, device: Any = None) -> Any:
        """Call ``model`` on inputs ``x`` (an ``Inputs``, a tuple of positional inputs, or one input)."""
        if not callable(model):
            raise TypeError(f"{type(self).__name__}.model_call: the model {type(model).__name__} is not callable")
        args, kwargs = _args_kwargs(x)
        return model(*args, **kwargs)

    def perform(self, model: Any, batch: Any, device: Any = None) -> Any:
        """``model_call`` on the inputs of ``batch`` (deeplite-profiler's method)."""
        return self.model_call(model, self.extract_model_inputs(batch), device)

    def random_perform(self, model: Any, batch_size: int, device: Any = None) -> Any:
        """``model_call`` on ``create_random_model_inputs(batch_size)`` (deeplite-profiler's method)."""
        return self.model_call(model, self.create_random_model_inputs(batch_size), device)

    def _call_extract(self, batch: Any, split: str | None) -> tuple[tuple, dict]:
        name = getattr(self._extract, "__qualname__", type(self._extract).__name__)
        try:
            result = self._extract(batch)
        except Exception as exc:
            raise DataError(
                f"{_where(split)}extract function {name} failed on batch {describe(batch)}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(result, Mapping):
            raise DataError(
                f"{_where(split)}extract function {name} returned a dict {describe(result)}; "
                f"return Inputs(kwargs=d) to pass keyword inputs, or Inputs(args=(d,)) to pass "
                f"the dict as one positional input"
            )
        return _args_kwargs(result)

    def targets(self, batch: Any, split: str | None = None) -> Any:
        """The targets in ``batch`` (element 1 of a tuple batch unless ``targets=`` says)."""
        spec = self._targets
        if callable(spec):
            return spec(batch)
        if spec is None:
            if isinstance(batch, (tuple, list)):
                return self._take(batch, 1, split, "target")
            raise DataError(
                f"{_where(split)}batch {describe(batch)} has no default targets (element 1 of a "
                f"tuple batch); say where they are with ForwardPass(targets=...)"
            )
        if isinstance(spec, tuple):
            return tuple(self._take(batch, k, split, "target") for k in spec)
        return self._take(batch, spec, split, "target")

    # -- batch size and resizing ----------------------------------------------------------

    @staticmethod
    def _reference_size(args: tuple, kwargs: Mapping[str, Any], split: str | None) -> int:
        for leaf in _leaves((args, kwargs)):
            adapter = adapter_for(leaf)
            if adapter is not None:
                size = adapter.batch_dim(leaf)
                if size is not None:
                    return size
        raise DataError(
            f"{_where(split)}no tensor with a batch dimension among the model inputs "
            f"{describe(args)}, {describe(kwargs)}; cannot tell the batch size"
        )

    def batch_size(self, batch: Any, split: str | None = None) -> int:
        """The leading dimension of the first input tensor (args first, then kwargs), in samples."""
        args, kwargs = self(batch, split)
        return self._reference_size(args, kwargs, split)

    def resize(
        self, args: tuple, kwargs: Mapping[str, Any], batch_size: int, split: str | None = None
    ) -> tuple[tuple, dict]:
        """Inputs with ``batch_size`` samples, taken from the given ones (see the module doc).

        The batch size of the inputs is the leading dimension of the first input tensor; every
        tensor with that leading dimension is resized, every other tensor (a mask shared by all
        samples, shape ``(L, L)``) and every non-tensor passes through unchanged. A shared tensor
        whose leading dimension happens to equal the batch size cannot be told apart and is
        resized too: use ``extract=`` to build such inputs yourself.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        reference = self._reference_size(args, kwargs, split)
        if reference == 0:
            raise DataError(
                f"{_where(split)}the first batch has 0 samples ({describe(args)}); cannot take "
                f"{batch_size} samples from it"
            )
        if batch_size > reference:  # new memory: refused with the estimate before anything is built
            per_sample = sum(_sample_bytes(leaf) for leaf in _leaves((args, kwargs))
                             if (adapter := adapter_for(leaf)) is not None and adapter.batch_dim(leaf) == reference)
            index = 8  # one int64 row index per sample
            check_fits_in_memory((per_sample + index) * batch_size, f"{batch_size} samples of "
                                 f"{format_bytes(per_sample)} each, plus an 8 B index per sample",
                                 f"batch_size={batch_size}")

        def take(leaf: Any) -> Any:
            adapter = adapter_for(leaf)
            if adapter is None or adapter.batch_dim(leaf) != reference:
                return leaf
            return adapter.take(leaf, batch_size)

        return _map_leaves(take, tuple(args)), _map_leaves(take, dict(kwargs))

    def inputs_for(
        self, data_splits: Mapping[str, Any], split: str, batch_size: int | None = None,
        adjust: Callable[[tuple, dict], tuple[tuple, dict]] | None = None,
    ) -> tuple[tuple, dict]:
        """The model inputs of the first batch of ``split``, as ``(args, kwargs)``.

        With ``batch_size`` they are resized to that many samples by taking real samples:
        the first ``batch_size`` when smaller, cyclic repeats when larger (see ``resize``).
        ``adjust(args, kwargs)`` is applied before resizing (a backend adds a missing batch axis).
        """
        if batch_size is not None and _overrides(self, "create_random_model_inputs"):
            return self._hook_inputs(self.create_random_model_inputs, batch_size, split, "create_random_model_inputs")
        batch = first_batch(data_splits, split)
        args, kwargs = self(batch, split)
        if adjust is not None:
            args, kwargs = adjust(args, kwargs)
        if batch_size is None:
            return args, kwargs
        return self.resize(args, kwargs, batch_size, split)


def as_forward_pass(forward_pass: Any, owner: str) -> ForwardPass:
    """``forward_pass`` checked for ``owner(..., forward_pass=...)``: ``None`` gives the default ``ForwardPass()``.

    Anything but a ``ForwardPass`` is a ``TypeError`` that shows the ``ForwardPass`` meaning what
    was probably meant: a key or keys -> ``ForwardPass(inputs=...)``, a function ->
    ``ForwardPass(extract=...)``.
    """
    if forward_pass is None:
        return ForwardPass()
    if isinstance(forward_pass, ForwardPass):
        return forward_pass
    got = f"{type(forward_pass).__name__} {forward_pass!r}"
    if isinstance(forward_pass, (int, str, tuple, list, Mapping)) and not isinstance(forward_pass, bool):
        fix = (f"to take {forward_pass!r} from each batch as the model input(s), write "
               f"forward_pass=ForwardPass(inputs={forward_pass!r})")
    elif callable(forward_pass):
        name = getattr(forward_pass, "__qualname__", type(forward_pass).__name__)
        fix = (f"to build the model inputs from each batch with {name}, write "
               f"forward_pass=ForwardPass(extract={name})")
    else:
        fix = "build one with ForwardPass(inputs=...) or ForwardPass(extract=fn)"
    raise TypeError(f"{owner}(forward_pass=...) must be a deeplite_like.ForwardPass, got {got}; {fix}")


def _args_kwargs(inputs: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of an ``Inputs``, a tuple or list of positional inputs, or the one input."""
    if isinstance(inputs, Inputs):
        return inputs.args, dict(inputs.kwargs)
    return (tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)), {}


def _overrides(forward_pass: ForwardPass, name: str) -> bool:
    return getattr(type(forward_pass), name) is not getattr(ForwardPass, name)


class ModelInputPattern(tuple):
    """deeplite-profiler's ``model_input_pattern``: one entry per element of a tuple batch.

    ``'_'`` skips an element; an int is the position the element takes among the model's
    positional inputs. ``(0, '_')`` is ``x`` of ``(x, y)``; ``('_', 1, 2, '_', 0)`` calls
    ``model(batch[4], batch[1], batch[2])``. The ints must be distinct and form ``0..n-1``.
    """

    def __new__(cls, pattern: Sequence[Key]) -> "ModelInputPattern":
        if isinstance(pattern, (str, bytes)) or not isinstance(pattern, Sequence):
            raise TypeError(f"model_input_pattern must be a tuple such as (0, '_'), got {pattern!r}")
        positions: dict[int, int] = {}
        for index, entry in enumerate(pattern):
            if entry == "_":
                continue
            if isinstance(entry, bool) or not isinstance(entry, int):
                raise TypeError(f"model_input_pattern {tuple(pattern)!r}: entry {entry!r} is neither '_' nor an "
                                "input position")
            if entry in positions:
                raise TypeError(f"model_input_pattern {tuple(pattern)!r} gives input position {entry} twice")
            positions[entry] = index
        if sorted(positions) != list(range(len(positions))):
            raise TypeError(f"model_input_pattern {tuple(pattern)!r}: the input positions must be 0..n-1, got "
                            f"{sorted(positions)}")
        self = super().__new__(cls, tuple(pattern))
        self.order = tuple(positions[i] for i in range(len(positions)))
        return self

    def rearrange_from_pattern(self, batch: Any, split: str | None = None) -> tuple:
        """The model's positional inputs taken from ``batch``, in order (deeplite's method).

        A pattern of one entry takes the whole batch as that element (``(0,)``: the batch is
        the input; ``('_',)``: no input); a longer one needs a tuple / list batch of its length.
        """
        if len(self) == 1:
            return (batch,) if self.order else ()
        if not isinstance(batch, (tuple, list)) or len(batch) != len(self):
            count = len(batch) if isinstance(batch, (tuple, list)) else 1
            raise DataError(f"{_where(split)}batch {describe(batch)} has {count} element(s); "
                            f"model_input_pattern {tuple(self)!r} expects {len(self)}")
        return tuple(batch[position] for position in self.order)


class ForwardPassSplits(dict):
    """Data splits carrying the ``ForwardPass`` to use with them (``Profiler.enable_forward_pass_data_splits``).

    A plain dict of the same splits; a backend profiler built on it uses ``forward_pass`` unless
    it is given one itself. deeplite's per-split dict ``{split: ForwardPass or None}`` may name
    one forward pass (the others ``None``); two different ones are refused.
    """

    def __init__(self, data_splits: Mapping[str, Any], forward_pass: Any = None) -> None:
        if not isinstance(data_splits, Mapping):
            raise TypeError(f"enable_forward_pass_data_splits needs a dict split name -> data, got "
                            f"{type(data_splits).__name__}")
        super().__init__(data_splits)
        if isinstance(forward_pass, Mapping):
            given = {id(fp): fp for fp in forward_pass.values() if fp is not None}
            if len(given) > 1:
                raise ValueError("enable_forward_pass_data_splits: one ForwardPass serves every split here; got "
                                 f"{len(given)} different ones in {sorted(map(str, forward_pass))}")
            forward_pass = next(iter(given.values()), None)
        if forward_pass is not None and not isinstance(forward_pass, ForwardPass):
            raise TypeError(f"enable_forward_pass_data_splits(forward_pass=...) takes a ForwardPass, got "
                            f"{type(forward_pass).__name__}")
        self.forward_pass = forward_pass
