"""Which kernels a measured run takes, where torch's choice would hide or misstate the work.

Two kinds of switch, each entered for one measurement and put back in ``finally``: ``unfused``
(with ``eager_flex_attention`` and ``device_meta_kernels``), and the function modes ``AttentionKernel`` /
``RecurrentKernel`` / ``EmbeddingBagKernel``, which make a meta run take a real device's kernel path
(``run_inside`` lets them see the calls inside torch's Python functions). Their docstrings say what
each switches and why.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes  # (torch's own helper; no public twin)

from deeplite_like.safety import checkpoint, protected, uninterruptible

__all__ = ["ATTENTION_KERNELS", "AttentionKernel", "EmbeddingBagKernel", "RNN_KERNELS", "RecurrentKernel",
           "WRAPS_ATTENTION",
           "device_meta_kernels", "eager_flex_attention", "lstm_mkldnn", "rnn_cpu", "run_inside", "unfused"]


ATTENTION_KERNELS = ("cuda", "cpu", "math", None)
RNN_KERNELS = ("cpu", None)


def _arguments(args: tuple, kwargs: dict) -> tuple:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    defaults = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}
    values = dict(zip(names, args))
    values.update(kwargs)
    return tuple(values.get(n, defaults.get(n)) for n in names)


class AttentionKernel(TorchFunctionMode):
    """Runs ``scaled_dot_product_attention`` with the kernel of ``kind``.

    ``F.scaled_dot_product_attention`` picks its kernel by device. On meta it takes the math path,
    which materialises the attention matrix and saves it for backward; a CUDA GPU takes flash
    attention (or memory-efficient attention when there is a mask), which saves only the output
    and a log-sum-exp per row. The memory of an attention model depends on that choice, so
    ``AttentionKernel`` calls the chosen ATen kernel directly:

    * ``"cuda"``: ``_scaled_dot_product_flash_attention`` without a mask,
      ``_scaled_dot_product_efficient_attention`` with one (CUDA's choice for fp16/bf16 inputs);
    * ``"cpu"``: the CPU's choice (``select_sdp_backend_cpp`` in ATen's ``sdp_utils_cpp``):
      ``_scaled_dot_product_flash_attention_for_cpu`` where its constraints hold (no dropout, 4-d
      inputs of one batch size, equal heads or valid grouped-query heads, a 2-d / 4-d broadcastable
      mask that needs no grad, equal head dims, no empty sequence, unit last stride, a float dtype,
      flash not disabled), otherwise torch's own math path, which the meta device takes as well
      (attention dropout in training - GPT-2, BERT - always falls back to it);
    * ``"math"``: ``_scaled_dot_product_attention_math`` (the attention matrix is materialised);
    * ``None``: whatever torch picks for the tensors' device (math on meta).

    Grouped-query attention (``enable_gqa=True``): the flash kernels take fewer key/value heads as
    they are; for the efficient kernel (a mask on CUDA) they are repeated first.

    ``AttentionKernel`` and ``RecurrentKernel``: the kernels the target device runs, where torch
    picks by device. Two operators take a different kernel path per device, with different memory:
    attention and the LSTM. On the meta device torch takes its generic path for both; these
    ``TorchFunctionMode`` classes call the target device's ATen kernels instead, each with a meta
    kernel and a derivative, so the step, backward included, is the one that device runs.
    """

    def __init__(self, kind: str) -> None:
        if kind not in ATTENTION_KERNELS[:-1]:
            raise ValueError(f"attention={kind!r} is not known; use one of {list(ATTENTION_KERNELS)}")
        super().__init__()
        self.kind = kind

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in WRAPS_ATTENTION:  # its body calls scaled_dot_product_attention: run it with this mode on
            return run_inside(self, func, types, args, kwargs)
        if name != "scaled_dot_product_attention":
            return func(*args, **kwargs)
        q, k, v, mask, dropout, causal, scale, gqa = _arguments(args, kwargs)
        aten = torch.ops.aten
        if self.kind == "math":
            return aten._scaled_dot_product_attention_math(q, k, v, mask, dropout, causal, scale=scale,
                                                           enable_gqa=gqa)[0]
        if self.kind == "cpu":
            if not _cpu_flash_eligible(q, k, v, mask, dropout, gqa):
                return func(*args, **kwargs)  # torch's math fallback (the meta device's choice too)
            return aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout, causal, attn_mask=mask,
                                                                     scale=scale)[0]
        if mask is None:  # CUDA's flash kernel takes fewer key/value heads as they are
            return aten._scaled_dot_product_flash_attention(q, k, v, dropout, causal, scale=scale)[0]
        if gqa and k.shape[-3] != q.shape[-3]:  # the efficient kernel takes equal head counts
            groups = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)
        bias = mask if mask.dtype != torch.bool else _bool_mask_to_bias(mask, q.dtype)
        return aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, dropout, causal, scale=scale)[0]


# Python functions of torch whose body calls scaled_dot_product_attention and linear
# (nn.MultiheadAttention, also with need_weights=False as nn.TransformerEncoderLayer calls it).
WRAPS_ATTENTION = frozenset({"multi_head_attention_forward"})


def run_inside(mode: TorchFunctionMode, func: Callable, types: tuple, args: tuple, kwargs: dict) -> Any:
    """``func(*args, **kwargs)`` with ``mode`` on for the torch functions its body calls.

    A ``TorchFunctionMode`` is off while its own ``__torch_function__`` runs, so a plain
    ``func(*args)`` there hides the calls inside ``func`` from it (``nn.MultiheadAttention``'s
    attention and projections); torch's ``redispatch_function`` runs the body past its own check.
    """
    redispatch = getattr(torch.overrides, "redispatch_function", None)
    if redispatch is None:  # (a torch without it: the calls inside take torch's own choices)
        return func(*args, **kwargs)
    with mode:
        return redispatch(func, types, args, kwargs)


_CPU_FLASH_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _cpu_flash_eligible(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, dropout: float,
                        gqa: bool) -> bool:
    """Whether the CPU runs its flash kernel for these inputs: ``use_flash_attention_cpp``'s constraints, in order."""
    if not torch.backends.cuda.flash_sdp_enabled() or dropout > 0.0:  # (the flag is global, not CUDA's alone)
        return False
    if not q.dim() == k.dim() == v.dim() == 4 or not q.shape[0] == k.shape[0] == v.shape[0]:
        return False
    heads = (q.shape[-3], k.shape[-3], v.shape[-3])
    if gqa:
        if heads[0] % heads[1] or heads[1] != heads[2]:
            return False
    elif len(set(heads)) != 1:
        return False
    if mask is not None:
        def fits(mask_dim: int, dim: int) -> bool:
            return mask_dim in (dim, 1)
        if (mask.requires_grad or mask.dim() not in (2, 4) or not fits(mask.shape[-2], q.shape[2])
                or not fits(mask.shape[-1], k.shape[2])
                or mask.dim() == 4 and not (fits(mask.shape[0], q.shape[0]) and fits(mask.shape[1], q.shape[1]))):
            return False
    if not q.shape[-1] == k.shape[-1] == v.shape[-1] or 0 in (q.shape[-2], k.shape[-2], v.shape[-2]):
        return False
    if not q.stride(-1) == k.stride(-1) == v.stride(-1) == 1:
        return False
    return q.dtype in _CPU_FLASH_DTYPES


def _bool_mask_to_bias(mask: torch.Tensor, dtype: torch.dtype) -> Any:
    """A boolean mask (True = attend) as the additive bias the efficient kernel takes, as torch converts it."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


# ideep's rnn_kind: RNN_RELU 0, RNN_TANH 1, LSTM 2, GRU 3 (the ``mode`` argument of mkldnn_rnn_layer).
_MKLDNN_LSTM = 2


class RecurrentKernel(TorchFunctionMode):
    """Runs ``torch.lstm`` as the CPU runs it with oneDNN.

    ``nn.LSTM`` calls ``torch.lstm``. On a CPU with oneDNN (``use_mkldnn`` in ATen's ``RNN.cpp``:
    oneDNN enabled, float32 input - bfloat16 where this CPU's oneDNN takes it -, no projections, no
    packed sequence, not empty) that runs ``mkldnn_rnn``: one ``mkldnn_rnn_layer`` per layer and
    direction, whose backward is ``mkldnn_rnn_layer_backward`` and which saves a oneDNN workspace for
    it. On meta torch takes the generic path instead (a cell per time step, each saving its gates),
    whose memory differs. ``RecurrentKernel("cpu")`` runs ``mkldnn_rnn``'s sequence of ATen calls
    (input made time-major and contiguous, a layer call per direction, ``cat`` of the directions,
    dropout between layers, ``stack`` of the final states), so a meta step is the CPU's step. Two
    gaps of torch's meta kernels are closed there: ``mkldnn_rnn_layer``'s meta kernel returns an empty
    workspace, and its backward returns the bias gradient twice as one tensor where the CPU kernel
    returns a clone. On meta each layer therefore runs as an ``autograd.Function`` that saves what the
    CPU's autograd node saves (inputs, weights, states, outputs) with a workspace of oneDNN's size, and
    clones the bias gradient. oneDNN's workspace size (its own layout, padded leading dimensions and
    page-aligned parts) has no query in PyTorch: it is read from one real CPU call of the layer on
    uninitialised tensors of the same shapes, once per shape (cached), outside the measured step.
    ``nn.GRU`` and ``nn.RNN`` (``torch.gru``, ``torch.rnn_tanh``, ``torch.rnn_relu``) take ATen's
    generic path on a CPU, but not the one meta takes: ``FullLayer`` computes the input projection of
    every time step at once when the input is on the CPU, and the cells then take it as it is. On meta
    ``rnn_cpu`` runs those calls (``RNN.cpp``: ``FullLayer``, ``FullBidirectionalLayer``, ``GRUCell``,
    ``SimpleCell``, the layer stack with its dropout), so a meta step is the CPU's step there too.
    CUDA's cuDNN path (``_cudnn_rnn``, with its reserve buffer) is not modelled.
    """

    def __init__(self, kind: str) -> None:
        if kind not in RNN_KERNELS[:-1]:
            raise ValueError(f"rnn={kind!r} is not known; use one of {list(RNN_KERNELS)}")
        super().__init__()
        self.kind = kind

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if kwargs or len(args) != 9 or not isinstance(args[0], torch.Tensor):  # (a packed sequence: as torch runs it)
            return func(*args, **kwargs)
        if name == "lstm" and _cpu_takes_mkldnn(*args[:3]):
            return lstm_mkldnn(*args)
        if name == "lstm" and not isinstance(args[1], (tuple, list)):  # (the packed overload)
            return func(*args, **kwargs)
        if name in _CPU_CELLS and args[0].device.type == "meta":  # (a CPU runs its own kernel already)
            return rnn_cpu(name, *args)
        return func(*args, **kwargs)


def _cpu_takes_mkldnn(input: Any, hx: Any, params: Any) -> bool:
    """``at::lstm``'s test for oneDNN (``use_mkldnn``, no projections), for the data (not packed) overload."""
    if not isinstance(input, torch.Tensor) or not isinstance(hx, (tuple, list)) or len(hx) != 2:
        return False
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled) or input.numel() == 0:
        return False
    if hx[0].shape[2] != hx[1].shape[2]:  # projections (proj_size > 0): the generic path
        return False
    if input.dtype == torch.float32:
        return True
    if input.dtype == torch.bfloat16:
        return torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return input.dtype == torch.float16 and not torch.is_grad_enabled() and torch.ops.mkldnn._is_mkldnn_fp16_supported()


def lstm_mkldnn(input: torch.Tensor, hx: Any, params: Any, has_biases: bool, num_layers: int, dropout: float,
                train: bool, bidirectional: bool, batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch.lstm`` (data overload) as ATen's ``mkldnn_rnn`` runs it: the same calls, in the same order."""
    x = (input.transpose(0, 1) if batch_first else input).contiguous()
    h0, c0 = hx[0].contiguous(), hx[1].contiguous()
    per_layer = 4 if has_biases else 2
    directions = 2 if bidirectional else 1
    hidden = h0.shape[2]
    hys, cys = [], []
    layer_input = x
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            w = params[index * per_layer:(index + 1) * per_layer]
            # (without biases ATen passes zeros shaped like the weights, as here)
            b_ih = w[2] if has_biases else torch.zeros(w[0].shape, dtype=w[0].dtype, device=w[0].device)
            b_hh = w[3] if has_biases else torch.zeros(w[1].shape, dtype=w[1].dtype, device=w[1].device)
            options = (direction > 0, [], _MKLDNN_LSTM, hidden, num_layers, has_biases, bidirectional, batch_first,
                       train)
            if layer_input.device.type == "meta":
                out, hy, cy = _MetaMkldnnLayer.apply(layer_input, w[0], w[1], b_ih, b_hh, h0[index], c0[index], options)
            else:
                out, hy, cy, _ = torch.ops.aten.mkldnn_rnn_layer(layer_input, w[0], w[1], b_ih, b_hh, h0[index],
                                                                 c0[index], *options)
            outputs.append(out)
            hys.append(hy)
            cys.append(cy)
        layer_input = outputs[0] if directions == 1 else torch.cat(outputs, -1)
        if dropout != 0 and train and layer < num_layers - 1:
            layer_input = torch.dropout(layer_input, dropout, True)
    output = layer_input.transpose(0, 1) if batch_first else layer_input
    return output, torch.stack(hys, 0), torch.stack(cys, 0)


def _gru_cell(x: torch.Tensor, hidden: torch.Tensor, w: tuple) -> torch.Tensor:
    """``GRUCell`` of ``RNN.cpp`` on its CPU path, the input projection ``x`` precomputed."""
    igates = x.unsafe_chunk(3, 1)
    hgates = F.linear(hidden, w[1], w[3]).unsafe_chunk(3, 1)
    reset = hgates[0].add_(igates[0]).sigmoid_()
    update = hgates[1].add_(igates[1]).sigmoid_()
    new = igates[2].add(hgates[2].mul_(reset)).tanh_()
    return (hidden - new).mul_(update).add_(new)


def _lstm_cell(x: torch.Tensor, hidden: tuple, w: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """``LSTMCell`` of ``RNN.cpp`` on its CPU path (``torch.lstm`` where oneDNN is not taken: projections)."""
    hx, cx = hidden
    gates = F.linear(hx, w[1], w[3]).add_(x)
    chunks = gates.unsafe_chunk(4, 1)
    ingate = chunks[0].sigmoid_()
    forgetgate = chunks[1].sigmoid_()
    cellgate = chunks[2].tanh_()
    outgate = chunks[3].sigmoid_()
    cy = (forgetgate * cx).add_(ingate * cellgate)
    hy = outgate * cy.tanh()
    if w[4] is not None:  # matmul_hr: the projection
        hy = torch.matmul(hy, w[4].t())
    return hy, cy


_CPU_CELLS: dict[str, Callable[[torch.Tensor, Any, tuple], Any]] = {
    "lstm": _lstm_cell,
    "gru": _gru_cell,
    # ``SimpleCell``: the non-linearity of linear_hh(hidden) + the precomputed input projection
    "rnn_tanh": lambda x, hidden, w: torch.tanh(F.linear(hidden, w[1], w[3]).add_(x)),
    "rnn_relu": lambda x, hidden, w: torch.relu(F.linear(hidden, w[1], w[3]).add_(x)),
}


def _cpu_steps(cell: Callable, steps: Any, hidden: Any, w: tuple) -> tuple[list[torch.Tensor], Any]:
    """``FullLayer``'s loop over precomputed input projections: a cell per step, the outputs kept."""
    outputs = []
    for step in steps:
        hidden = cell(step, hidden, w)
        outputs.append(hidden[0] if isinstance(hidden, tuple) else hidden)
    return outputs, hidden


def _cpu_layer(cell: Callable, x: torch.Tensor, hidden: Any, w: tuple) -> tuple[torch.Tensor, Any]:
    """``FullLayer`` on a CPU input: the input projection of all time steps at once, then a cell per step."""
    steps = F.linear(x, w[0], w[2]).unbind(0)
    outputs, hidden = _cpu_steps(cell, steps, hidden, w)
    return torch.stack(outputs, 0), hidden


def _cpu_bidirectional_layer(cell: Callable, x: torch.Tensor, hiddens: tuple, w: tuple, w_reverse: tuple
                             ) -> tuple[torch.Tensor, Any, Any]:
    """``FullBidirectionalLayer`` on a CPU input; its tensors live as long as ATen's locals do (to its return)."""
    steps = F.linear(x, w[0], w[2]).unbind(0)
    outputs, final = _cpu_steps(cell, steps, hiddens[0], w)
    output = torch.stack(outputs, 0)
    projected = F.linear(x, w_reverse[0], w_reverse[2])
    steps = projected.unbind(0)  # (the forward direction's projection is freed here, as ATen reassigns it)
    reverse_outputs, reverse_final = _cpu_steps(cell, steps[::-1], hiddens[1], w_reverse)
    reverse_outputs.reverse()
    reverse_output = torch.stack(reverse_outputs, 0)
    return torch.cat([output, reverse_output], output.dim() - 1), final, reverse_final


def rnn_cpu(kind: str, input: torch.Tensor, hx: Any, params: Any, has_biases: bool, num_layers: int,
            dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple[torch.Tensor, ...]:
    """``torch.gru`` / ``rnn_tanh`` / ``rnn_relu`` / ``lstm`` (data overload) as ATen's generic path runs
    them on a CPU, call for call (an LSTM's ``hx`` is ``(h0, c0)``; it returns its output, h and c)."""
    cell = _CPU_CELLS[kind]
    projections = kind == "lstm" and hx[0].shape[2] != hx[1].shape[2]
    per_layer = (4 if has_biases else 2) + projections
    directions = 2 if bidirectional else 1

    def weights(index: int) -> tuple:  # (w_ih, w_hh, b_ih, b_hh, w_hr) as ATen's gather_params
        w = tuple(params[index * per_layer:(index + 1) * per_layer])
        w_hr = w[-1] if projections else None
        return (*w[:4], w_hr) if has_biases else (*w[:2], None, None, w_hr)

    x = input.transpose(0, 1) if batch_first else input
    hiddens = list(zip(hx[0].unbind(0), hx[1].unbind(0))) if kind == "lstm" else hx.unbind(0)
    finals: list[torch.Tensor] = []
    final = pair = None
    for layer in range(num_layers):
        first = layer * directions
        if bidirectional:
            x, *pair = _cpu_bidirectional_layer(cell, x, hiddens[first:first + 2], weights(first), weights(first + 1))
            finals += pair
        else:
            x, final = _cpu_layer(cell, x, hiddens[first], weights(first))
            finals.append(final)
        if dropout != 0 and train and layer < num_layers - 1:
            x = torch.dropout(x, dropout, True)
    if kind == "lstm":
        states: tuple = (torch.stack([h for h, _ in finals], 0), torch.stack([c for _, c in finals], 0))
    else:
        states = (torch.stack(finals, 0),)
    del finals, final, pair  # (ATen's vector of final states is gone before its output is transposed back)
    return ((x.transpose_(0, 1) if batch_first else x), *states)


class EmbeddingBagKernel(TorchFunctionMode):
    """Runs ``torch.embedding_bag`` on meta with the index buffers the CPU's kernel makes.

    ``_embedding_bag`` returns, beside its output, three index tensors that autograd saves for
    backward, and their sizes differ by device. The meta kernel makes CUDA's: ``offset2bag`` of one
    entry per index, ``bag_size`` of one per offset, ``max_indices`` empty but for ``mode="max"``.
    The CPU's (``_embedding_bag_cpu_impl`` in ATen's ``EmbeddingBag.cpp``): ``offset2bag`` has one
    entry more (made with ``indices + 1`` entries, then shrunk), or none on the fast path of
    ``mode="sum"`` (a float weight with unit last stride, no ``padding_idx``); ``max_indices`` has one
    entry per bag (``bags x dim`` for ``"max"``). On meta, where the weight needs a gradient, the call
    becomes an ``autograd.Function`` that makes and saves the CPU's buffers (``_MetaEmbeddingBag``).
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        if func is F.embedding_bag:  # (its body calls torch.embedding_bag: run it with this mode on)
            return run_inside(self, func, types, args, kwargs)
        if (getattr(func, "__name__", "") != "embedding_bag" or kwargs or len(args) != 9
                or not isinstance(args[0], torch.Tensor) or not args[0].is_meta or not args[0].requires_grad
                or not torch.is_grad_enabled()):
            return func(*args, **kwargs)
        weight, indices, offsets, scale, mode, sparse, per_sample, last, padding_idx = args
        if padding_idx is None:
            padding_idx = -1
        elif padding_idx < 0:
            padding_idx += weight.shape[0]
        options = (scale, mode, sparse, last, padding_idx)
        return _MetaEmbeddingBag.apply(weight, indices.contiguous(), offsets.contiguous(), per_sample, options)


_SUM, _MAX = 0, 2  # (embedding_bag's mode numbers: sum 0, mean 1, max 2)


class _MetaEmbeddingBag(torch.autograd.Function):
    """``_embedding_bag`` on meta with the CPU's index buffers, saved as the CPU's autograd node saves them."""

    @staticmethod
    def forward(ctx, weight, indices, offsets, per_sample, options):  # noqa: ANN001, ANN205 - autograd's protocol
        scale, mode, sparse, last, padding_idx = options
        index = torch.promote_types(indices.dtype, offsets.dtype)
        bags = offsets.shape[0] - int(last)
        output = weight.new_empty((bags, weight.shape[1]))
        fast_sum = (mode == _SUM and padding_idx < 0 and weight.stride(1) == 1
                    and weight.dtype in (torch.float32, torch.float16, torch.bfloat16)
                    and (per_sample is None or per_sample.stride(0) == 1))
        count = indices.shape[0]
        offset2bag = indices.new_empty((0,) if fast_sum else (count + 1,), dtype=index)[:count]
        bag_size = offsets.new_empty(offsets.shape, dtype=index)[:bags]
        max_indices = indices.new_empty((bags, weight.shape[1]) if mode == _MAX else (bags,), dtype=index)
        ctx.save_for_backward(indices, offsets, offset2bag, bag_size, max_indices, per_sample,
                              weight if per_sample is not None and per_sample.requires_grad else None)
        ctx.options, ctx.rows = options, weight.shape[0]
        ctx.mark_non_differentiable(offset2bag, bag_size, max_indices)
        ctx.set_materialize_grads(False)  # (no zero gradients made for the index buffers)
        return output, offset2bag, bag_size, max_indices

    @staticmethod
    def backward(ctx, grad, *_):  # noqa: ANN001, ANN205 - autograd's protocol
        indices, offsets, offset2bag, bag_size, max_indices, per_sample, weight = ctx.saved_tensors
        scale, mode, sparse, last, padding_idx = ctx.options
        grad_weight = torch.ops.aten._embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
                                                             max_indices, ctx.rows, scale, mode, sparse, per_sample,
                                                             padding_idx)
        grad_per_sample = None
        if weight is not None:
            grad_per_sample = torch.ops.aten._embedding_bag_per_sample_weights_backward(
                grad, weight, indices, offsets, offset2bag, mode, padding_idx)
        return grad_weight, None, None, grad_per_sample, None


class _MetaMkldnnLayer(torch.autograd.Function):
    """``mkldnn_rnn_layer`` on meta with the CPU's workspace and saved tensors (``RecurrentKernel``)."""

    @staticmethod
    def forward(ctx, x, w0, w1, b0, b1, hx, cx, options):  # noqa: ANN001, ANN205 - autograd's protocol
        out, hy, cy, _ = torch.ops.aten.mkldnn_rnn_layer(x, w0, w1, b0, b1, hx, cx, *options)
        workspace = torch.empty(_workspace_bytes(x, w0, w1, hx, options), dtype=torch.uint8, device=x.device)
        ctx.save_for_backward(x, w0, w1, b0, b1, hx, cx, out, hy, cy, workspace)
        ctx.options = options
        ctx.set_materialize_grads(False)  # (the CPU node passes undefined gradients as they are)
        return out, hy, cy

    @staticmethod
    def backward(ctx, grad_out, grad_hy, grad_cy):  # noqa: ANN001, ANN205 - autograd's protocol
        x, w0, w1, b0, b1, hx, cx, out, hy, cy, workspace = ctx.saved_tensors
        reverse, batch_sizes, mode, hidden, layers, biases, bidirectional, batch_first, train = ctx.options
        dx, dw0, dw1, db, _, dhx, dcx = torch.ops.aten.mkldnn_rnn_layer_backward(
            x, w0, w1, b0, b1, hx, cx, out, hy, cy, grad_out, grad_hy, grad_cy, reverse, mode, hidden, layers, biases,
            train, bidirectional, batch_sizes, batch_first, workspace)
        return dx, dw0, dw1, db, db.clone(), dhx, dcx, None


_WORKSPACE_BYTES: dict[tuple, int] = {}


def _workspace_bytes(x: torch.Tensor, w0: torch.Tensor, w1: torch.Tensor, hx: torch.Tensor, options: tuple) -> int:
    """oneDNN's workspace of one LSTM layer call with these shapes, read from a real CPU call (cached)."""
    key = (tuple(x.shape), tuple(w0.shape), tuple(w1.shape), tuple(hx.shape), x.dtype, *options[:1], *options[3:])
    if key not in _WORKSPACE_BYTES:
        def like(t: torch.Tensor) -> torch.Tensor:
            return torch.zeros(t.shape, dtype=t.dtype)

        # Outside the step's modes (the counting pass must not see it); with grad on, as in the step:
        # oneDNN makes no workspace without it.
        with _disable_current_modes(), torch.enable_grad():
            bias = torch.zeros(w0.shape[0], dtype=w0.dtype)
            workspace = torch.ops.aten.mkldnn_rnn_layer(like(x), like(w0), like(w1), bias, bias, like(hx), like(hx),
                                                        *options)[3]
        _WORKSPACE_BYTES[key] = workspace.untyped_storage().nbytes()
    return _WORKSPACE_BYTES[key]


# -- global switches: the fused fast path, FlexAttention's compile, meta kernels ----------------
class _SharedSwitch:
    """A process-wide setting several measurements (threads) change at once: the first to enter sets
    it, the last to leave puts back what the first found."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._before: Any = None

    @contextlib.contextmanager
    @protected
    def held(self, get: Callable[[], Any], set_: Callable[[Any], None], value: Any) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._before = get()
                set_(value)
            self._users += 1
        try:
            checkpoint()  # (an interrupt held during the set-up is raised here)
            yield
        finally:
            with uninterruptible(), self._lock:
                self._users -= 1
                if self._users == 0:
                    set_(self._before)


_fast_path, _flex_compile, _meta_kernels = _SharedSwitch(), _SharedSwitch(), _SharedSwitch()


def _mish_backward(grad_output: torch.Tensor, self: torch.Tensor) -> torch.Tensor:
    """The CPU / CUDA ``mish_backward``: one output, the shape of the broadcast inputs (TensorIterator)."""
    return torch.empty(torch.broadcast_shapes(grad_output.shape, self.shape), dtype=grad_output.dtype,
                       device=grad_output.device)


#: ATen operators with a CPU / CUDA kernel and no meta kernel, whose ``CompositeImplicitAutograd``
#: fallback therefore runs on meta, decomposed above the dispatch modes into operators with their own
#: temporaries: ``mish_backward`` (``nn.Mish``'s backward) became 11 operators holding up to 4 tensors
#: of the input's size at once (a 2 x 12 x 48 fp32 Mish: 29,952 B above the CPU's peak). Found with
#: ``torch._C._dispatch_has_kernel_for_dispatch_key`` (CPU and CompositeImplicitAutograd, not Meta), over
#: every ATen operator of torch 2.13: this one and ``native_channel_shuffle``, which ``nn.ChannelShuffle``
#: does not call (it calls ``channel_shuffle``, which has a meta kernel).
_META_KERNELS: dict[str, Callable[..., torch.Tensor]] = {"mish_backward": _mish_backward}
_library: list[Any] = []  # the torch.library.Library holding them while a measurement runs


def _set_meta_kernels(on: bool) -> None:
    if on and not _library:
        library = torch.library.Library("aten", "IMPL")
        for name, kernel in _META_KERNELS.items():
            # (``Library.impl`` refuses a Meta kernel for an operator with a CompositeImplicitAutograd one,
            # to keep torch's meta kernels at the base operators; the point here is the CPU's single kernel)
            library.m.impl(name, "Meta", kernel, False)
        _library.append(library)
    elif not on and _library:
        _library.pop()._destroy()


@contextlib.contextmanager
@protected
def device_meta_kernels() -> Iterator[None]:
    """Give the operators of ``_META_KERNELS`` a meta kernel inside the block (removed by the last user), so a
    meta run calls them as one operator, as the CPU and CUDA do, instead of their decomposition."""
    with _meta_kernels.held(lambda: bool(_library), _set_meta_kernels, True):
        yield


@contextlib.contextmanager
@protected
def unfused() -> Iterator[None]:
    """Turn the fused MHA / encoder-layer fast path off inside the block (restored by the last user).

    ``unfused``: PyTorch's fused transformer fast path, turned off. ``nn.TransformerEncoderLayer``
    (and ``nn.MultiheadAttention``) run one fused kernel in inference unless the fast path is off
    (``torch.backends.mha.set_fastpath_enabled``): counting turns it off so that the layer's
    children run and are attributed, memory so that the activations are seen. The switch is
    global, so concurrent measurements (in several threads) share it: the first to enter turns it
    off, the last to leave puts back what it was. ``eager_flex_attention`` likewise lets
    FlexAttention's operator reach a dispatch mode (its eager form compiles itself otherwise).
    """
    mha = getattr(torch.backends, "mha", None)  # absent before torch 2.2: nothing to switch
    if mha is None:
        yield
        return
    with _fast_path.held(mha.get_fastpath_enabled, mha.set_fastpath_enabled, False):
        yield


@contextlib.contextmanager
@protected
def eager_flex_attention() -> Iterator[None]:
    """Run ``flex_attention`` without its internal ``torch.compile`` inside the block (restored by the last user).

    Eager ``flex_attention`` wraps its higher-order operator in ``torch.compile(fullgraph=True)``,
    which TorchDynamo refuses under a dispatch mode such as counting's: the operator is then called
    directly (torch's own ``_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG`` switch), and reaches the counting
    mode. The switch is global, like the fast path's: concurrent counts share it. Only touched when
    torch's FlexAttention module is already imported (a model that uses it imported it).
    """
    flex = sys.modules.get("torch.nn.attention.flex_attention")
    name = "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG"
    if flex is None or not hasattr(flex, name):
        yield
        return
    with _flex_compile.held(lambda: getattr(flex, name), lambda value: setattr(flex, name, value), True):
        yield
