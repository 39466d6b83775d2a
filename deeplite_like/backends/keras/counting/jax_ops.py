"""Keras on JAX: MACs and FLOPs counted from the program JAX traces (``jax.make_jaxpr``, no compilation).

Used by ``engine.observe``; imported only when Keras runs on JAX (nothing else imports jax).
The model's stateless call is traced once and every equation of the jaxpr priced by the
conventions of the torch backend, per primitive: the table, and the rules for ``scan``,
``while`` and ``cond``, are docs/conventions.rst's "Keras on JAX: the traced program"
(``primitive_cost`` and ``count_jaxpr`` apply them). Each equation goes to its innermost Keras
layer, read from ``eqn.source_info.name_stack`` (Keras' JAX backend opens a name scope per
layer call: ``att/dense``).
"""
from __future__ import annotations

import inspect
from typing import Any

import jax
import numpy as np

from deeplite_like.results import OpCount, OpStats

__all__ = ["TracedProgram", "count_jaxpr", "primitive_cost", "trace_program"]

_ELEMENTWISE = frozenset("""
    add sub mul div rem max min neg abs sign exp exp2 log log1p expm1 tanh sqrt rsqrt cbrt
    pow integer_pow square sin cos tan asin acos atan atan2 sinh cosh asinh acosh atanh erf erfc erf_inv
    lgamma digamma floor ceil round nextafter reciprocal add_any
""".split())
_TWO_BOUNDS = frozenset({"clamp"})
_SIGMOID = 4  # logistic: 1 / (1 + exp(-x)), neg exp add div, as torch's sigmoid
_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin",
                         "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})
_WINDOWS = frozenset({"reduce_window_max", "reduce_window_min", "reduce_window_sum"})
FREE = frozenset("""
    reshape transpose broadcast_in_dim convert_element_type slice dynamic_slice dynamic_update_slice
    concatenate squeeze expand_dims gather scatter select_n iota copy copy_p pad rev stop_gradient
    eq ne lt gt le ge and or not xor shift_left shift_right_logical shift_right_arithmetic population_count
    is_finite sort top_k reduce_precision random_bits random_seed random_wrap random_unwrap random_fold_in random_split
    threefry2x32 bitcast_convert_type device_put split optimization_barrier reduce_and reduce_or
    sharding_constraint mesh_cast complex real imag
""".split())
#: sub-program parameters walked once, per primitive
_CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
          "remat": "jaxpr", "checkpoint": "jaxpr", "custom_lin": "jaxpr"}
UNKNOWN_WHILE = "jax.while (trip count unknown, counted once)"


def _numel(aval: Any) -> int:
    return int(np.prod(aval.shape, dtype=np.int64)) if aval.shape else 1


def _is_float(aval: Any) -> bool:
    return np.issubdtype(getattr(aval, "dtype", np.int32), np.inexact)


def _is_infinite_bound(eqn: Any) -> bool:
    """``max(-inf, x)`` / ``min(inf, x)``: the identity a reduction's ``initial=-inf`` leaves behind
    (``jax.nn.softmax``'s row max), free as TensorFlow's and torch's softmax have no such step."""
    if eqn.primitive.name not in ("max", "min"):
        return False
    for var in eqn.invars:
        value = getattr(var, "val", None)
        if value is not None and np.ndim(value) == 0 and np.isinf(value):
            return True
    return False


def _scalars_alone(eqn: Any) -> bool:
    """Arithmetic on scalars alone (a scale computed from a shape) is free on the three Keras backends:
    TensorFlow runs it as ops, JAX and torch mostly in Python (engine._tf_tap)."""
    return all(not getattr(var.aval, "shape", ()) for var in (*eqn.invars, *eqn.outvars))


def primitive_cost(eqn: Any) -> tuple[int, int] | None:
    """``(macs, flops)`` of one jaxpr equation without sub-programs; ``(0, 0)`` free; ``None`` unknown."""
    name = eqn.primitive.name
    out = eqn.outvars[0].aval if eqn.outvars else None
    if name == "dot_general":
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
        lhs = eqn.invars[0].aval
        macs = _numel(out) * int(np.prod([lhs.shape[d] for d in lhs_contract], dtype=np.int64))
        return macs, 2 * macs
    if name == "conv_general_dilated":
        lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
        dn = eqn.params["dimension_numbers"]
        rhs_spec = dn.rhs_spec  # (out feature dim, in feature dim, *spatial)
        kernel = int(np.prod([rhs.shape[d] for d in rhs_spec[2:]], dtype=np.int64))
        groups = int(eqn.params["feature_group_count"]) * int(eqn.params.get("batch_group_count", 1))
        if any(d != 1 for d in eqn.params.get("lhs_dilation") or ()):  # transposed convolution
            macs = _numel(lhs) * (rhs.shape[rhs_spec[0]] // groups) * kernel
        else:
            macs = _numel(out) * rhs.shape[rhs_spec[1]] * kernel  # rhs in-features are C_in / groups already
        return macs, 2 * macs
    if name in _ELEMENTWISE or name in _TWO_BOUNDS:
        if out is None or not _is_float(out) or _is_infinite_bound(eqn) or _scalars_alone(eqn):
            return 0, 0  # integer index arithmetic, loop counters
        return 0, _numel(out) * (2 if name in _TWO_BOUNDS else 1)
    if name == "logistic":
        return (0, _numel(out) * _SIGMOID) if _is_float(out) else (0, 0)
    if name in _REDUCTIONS:
        x = eqn.invars[0].aval
        return (0, _numel(x)) if _is_float(x) else (0, 0)
    if name in _WINDOWS:
        window = int(np.prod(eqn.params["window_dimensions"], dtype=np.int64))
        return (0, _numel(out) * window) if _is_float(out) else (0, 0)
    if name in FREE:
        return 0, 0
    return None


class _Sink:
    """Costs by layer path, operator and both; unknown primitives by name."""

    def __init__(self, paths: set[str], root_name: str) -> None:
        self.paths, self.root_name = paths, root_name
        self.result = OpCount()
        self._where: dict[str, str] = {}
        self.repeats: dict[str, int] = {}  # path -> the fewest times an equation of its runs (its calls)
        self.unknown: dict[str, dict[str, int]] = {}  # path -> unpriced primitive -> calls

    def path_of(self, stack: str) -> str:
        """The innermost known layer path in a name stack (``att/dense`` -> ``att.dense``)."""
        if stack not in self._where:
            path = ""
            for part in stack.split("/"):
                part = part.split("(")[-1].rstrip(")")  # jvp(att) -> att
                candidate = f"{path}.{part}" if path else part
                if candidate in self.paths:
                    path = candidate
            self._where[stack] = path
        return self._where[stack]

    def add(self, stack: str, name: str, cost: tuple[int, int] | None, times: int) -> None:
        path = self.path_of(stack)
        if cost is None:
            self.result.untracked[f"jax.{name}"] = self.result.untracked.get(f"jax.{name}", 0) + times
            unknown = self.unknown.setdefault(path, {})
            unknown[f"jax.{name}"] = unknown.get(f"jax.{name}", 0) + times
            return
        macs, flops = cost[0] * times, cost[1] * times
        if macs == 0 and flops == 0:
            return
        self.result.macs += macs
        self.result.flops += flops
        self.result.by_module.setdefault(path, OpStats()).add(macs, flops, 0)
        for table in (self.result.by_operator, self.result.module_ops.setdefault(path, {})):
            table.setdefault(f"jax.{name}", OpStats()).add(macs, flops, times)


def _jaxpr(obj: Any) -> Any:
    return obj.jaxpr if hasattr(obj, "jaxpr") and not hasattr(obj, "eqns") else obj


def _trip_count(eqn: Any) -> int | None:
    """The trip count of a ``while`` the jaxpr proves: a literal start, a literal step of 1, ``<`` a literal bound."""
    cond, body = _jaxpr(eqn.params["cond_jaxpr"]), _jaxpr(eqn.params["body_jaxpr"])
    cond_nconsts, body_nconsts = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return None
    lhs, rhs = cond.eqns[0].invars
    carries = cond.invars[cond_nconsts:]
    if lhs not in carries or not hasattr(rhs, "val"):
        return None
    k = carries.index(lhs)
    start = eqn.invars[cond_nconsts + body_nconsts + k]
    if not hasattr(start, "val"):
        return None
    counter, stepped = body.invars[body_nconsts + k], body.outvars[k]
    for inner in body.eqns:
        if inner.outvars and inner.outvars[0] is stepped and inner.primitive.name == "add":
            a, b = inner.invars
            if a is counter and hasattr(b, "val") and int(b.val) == 1:
                return max(0, int(rhs.val) - int(start.val))
    return None


def _walk(jaxpr: Any, sink: _Sink, prefix: str, times: int) -> None:
    for eqn in jaxpr.eqns:
        own = str(eqn.source_info.name_stack)
        stack = "/".join(p for p in (prefix, own) if p)
        name = eqn.primitive.name
        path = sink.path_of(stack)
        sink.repeats[path] = min(sink.repeats.get(path, times), times)
        if name in _CALLS and _CALLS[name] in eqn.params:
            _walk(_jaxpr(eqn.params[_CALLS[name]]), sink, stack, times)
        elif name == "scan":
            _walk(_jaxpr(eqn.params["jaxpr"]), sink, stack, times * int(eqn.params["length"]))
        elif name == "while":
            trips = _trip_count(eqn)
            if trips is None:
                sink.result.untracked[UNKNOWN_WHILE] = sink.result.untracked.get(UNKNOWN_WHILE, 0) + times
                trips = 1
            _walk(_jaxpr(eqn.params["cond_jaxpr"]), sink, stack, times * (trips + 1))
            _walk(_jaxpr(eqn.params["body_jaxpr"]), sink, stack, times * trips)
        elif name == "cond":
            branches = [_jaxpr(b) for b in eqn.params["branches"]]
            costs = [count_jaxpr(b, sink.paths, sink.root_name) for b in branches]
            best = max(range(len(branches)), key=lambda i: (costs[i].flops, costs[i].macs))
            _walk(branches[best], sink, stack, times)
        else:
            sink.add(stack, name, primitive_cost(eqn), times)


def count_jaxpr(jaxpr: Any, paths: set[str] | frozenset[str] = frozenset(), root_name: str = "") -> OpCount:
    """An ``OpCount`` of one (closed) jaxpr; ``paths``: the dotted layer paths equations are attributed to.

    ``by_module`` holds each layer's own arithmetic (the caller rolls it up to parents),
    ``by_operator`` and ``module_ops`` are keyed ``jax.<primitive>``. Sub-programs
    (``pjit``/``closed_call``/``custom_jvp_call``/``custom_vjp_call``/``remat``) are walked;
    a ``scan`` body counts x ``length``; a ``while`` body x the trip count when the jaxpr proves it
    (a counter starting at a literal, stepped by a literal 1, compared ``<`` with a literal bound),
    otherwise once, named ``jax.while (trip count unknown, counted once)`` in ``untracked``; a
    ``cond`` its costliest branch (by FLOPs), an upper bound.
    """
    return _walked(jaxpr, paths, root_name).result


def _walked(jaxpr: Any, paths: set[str] | frozenset[str], root_name: str) -> _Sink:
    sink = _Sink(set(paths), root_name)
    _walk(_jaxpr(jaxpr), sink, "", 1)
    return sink


def _takes_training(call: Any) -> bool:
    params = inspect.signature(call).parameters.values()
    return any(p.name == "training" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


class TracedProgram:
    """The priced program of one model call: each layer's *own* arithmetic, by dotted path.

    ``own[path]``: primitive -> ``OpStats`` of the equations whose innermost layer is ``path``;
    ``unknown[path]``: unpriced primitives -> calls; ``untracked``: every unknown, and a ``while``
    whose trip count is not proven. ``repeats(path)``: how many times the layer runs per call of the
    model (a layer inside an ``ops.scan`` of 6 steps: 6; an LSTM, whose own scan is inside it: 1).
    """

    def __init__(self, sink: _Sink) -> None:
        self.own = sink.result.module_ops
        self.unknown = sink.unknown
        self.untracked = sink.result.untracked
        self._repeats = sink.repeats

    def repeats(self, path: str) -> int:
        """How many times a call of ``path`` runs: the fewest times an equation of it or of a layer inside
        it runs (a ``scan`` equation runs as often as the call that holds it; its body more). 1 when
        none ran; a layer called both inside and outside a ``scan`` counts once per recorded call."""
        if not path:
            return 1
        inside = [times for where, times in self._repeats.items() if where == path or where.startswith(path + ".")]
        return min(inside, default=1)


def trace_program(model: Any, inputs: Any, *, training: bool, paths: list[str]) -> TracedProgram:
    """Trace ``model.stateless_call`` with ``jax.make_jaxpr`` (no compilation, no run) and price it."""
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    # ``training`` only where ``call`` takes it (Keras' own __call__ makes the same check)
    kwargs = {"training": training} if _takes_training(model.call) else {}

    def call(trainable: Any, non_trainable: Any, inputs: Any) -> Any:
        return model.stateless_call(trainable, non_trainable, inputs, **kwargs)[0]

    closed = jax.make_jaxpr(call)(trainable, non_trainable, inputs)
    return TracedProgram(_walked(closed, set(paths) - {""}, getattr(model, "name", "")))
