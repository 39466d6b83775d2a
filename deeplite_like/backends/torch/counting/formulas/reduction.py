"""Reductions: priced per INPUT element N, plus a per-output term R where a step runs once per
output (a divide for ``mean``, a ``sqrt`` for ``std``).

Only floating-point inputs are priced: counting booleans or ids (``sum`` of a mask) is free.
Sorting, ``topk``, ``median``, ``all``/``any`` and counting are selection (free.py).

The table of counts is in ``reduction``.
"""
from __future__ import annotations

from ..registry import Cost, OpCall, register_formula
from ._common import bind, first_tensor, is_float, numel, ops


def _sizes(call: OpCall) -> tuple[int, int]:
    """(N, R): floating input elements and output elements (0, 0 for non-float input)."""
    x = call.args[0]
    if not is_float(x):
        return 0, 0
    return numel(x), max(numel(first_tensor(call.out)), 1)


def reduction(per_input: int, per_output: int = 0):
    """A formula charging ``per_input`` FLOPs per input element and ``per_output`` per output::

        sum, nansum, prod, cumsum, cumprod      N        (one add / mul per element reduced)
        mean, nanmean                           N + R    (sum, then one divide per output)
        amax, amin, max, min, argmax, argmin    N        (one max/min per element, as relu is 1)
        aminmax                                 2N
        var, var_mean                           4N + 2R  (mean N+R; sub, square, sum 3N; divide R)
        std, std_mean                           4N + 3R  (var, then sqrt R)
        logsumexp                               4N + 2R  (max, sub, exp, sum N each; log, add R)
        logcumsumexp                            3N       (exp, add, log per element)
        norm p=2 (vector_norm)                  2N + R   (square, sum; sqrt)
        norm p=1 / p=inf                        2N       (abs; sum or max)
        norm p other                            3N + R   (abs, pow, sum; root)
        cdist (pairs x D)                       3*pairs*D + pairs
    """

    def formula(call: OpCall) -> Cost:
        n, r = _sizes(call)
        return Cost.elementwise(per_input * n + per_output * (r if n else 0))

    formula.__name__ = formula.__qualname__ = f"reduction_{per_input}N_{per_output}R"
    formula.__doc__ = f"{per_input} FLOP(s) per input element + {per_output} per output element."
    return formula


register_formula(*ops("sum", "nansum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin",
                      "cummax", "cummin", inplace=True))(reduction(1))
register_formula(*ops("mean", "nanmean"))(reduction(1, 1))
register_formula(*ops("aminmax"))(reduction(2))
register_formula(*ops("var", "var_mean"))(reduction(4, 2))
register_formula(*ops("std", "std_mean"))(reduction(4, 3))
register_formula(*ops("logsumexp"))(reduction(4, 2))
register_formula(*ops("logcumsumexp"))(reduction(3))


@register_formula(*ops("max", "min"))
def max_min(call: OpCall) -> Cost:
    """max/min: as a reduction N FLOPs; the binary overload (``max(a, b)``) 1 per output element."""
    if "other" in bind(call):
        out = first_tensor(call.out)
        return Cost.elementwise(numel(out) if is_float(out) else 0)
    n, _ = _sizes(call)
    return Cost.elementwise(n)


def _norm_cost(n: int, r: int, p) -> int:
    if p is None or p == 2:
        return 2 * n + r
    if p in (1, float("inf"), float("-inf")):
        return 2 * n
    if p == 0:
        return n  # count of non-zeros: one test-and-add per element
    return 3 * n + r


@register_formula(*ops("linalg_vector_norm", "norm"))
def vector_norm(call: OpCall) -> Cost:
    """p-norm over dims: p=2 2N+R, p=1/inf 2N, p=0 N, other p 3N+R (N inputs, R outputs)."""
    a = bind(call)
    p = a.get("ord", a.get("p", 2))
    n, r = _sizes(call)
    return Cost.elementwise(_norm_cost(n, r, float(p) if isinstance(p, (int, float)) else p) if n else 0)


@register_formula(*ops("dist"))
def dist(call: OpCall) -> Cost:
    """p-norm of a - b: N for the subtraction + the norm's cost."""
    a = bind(call)
    out = first_tensor(call.out)
    if not is_float(out):
        return Cost()
    n = max(numel(a["self"]), numel(a["other"]))
    return Cost.elementwise(n + _norm_cost(n, 1, float(a["p"])))


@register_formula(*ops("_cdist_forward"))
def cdist(call: OpCall) -> Cost:
    """Pairwise p-distances (B, P, D) x (B, R, D): per pair and dim sub, |.|^p, add (3); a root per pair."""
    x1 = bind(call)["x1"]
    if not is_float(x1):
        return Cost()
    pairs = numel(first_tensor(call.out))
    return Cost.elementwise(3 * pairs * int(x1.shape[-1]) + pairs)
