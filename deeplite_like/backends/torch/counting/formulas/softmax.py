"""Softmax family: a cost per element of the input (the row length does not change it).

softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x):
max 1 + sub 1 + exp 1 + sum 1 + div 1 = 5 FLOPs per element. ``log_softmax`` has the same
five steps (the final div becomes a sub of log-sum). ``_safe_softmax`` (SDPA's math path) is a
softmax whose fully-masked rows are set to 0 (a free select).
"""
from __future__ import annotations

from ..registry import register_formula
from ._common import ops, per_input_element
from .elementwise import elementwise

SOFTMAX = 5
SOFTMAX_BACKWARD = 4

register_formula(*ops("_softmax", "_safe_softmax", "softmax", "_log_softmax", "log_softmax",
                      "special_softmax", "special_log_softmax", "_masked_softmax"))(elementwise(SOFTMAX))


register_formula(*ops("_softmax_backward_data", "_log_softmax_backward_data", "_masked_softmax_backward"))(
    per_input_element(SOFTMAX_BACKWARD, "Softmax backward y*(g - sum(g*y)) and log-softmax backward "
                                        "g - exp(y)*sum(g): 4 FLOPs per element."))
