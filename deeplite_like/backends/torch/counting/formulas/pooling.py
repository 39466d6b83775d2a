"""Pooling of ranks 1-3 (1-D pools run as 2-D with a height of 1). K = prod(kernel_size)::

    max pool             numel(out) * K        (one max per window element, as ``amax``)
    avg pool             numel(out) * (K + 1)  (sum the window, one divide)
    adaptive max / avg   the same with each output's own window (start = floor(i*In/Out),
                         end = ceil((i+1)*In/Out) per dim); avg adds one divide per output
    lp pool              decomposes (pow, avg_pool, sign, abs, relu, mul, pow)

Windows are priced dense: positions that fall in padding count as window elements.
Backward: max pools scatter one add per grad element; avg pools divide and spread
(K + 1 per grad element); adaptive pools as their forward windows.
"""
from __future__ import annotations

from ..registry import Cost, OpCall, register_formula
from ._common import bind, first_tensor, is_float, numel, ops, per_input_element, prod, shape


def _kernel(kernel_size, rank: int) -> int:
    sizes = list(kernel_size)
    if len(sizes) == 1:
        sizes = sizes * rank
    return prod(sizes)


def _window_pool(rank: int, extra_per_output: int):
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        out = first_tensor(call.out)
        if not is_float(out):
            return Cost()
        return Cost.elementwise(numel(out) * (_kernel(a["kernel_size"], rank) + extra_per_output))

    kind = "avg" if extra_per_output else "max"
    formula.__name__ = formula.__qualname__ = f"{kind}_pool{rank}d"
    per_output = "K + 1" if extra_per_output else "K"
    formula.__doc__ = f"{kind} pool {rank}-D: numel(out) * ({per_output}) FLOPs, K = prod(kernel)."
    return formula


_MAX_POOLS = {1: ("max_pool1d", "max_pool1d_with_indices", "quantized_max_pool1d"),
              2: ("max_pool2d", "max_pool2d_with_indices", "mkldnn_max_pool2d", "fractional_max_pool2d",
                  "quantized_max_pool2d"),
              3: ("max_pool3d", "max_pool3d_with_indices", "mkldnn_max_pool3d", "fractional_max_pool3d",
                  "quantized_max_pool3d")}
for _rank, _names in _MAX_POOLS.items():
    register_formula(*ops(*_names))(_window_pool(_rank, 0))
    register_formula(*ops(f"avg_pool{_rank}d"))(_window_pool(_rank, 1))


def adaptive_window_elements(in_sizes, out_sizes) -> int:
    """Input elements summed over all output windows of an adaptive pool (per batch-channel)."""
    total = 1
    for size_in, size_out in zip(in_sizes, out_sizes):
        total *= sum(-(-(i + 1) * size_in // size_out) - (i * size_in // size_out) for i in range(size_out))
    return total


def _adaptive(rank: int, divide: bool):
    def formula(call: OpCall) -> Cost:
        x = call.args[0]
        out = first_tensor(call.out)
        if not is_float(out):
            return Cost()
        spatial_in, spatial_out = shape(x)[-rank:], shape(out)[-rank:]
        planes = numel(out) // max(prod(spatial_out), 1)
        flops = planes * adaptive_window_elements(spatial_in, spatial_out) + (numel(out) if divide else 0)
        return Cost.elementwise(flops)

    kind = "avg" if divide else "max"
    formula.__name__ = formula.__qualname__ = f"adaptive_{kind}_pool{rank}d"
    formula.__doc__ = (f"adaptive {kind} pool {rank}-D: one FLOP per element of every output window"
                       f"{' + one divide per output' if divide else ''}.")
    return formula


_ADAPTIVE_AVG = {1: ("adaptive_avg_pool1d",), 2: ("_adaptive_avg_pool2d", "adaptive_avg_pool2d"),
                 3: ("_adaptive_avg_pool3d", "adaptive_avg_pool3d")}
for _rank, _names in _ADAPTIVE_AVG.items():
    register_formula(*ops(*_names))(_adaptive(_rank, True))
    register_formula(*ops(f"adaptive_max_pool{_rank}d"))(_adaptive(_rank, False))


register_formula(*ops("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
                      "adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward",
                      "fractional_max_pool2d_backward", "fractional_max_pool3d_backward"))(
    per_input_element(1, "Max-pool backward: one add per grad_output element (scattered to the argmax)."))


def _avg_backward(rank: int):
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        grad = a["grad_output"]
        return Cost.elementwise(numel(grad) * (_kernel(a["kernel_size"], rank) + 1)) if is_float(grad) else Cost()

    formula.__name__ = formula.__qualname__ = f"avg_pool{rank}d_backward"
    formula.__doc__ = "Avg-pool backward: (K + 1) FLOPs per grad_output element (divide, spread over the window)."
    return formula


register_formula(*ops("avg_pool2d_backward"))(_avg_backward(2))
register_formula(*ops("avg_pool3d_backward"))(_avg_backward(3))


def _adaptive_avg_backward(rank: int):
    def formula(call: OpCall) -> Cost:
        grad, x = call.args[0], call.args[1]
        if not is_float(grad):
            return Cost()
        spatial_in, spatial_out = shape(x)[-rank:], shape(grad)[-rank:]
        planes = numel(grad) // max(prod(spatial_out), 1)
        return Cost.elementwise(planes * adaptive_window_elements(spatial_in, spatial_out) + numel(grad))

    formula.__name__ = formula.__qualname__ = f"adaptive_avg_pool{rank}d_backward"
    formula.__doc__ = "Adaptive avg-pool backward: as its forward (window elements + one divide per grad element)."
    return formula


register_formula(*ops("_adaptive_avg_pool2d_backward"))(_adaptive_avg_backward(2))
register_formula(*ops("_adaptive_avg_pool3d_backward"))(_adaptive_avg_backward(3))
