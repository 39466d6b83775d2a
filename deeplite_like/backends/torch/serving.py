"""What serving a causal language model costs: the prefill of a prompt and one decode step at a
context length, with the bytes each moves and the KV cache it reads (``count_serving``).

Both are counted on the meta device (no memory allocated, no arithmetic done), so a 70-billion
parameter model is answered in seconds; ``ServingCost.predict`` turns them into time on a device
(``deeplite_like.roofline``).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from deeplite_like.backends.torch.counting.engine import count_ops
from deeplite_like.errors import check_flag, check_positive_int
from deeplite_like.reports.base import format_quantity, format_seconds
from deeplite_like.reports.table import TableReport
from deeplite_like.results import OpCount
from deeplite_like.units import format_bytes


@dataclass(frozen=True)
class ServingCost:
    """The prefill of ``prompt_tokens`` tokens and one decode step at ``context`` tokens, for
    ``batch_size`` sequences.

    ``prefill`` / ``decode``: their counts, bytes moved included (``OpCount.records``).
    ``kv_cache_bytes``: the cache the decode step reads (``context`` tokens of keys and values of
    every layer, for the batch); ``param_bytes``: the model's parameters; ``attention``: the
    attention kernel counted (``count_serving``).
    """

    prefill: OpCount
    decode: OpCount
    batch_size: int
    prompt_tokens: int
    context: int
    kv_cache_bytes: int
    param_bytes: int
    attention: str | None = "cuda"

    def predict(self, device: Any, fused: bool = False) -> "ServingPrediction":
        """Time on ``device`` (a ``roofline.Device`` or its name): prefill, one decode step, tokens/s."""
        from deeplite_like.roofline import predict  # (the registry is read when a prediction is asked)

        prefill, decode = predict(self.prefill, device, fused=fused), predict(self.decode, device, fused=fused)
        return ServingPrediction(self, prefill, decode)

    def report(self) -> TableReport:
        """The prefill and the decode step side by side (MACs, FLOPs, bytes): a ``TableReport``."""
        return _report(self, None)

    def as_dict(self) -> dict:
        return {"batch_size": self.batch_size, "prompt_tokens": self.prompt_tokens, "context": self.context,
                "attention": self.attention,
                "kv_cache_bytes": self.kv_cache_bytes, "param_bytes": self.param_bytes,
                "prefill": {"macs": self.prefill.macs, "flops": self.prefill.flops, "bytes": self.prefill.bytes,
                            "fused_bytes": self.prefill.fused_bytes},
                "decode": {"macs": self.decode.macs, "flops": self.decode.flops, "bytes": self.decode.bytes,
                           "fused_bytes": self.decode.fused_bytes}}


@dataclass(frozen=True)
class ServingPrediction:
    """``ServingCost`` on one device: ``prefill`` and ``decode`` are ``roofline`` predictions.

    ``time_to_first_token`` is the prefill's time; ``decode_tokens_per_s`` the batch's tokens a
    second at the decode step's context (``batch_size / decode time``).
    """

    cost: ServingCost
    prefill: Any
    decode: Any

    @property
    def time_to_first_token(self) -> float:
        return self.prefill.time_s

    @property
    def decode_seconds(self) -> float:
        return self.decode.time_s

    @property
    def decode_tokens_per_s(self) -> float:
        return self.cost.batch_size / self.decode.time_s if self.decode.time_s else float("inf")

    def report(self) -> TableReport:
        """The prefill and the decode step with their predicted times and bounds: a ``TableReport``."""
        return _report(self.cost, self)

    def as_dict(self) -> dict:
        return {**self.cost.as_dict(), "device": self.prefill.device.name,
                "time_to_first_token_s": self.time_to_first_token,
                "decode_step_s": self.decode_seconds, "decode_tokens_per_s": self.decode_tokens_per_s,
                "prefill_bound": self.prefill.total.bound, "decode_bound": self.decode.total.bound}


def _report(cost: ServingCost, predicted: ServingPrediction | None) -> TableReport:
    rows = [{"phase": "prefill", "tokens": cost.batch_size * cost.prompt_tokens, "count": cost.prefill},
            {"phase": f"decode step at {cost.context:,} tokens", "tokens": cost.batch_size, "count": cost.decode}]
    columns = ["phase", "tokens", "macs", "flops", "bytes"]
    for row, phase in zip(rows, (predicted.prefill, predicted.decode) if predicted else (None, None)):
        count = row.pop("count")
        row.update(macs=count.macs, flops=count.flops, bytes=count.bytes)
        if phase is not None:
            row.update(time_s=phase.time_s, bound=phase.total.bound)
    if predicted is not None:
        columns += ["time_s", "bound"]
    notes = [f"batch {cost.batch_size}; KV cache read by the decode step: {format_bytes(cost.kv_cache_bytes)}; "
             f"parameters: {format_bytes(cost.param_bytes)}; counted on meta with the {cost.attention or 'math'} "
             "attention kernel, bytes unfused (docs/conventions.rst, Bytes moved)"]
    title = "Serving: prefill and one decode step"
    if predicted is not None:
        device = predicted.prefill.device.name
        title += f" on {device}"
        notes.insert(0, f"time to first token {format_seconds(predicted.time_to_first_token)}; decode "
                        f"{predicted.decode_tokens_per_s:,.1f} tokens/s for the batch "
                        f"({format_seconds(predicted.decode_seconds)} a step), predicted on {device}")
    return TableReport(title, columns, rows,
                       formatters={"tokens": lambda v: f"{v:,}", "macs": lambda v: format_quantity(v, "count", "MACs"),
                                   "flops": lambda v: format_quantity(v, "count", "FLOPs"), "bytes": format_bytes,
                                   "time_s": format_seconds},
                       headers={"macs": "MACs", "flops": "FLOPs", "time_s": "predicted time"}, notes=notes)


def _empty_cache(model: torch.nn.Module) -> Any:
    try:
        from transformers import DynamicCache
    except ImportError:
        DynamicCache = None
    config = getattr(model, "config", None)
    if DynamicCache is None or config is None or not hasattr(model, "generate"):
        raise TypeError(f"count_serving needs a transformers causal language model (one with a config, "
                        f"generate and a KV cache); got {type(model).__name__}. Count a decode step of another "
                        "model with count_ops(model, ..., meta=True, bytes_moved=True) and your own cache.")
    try:
        return DynamicCache(config=config)
    except TypeError:  # (an older transformers)
        return DynamicCache()


def cache_bytes(cache: Any) -> int:
    """Bytes of the keys and values a transformers cache holds (every layer)."""
    total = 0
    for layer in getattr(cache, "layers", ()):
        for name in ("keys", "values"):
            tensor = getattr(layer, name, None)
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
    return total


def count_serving(model: torch.nn.Module, prompt_tokens: int = 512, context: int | None = None,
                  batch_size: int = 1, all_logits: bool = False, attention: str | None = "cuda") -> ServingCost:
    """Count serving ``model`` (a transformers causal LM): the prefill and one decode step.

    ``prompt_tokens``: the prompt the prefill runs (the time to the first token). ``context``: the
    tokens already in the KV cache when the decode step runs (default: the prompt), so
    ``context=2048`` answers "one token at 2,048 tokens of context". Both run on the meta device
    with the model's own cache class (``DynamicCache``: its decode step concatenates the new
    token's keys and values to the cache, and that copy is counted), in the model's mode and dtype.
    The cache is filled by a meta prefill of ``context`` tokens (the prefill counted, when
    ``context`` equals the prompt). The prefill computes the logits of the last token only, as
    ``generate`` does (``logits_to_keep=1``, for a model whose forward takes it); ``all_logits=True``
    computes them for every prompt token (a scoring or training forward).

    ``attention``: the ``scaled_dot_product_attention`` kernel counted (``count_ops``): ``"cuda"``
    (default) is the GPU's flash kernel (memory-efficient with a mask), which reads Q, K and V once
    and writes the output, with no attention matrix in memory; ``"cpu"`` the CPU's; ``None`` or
    ``"math"`` the math path, which writes the scores (and, on a CPU, upcasts half precision to
    float32). A model whose attention is not SDPA (``attn_implementation="eager"``) runs its own
    operators whatever this says.

    Raises:
        TypeError: the model is not a transformers causal language model.
        ValueError: a count is not a positive integer.
    """
    prompt_tokens = check_positive_int(prompt_tokens, "prompt_tokens", "count_serving", "tokens")
    context = prompt_tokens if context is None else check_positive_int(context, "context", "count_serving", "tokens")
    batch_size = check_positive_int(batch_size, "batch_size", "count_serving", "sequences")
    all_logits = check_flag(all_logits, "all_logits", "count_serving")
    cache = _empty_cache(model)
    options = {"meta": True, "bytes_moved": True, "warn_untracked": False, "attention": attention}
    last_only = {} if all_logits or "logits_to_keep" not in inspect.signature(model.forward).parameters \
        else {"logits_to_keep": 1}

    def ids(tokens: int) -> torch.Tensor:
        return torch.zeros(batch_size, tokens, dtype=torch.long, device="meta")

    def prefill_of(tokens: int, cache: Any) -> OpCount:
        return count_ops(model, ids(tokens), kwargs={"use_cache": True, "past_key_values": cache, **last_only},
                         **options)

    prefill = prefill_of(prompt_tokens, cache)
    if context != prompt_tokens:
        cache = _empty_cache(model)
        prefill_of(context, cache)
    kv_bytes = cache_bytes(cache)
    decode = count_ops(model, ids(1), kwargs={"use_cache": True, "past_key_values": cache}, **options)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return ServingCost(prefill, decode, batch_size, prompt_tokens, context, kv_bytes, param_bytes, attention)
