"""Sliding-window ops of every rank (1-3): convolutions and pools.

Convolutions of every rank (1-3), grouped, depthwise, dilated, strided and transposed.

One multiply-accumulate per (output element, weight tap) pair that the kernel forms, padding
included (a padded zero is multiplied like any input)::

    regular:    MACs = numel(out)   * (C_in / groups)  * prod(kernel)   weight (C_out, C_in/g, *k)
    transposed: MACs = numel(input) * (C_out / groups) * prod(kernel)   weight (C_in, C_out/g, *k)

Stride and dilation enter through the output size only. A bias is 1 FLOP per output element.
``nn.Conv*`` with ``padding_mode='circular'|'reflect'|'replicate'`` pads first (free) and then
runs a plain convolution. ``F.conv*d`` reach the counter as ``aten.convolution``.

Pooling of ranks 1-3 (1-D pools run as 2-D with a height of 1). K = prod(kernel_size)::

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
from ._common import aten, bind, first_tensor, is_float, numel, ops, per_input_element, prod, shape
from .elementwise import RELU


def conv_macs(input_t, weight, out, transposed: bool) -> int:
    """MACs of one convolution from its input, weight and output shapes."""
    w = shape(weight)
    per_element = w[1] * prod(w[2:])
    return (numel(input_t) if transposed else numel(out)) * per_element


def _conv(call: OpCall, transposed: bool | None = None, input_name: str = "input") -> Cost:
    a = bind(call)
    x = a.get(input_name, a.get("self"))
    if transposed is None:
        transposed = bool(a.get("transposed", False))
    out = call.out
    bias = a.get("bias")
    return Cost.contraction(conv_macs(x, a["weight"], out, transposed), numel(out) if bias is not None else 0)


@register_formula(aten.convolution, aten._convolution, aten.convolution_overrideable,
                  aten.conv1d, aten.conv2d, aten.conv3d)
def convolution(call: OpCall) -> Cost:
    """Convolution (transposed or not): see the module docstring; + numel(out) FLOPs for a bias."""
    return _conv(call)


@register_formula(*ops("conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                       "cudnn_convolution_transpose", "slow_conv_transpose2d", "slow_conv_transpose3d"))
def conv_transpose(call: OpCall) -> Cost:
    """Transposed convolution: numel(input) * (C_out/g) * prod(kernel) MACs; + numel(out) for a bias."""
    return _conv(call, transposed=True)


@register_formula(*ops("mkldnn_convolution", "cudnn_convolution", "miopen_convolution", "_slow_conv2d_forward",
                       "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d", "thnn_conv2d",
                       "_conv_depthwise2d", "conv_depthwise3d", "_nnpack_spatial_convolution"))
def backend_convolution(call: OpCall) -> Cost:
    """Backend-specific regular convolution kernels: numel(out) * (C_in/g) * prod(kernel) MACs (+ bias)."""
    return _conv(call, transposed=False)


@register_formula(aten.cudnn_convolution_relu)
def convolution_relu(call: OpCall) -> Cost:
    """Fused conv + bias + ReLU: conv MACs, + numel(out) for the bias, + 1 FLOP/element for ReLU."""
    return _conv(call, transposed=False) + Cost.elementwise(RELU * numel(call.out))


@register_formula(aten.cudnn_convolution_add_relu)
def convolution_add_relu(call: OpCall) -> Cost:
    """Fused conv + bias + alpha*z + ReLU: conv MACs, + add (1, +1 if alpha != 1) + ReLU (1) per element."""
    a = bind(call)
    per_element = 1 + RELU + (0 if a["alpha"] in (None, 1, 1.0) else 1)
    return _conv(call, transposed=False) + Cost.elementwise(per_element * numel(call.out))


@register_formula(aten.conv_tbc)
def conv_tbc(call: OpCall) -> Cost:
    """Time-batch-channel conv, weight (k, C_in, C_out): numel(out) * C_in * k MACs + numel(out) bias."""
    k, c_in, _ = shape(call.args[1])
    return Cost.contraction(numel(call.out) * c_in * k, numel(call.out))


@register_formula(aten.convolution_backward, aten.convolution_backward_overrideable)
def convolution_backward(call: OpCall) -> Cost:
    """Per output_mask: grad_input and grad_weight each cost the forward MACs; grad_bias numel(grad_out) FLOPs.

    (torch's FlopCounterMode over-counts grad_weight of grouped convolutions by ``groups``.)
    """
    a = bind(call)
    grad_out, mask = a["grad_output"], a["output_mask"]
    forward = conv_macs(a["input"], a["weight"], grad_out, bool(a["transposed"]))
    macs = forward * (int(bool(mask[0])) + int(bool(mask[1])))
    bias = numel(grad_out) if mask[2] else 0
    return Cost.contraction(macs, bias)


# -- Pools (max, average, adaptive, lp) and their backward -------------------------------------------------
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
