"""Loss functions (reached when ``count_ops`` is given a ``loss_fn``). N = input elements.

Also ``multi_margin_loss`` (3 per element) and CTC (9 per recursion state; backward 11 per
state + 3 per log-prob), with their backward.

The forward table (and the reductions) is in ``_pointwise_loss``, the backward's in
``_pointwise_loss_backward``.
"""
from __future__ import annotations

from ..registry import Cost, Formula, OpCall, register_formula
from ._common import bind, is_float, numel, ops

_NONE, _MEAN, _SUM = 0, 1, 2


def _reduce(n: int, reduction: int) -> int:
    return {_NONE: 0, _MEAN: n + 1, _SUM: n}.get(int(reduction), n + 1)


def _pointwise_loss(per_element: int):
    """A pointwise loss charging ``per_element`` FLOPs per input element (+N weight), + the reduction.

    Reduction adds ``sum`` N or ``mean`` N + 1 (a sum and one divide); ``none`` adds 0::

        mse_loss                 sub, square                                  2N
        l1_loss                  sub, abs                                     2N
        smooth_l1 / huber        sub, abs, quadratic branch d*d*0.5/beta      5N
        soft_margin_loss         log(1 + exp(-y*x)): mul, neg, exp, add, log  5N
        binary_cross_entropy     -(y log x + (1-y) log(1-x)): 2 log, 2 sub,
                                 2 mul, add, neg                              8N (+N weight)
        bce_with_logits          (1-y) x + log(1 + exp(-x)): sub, mul, neg,
                                 exp, add, log, add                           7N (+N weight, +3N pos_weight)
        nll_loss                 pick one log-prob per target (free), negate
                                 and sum B = numel(target)                    B (+B weight) (+1 mean)
    """
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        x = a["self"]
        if not is_float(x):
            return Cost()
        n = numel(x)
        extra = n if a.get("weight") is not None else 0
        extra += 3 * n if a.get("pos_weight") is not None else 0
        return Cost.elementwise(per_element * n + extra + _reduce(n, a.get("reduction", _MEAN)))

    formula.__name__ = formula.__qualname__ = f"pointwise_loss_{per_element}"
    formula.__doc__ = f"Pointwise loss: {per_element} FLOPs per element + the reduction (sum N, mean N + 1)."
    return formula


register_formula(*ops("mse_loss", "l1_loss"))(_pointwise_loss(2))
register_formula(*ops("smooth_l1_loss", "huber_loss", "soft_margin_loss"))(_pointwise_loss(5))
register_formula(*ops("binary_cross_entropy"))(_pointwise_loss(8))
register_formula(*ops("binary_cross_entropy_with_logits"))(_pointwise_loss(7))


def _nll_loss(backward: bool, doc: str) -> Formula:
    """NLL loss and its backward: B = numel(target) values (B), +B with class weights, + the mean's divide
    (1 forward, B backward); ``doc`` is the formula's docstring."""

    def formula(call: OpCall) -> Cost:
        a = bind(call)
        if not is_float(a["self"]):
            return Cost()
        b = numel(a["target"])
        mean = (b if backward else 1) if int(a.get("reduction", _MEAN)) == _MEAN else 0
        return Cost.elementwise(b + (b if a.get("weight") is not None else 0) + mean)

    formula.__name__ = formula.__qualname__ = "nll_loss_backward" if backward else "nll_loss"
    formula.__doc__ = doc
    return formula


register_formula(*ops("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss2d", "nll_loss_nd"))(_nll_loss(
    False, "NLL loss: B = numel(target) picked values summed (B), +B with class weights, +1 for the mean."))


def _pointwise_loss_backward(per_element: int):
    """A pointwise loss's backward charging ``per_element`` FLOPs per input element.

    ``cross_entropy`` runs as ``_log_softmax`` + ``nll_loss_forward``; ``kl_div`` and label
    smoothing decompose. Backward::

        mse_loss_backward        2 * (x - y) * g (/ N): sub, mul, mul          3N (+N mean)
        smooth_l1 / huber       sign or clamp of the difference, times g      4N (+N mean)
        binary_cross_entropy     g * (x - y) / (x * (1 - x)): sub, sub, mul,
                                 div, mul                                      5N (+N weight) (+N mean)
        nll_loss_backward        -w * g scattered to B positions               B (+B weight) (+B mean)
    """
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        x = a["self"]
        if not is_float(x):
            return Cost()
        n = numel(x)
        extra = (n if a.get("weight") is not None else 0) + (n if int(a.get("reduction", _MEAN)) == _MEAN else 0)
        return Cost.elementwise(per_element * n + extra)

    formula.__name__ = formula.__qualname__ = f"pointwise_loss_backward_{per_element}"
    formula.__doc__ = f"Pointwise loss backward: {per_element} FLOPs per element (+N weight, +N for the mean)."
    return formula


# multi_margin_loss_backward: 3 FLOPs per (sample, class) (+1 weight, +1 for the mean's divide).
register_formula(*ops("mse_loss_backward", "multi_margin_loss_backward"))(_pointwise_loss_backward(3))
register_formula(*ops("smooth_l1_loss_backward", "huber_loss_backward",
                      "soft_margin_loss_backward"))(_pointwise_loss_backward(4))
register_formula(*ops("binary_cross_entropy_backward"))(_pointwise_loss_backward(5))


register_formula(*ops("nll_loss_backward", "nll_loss2d_backward"))(_nll_loss(
    True, "NLL backward: -w*g written to B = numel(target) positions: B (+B weight) (+B for the mean's divide)."))


@register_formula(*ops("multi_margin_loss"))
def multi_margin_loss(call: OpCall) -> Cost:
    """Multi-class hinge: per (sample, class) margin - x_y + x_i (2), clamp (1), power p != 1 (+1),
    class weight (+1); then the reduction."""
    a = bind(call)
    x = a["self"]
    if not is_float(x):
        return Cost()
    n = numel(x)
    per = 3 + (0 if a.get("p", 1) == 1 else 1) + (1 if a.get("weight") is not None else 0)
    return Cost.elementwise(per * n + _reduce(n, a.get("reduction", _MEAN)))


def _ctc_states(a: dict) -> int:
    """(time x batch x (2 * longest target + 1)) states of the CTC recursions."""
    log_probs, targets, lengths = a["log_probs"], a["targets"], a["target_lengths"]
    time = int(log_probs.shape[0])
    batch = int(log_probs.shape[1]) if log_probs.dim() == 3 else 1
    if targets.dim() == 2:  # padded (batch, S)
        labels = int(targets.shape[1])
    elif isinstance(lengths, (list, tuple)):
        labels = max((int(n) for n in lengths), default=0)
    else:  # concatenated targets with a lengths tensor
        labels = int(lengths.max()) if lengths.numel() and not lengths.is_meta else int(targets.shape[0])
    return time * batch * (2 * labels + 1)


@register_formula(*ops("_ctc_loss"))
def ctc_loss(call: OpCall) -> Cost:
    """CTC forward (alpha recursion): 9 FLOPs per (time, batch, extended label) state (two log-add-exps 8,
    the emission add 1)."""
    a = bind(call)
    return Cost.elementwise(9 * _ctc_states(a)) if is_float(a["log_probs"]) else Cost()


@register_formula(*ops("_ctc_loss_backward"))
def ctc_loss_backward(call: OpCall) -> Cost:
    """CTC backward: beta recursion 9 + alpha*beta 2 per state, + exp, sub, mul per log-prob element (3)."""
    a = bind(call)
    if not is_float(a["log_probs"]):
        return Cost()
    return Cost.elementwise(11 * _ctc_states(a) + 3 * numel(a["log_probs"]))
