"""Llama-2-7B on an A100, our ``count_serving`` next to LLM-Viewer's per-layer analysis.

    python benchmarks/bench_llm_viewer.py                             # ours alone
    python benchmarks/bench_llm_viewer.py --llm-viewer /tmp/llmviewer  # next to LLM-Viewer's (docs/benchmarks.rst)

The model is transformers' ``LlamaForCausalLM`` with Llama-2-7B's shape (hidden 4096, MLP 11008,
32 layers of 32 heads, vocabulary 32000), float16, on the meta device, with the eager attention
(``attn_implementation="eager"``: the scores, the softmax and ``P·V`` are separate operators, as
LLM-Viewer's unfused graph has them. transformers' default, SDPA, is counted on meta through its
math decomposition, so it is no FlashAttention either: it is not compared here).
LLM-Viewer's defaults (``analyze_cli.py`` and its web page): batch 1, ``seqlen`` 1024, 16-bit
weights, activations and KV cache, no FlashAttention. Its ``seqlen`` is the prompt of the prefill
and the tokens in the KV cache at the decode step, where the new token attends to ``seqlen`` keys;
ours is the same decode step when 1023 tokens are cached (``count_serving(context=1023)``: the
step appends its own keys and values and attends to 1024).

Our operator records (``OpCount.records``) are mapped to LLM-Viewer's layer kinds by the module
that ran them and the operator (``kinds``); what LLM-Viewer has no layer for (the embedding, the
rotary embedding, the causal mask, the final norm, the fp32 casts and copies of transformers' eager
code) gets rows of its own, so the rows add up to our totals. Per-layer rows are our 32 layers'
sum divided by 32 (the layers are identical), as LLM-Viewer reports one layer and multiplies by 32.

``--llm-viewer PATH`` imports LLM-Viewer from an exported tree at run time (its ``ModelAnalyzer``);
it reads the Hugging Face config from the hub, so it is given a local ``config.json`` written from
the same ``LlamaConfig`` in a temporary folder. Predicted times use LLM-Viewer's own A100 figures
(``hardwares/hardware_params.py``, ``nvidia_A100``: 312 TFLOP/s fp16, 1,555 GB/s), the same roofline
as LLM-Viewer's per layer: max(FLOPs / peak, bytes / bandwidth), summed over our operators.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
from collections import defaultdict

import torch
from prettytable import PrettyTable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from deeplite_like.backends.torch.serving import count_serving  # noqa: E402

LAYERS = 32
A100_FLOPS, A100_BYTES_PER_S = 312e12, 1555e9  # LLM-Viewer's nvidia_A100 (its A100 40 GB figures)

# LLM-Viewer's layer kinds, in its order, then ours that it has no layer for.
THEIR_KINDS = ("q_proj", "k_proj", "v_proj", "out_proj", "gate_proj", "up_proj", "down_proj", "qk_matmul",
               "sv_matmul", "softmax", "attn_norm", "mlp_norm", "attn_add", "mlp_add", "mlp_act")
OUR_LAYER_KINDS = ("rope (apply)", "kv cache append (cat)", "scores scale + mask", "softmax fp32 casts",
                   "attn output copy")
MODEL_KINDS = ("embedding", "rope tables", "positions + mask", "final norm", "lm_head")

LAYER_MODULE = re.compile(r"model\.layers\.\d+(?:\.(?P<inner>.*))?$")
LINEAR = {"self_attn.q_proj": "q_proj", "self_attn.k_proj": "k_proj", "self_attn.v_proj": "v_proj",
          "self_attn.o_proj": "out_proj", "mlp.gate_proj": "gate_proj", "mlp.up_proj": "up_proj",
          "mlp.down_proj": "down_proj"}
MODEL_MODULES = {"model.embed_tokens": "embedding", "model.rotary_emb": "rope tables", "model": "positions + mask",
                 "model.norm": "final norm", "lm_head": "lm_head"}


def llama2_7b(layers: int = LAYERS) -> torch.nn.Module:
    """transformers' LlamaForCausalLM with Llama-2-7B's shape, float16, on meta (nothing allocated)."""
    import transformers

    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=layers,
                                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                                      max_position_embeddings=4096, attn_implementation="eager")
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(config).to(torch.float16).eval()


class _AttentionCall:
    """Where one self-attention call has got to: its operators are told apart by their order.

    transformers' eager Llama attention runs, after the three projections: the rotary embedding on
    q and k (``mul``, ``neg``, ``cat`` for ``rotate_half``, ``mul``, ``add``), the cache update (one
    ``cat`` for keys, one for values), ``Q·Kᵀ`` (``bmm``), the scale (``mul``) and the mask
    (``add``), the softmax in float32 (``_to_copy``, ``_softmax``, ``_to_copy``), ``P·V`` (``bmm``),
    and the output's transpose made contiguous (``clone``).
    """

    def __init__(self) -> None:
        self.bmms = 0
        self.previous = ""

    def kind(self, op: str) -> str:
        previous, self.previous = self.previous, op
        if op == "aten.bmm":
            self.bmms += 1
            return "qk_matmul" if self.bmms == 1 else "sv_matmul"
        if op == "aten._softmax":
            return "softmax"
        if op == "aten._to_copy":
            return "softmax fp32 casts"
        if op in ("aten.clone", "aten.contiguous"):
            return "attn output copy"
        if op == "aten.cat":  # rotate_half's cat follows its neg; the cache's do not
            return "rope (apply)" if previous == "aten.neg" else "kv cache append (cat)"
        if op in ("aten.mul", "aten.add", "aten.neg"):
            return "rope (apply)" if self.bmms == 0 else "scores scale + mask"
        return f"other: self_attn {op}"


def kinds(records) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """(layer kinds, model kinds): kind -> [MACs, FLOPs, bytes, fused bytes], the layer kinds summed over
    every decoder layer. An operator no rule knows gets a row of its own, ``other: <module> <op>``."""
    layer_rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    model_rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    attention: dict[str, _AttentionCall] = {}
    layer_adds: dict[str, int] = defaultdict(int)
    for r in records:
        match = LAYER_MODULE.match(r.module)
        if match is None:
            rows, kind = model_rows, MODEL_MODULES.get(r.module, f"other: {r.module or '(root)'} {r.op}")
        else:
            rows = layer_rows
            inner = match.group("inner") or ""
            layer = r.module[: len(r.module) - len(inner)].rstrip(".")
            if inner in LINEAR:
                kind = LINEAR[inner]
            elif inner == "input_layernorm":
                kind = "attn_norm"
            elif inner == "post_attention_layernorm":
                kind = "mlp_norm"
            elif inner == "mlp.act_fn" or (inner == "mlp" and r.op == "aten.mul"):
                kind = "mlp_act"
            elif inner == "" and r.op == "aten.add":
                layer_adds[layer] += 1
                kind = "attn_add" if layer_adds[layer] == 1 else "mlp_add"
            elif inner == "self_attn":
                kind = attention.setdefault(layer, _AttentionCall()).kind(r.op)
            else:
                kind = f"other: {inner or '(layer)'} {r.op}"
        row = rows[kind]
        row[0] += r.macs
        row[1] += r.flops
        row[2] += r.bytes
        row[3] += r.fused_bytes
    return dict(layer_rows), dict(model_rows)


def roofline_seconds(records, fused: bool = False) -> float:
    """Sum over operators of max(FLOPs / peak, bytes / bandwidth) on LLM-Viewer's A100."""
    return sum(max(r.flops / A100_FLOPS, (r.fused_bytes if fused else r.bytes) / A100_BYTES_PER_S) for r in records)


def llm_viewer(path: str, seqlen: int, batch: int) -> dict:
    """LLM-Viewer's ``ModelAnalyzer(...).analyze`` for Llama-2-7B on ``nvidia_A100``, imported from ``path``."""
    import transformers

    sys.path.insert(0, os.path.abspath(path))
    from model_analyzer import ModelAnalyzer  # (LLM-Viewer's, from the exported tree)

    with tempfile.TemporaryDirectory() as folder:  # its config, as the hub would give it
        local = os.path.join(folder, "Llama-2-7b-hf")
        transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=LAYERS,
                                 num_attention_heads=32, num_key_value_heads=32,
                                 vocab_size=32000).save_pretrained(local)
        with contextlib.redirect_stdout(io.StringIO()):
            analyzer = ModelAnalyzer(local, "nvidia_A100", config_file="configs/Llama.py")
            return analyzer.analyze(seqlen=seqlen, batchsize=batch, w_bit=16, a_bit=16, kv_bit=16,
                                    use_flashattention=False)


def _n(value) -> str:
    return f"{int(value):,}" if value is not None else "-"


def _ai(flops, nbytes) -> str:
    return f"{flops / nbytes:.3g}" if flops is not None and nbytes else "-"


def phase_table(phase: str, layer: dict[str, list[int]], model: dict[str, list[int]],
                theirs: dict | None) -> PrettyTable:
    """One phase: per decoder layer (our sum over the layers / 32) in LLM-Viewer's kinds, then the model's rows."""
    table = PrettyTable(["kind", "our FLOPs", "LLM-Viewer OPs", "our bytes", "our fused bytes",
                         "LLM-Viewer bytes", "AI ours", "AI LLM-Viewer", "same"])
    for column in table.field_names[1:]:
        table.align[column] = "r"
    table.align["kind"] = "l"
    theirs = theirs or {}
    layer_kinds = [*THEIR_KINDS, *OUR_LAYER_KINDS, *sorted(k for k in layer if k not in THEIR_KINDS + OUR_LAYER_KINDS)]
    model_kinds = [*MODEL_KINDS, *sorted(k for k in model if k not in MODEL_KINDS)]
    for kinds_, ours, scale in ((layer_kinds, layer, LAYERS), (model_kinds, model, 1)):
        for kind in kinds_:
            mine, their = ours.get(kind), theirs.get(kind)
            if mine is None and their is None:
                continue
            assert mine is None or all(v % scale == 0 for v in mine), f"{kind}: the layers differ"
            flops, nbytes, fused = (mine[1] // scale, mine[2] // scale, mine[3] // scale) if mine else (None,) * 3
            t_ops, t_bytes = (their["OPs"], their["memory_access"]) if their else (None, None)
            same = [name for name, a, b in (("FLOPs", flops, t_ops), ("bytes", nbytes, t_bytes))
                    if mine and their and a == b]
            table.add_row([kind if scale > 1 else f"{kind} (model)", _n(flops), _n(t_ops), _n(nbytes), _n(fused),
                           _n(t_bytes), _ai(flops, nbytes), _ai(t_ops, t_bytes), " ".join(same)])
    table.title = f"{phase}: per decoder layer (x {LAYERS}), then the model's own rows"
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-viewer", metavar="PATH", help="an exported LLM-Viewer tree to compare with")
    parser.add_argument("--seqlen", type=int, default=1024, help="LLM-Viewer's seqlen (default: its 1024)")
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args(argv)

    model = llama2_7b()
    cost = count_serving(model, prompt_tokens=args.seqlen, context=args.seqlen - 1, batch_size=args.batch)
    theirs = llm_viewer(args.llm_viewer, args.seqlen, args.batch) if args.llm_viewer else None
    print(f"Llama-2-7B (transformers LlamaForCausalLM, eager attention), float16, meta; batch {args.batch}, "
          f"prefill {args.seqlen} tokens, decode attending {args.seqlen} tokens; A100 as LLM-Viewer "
          "(312 TFLOP/s, 1,555 GB/s)")
    totals = PrettyTable(["phase", "our FLOPs", "LLM-Viewer OPs", "our bytes", "our fused bytes",
                          "LLM-Viewer bytes", "our A100 ms (unfused / fused)", "LLM-Viewer A100 ms"])
    for column in totals.field_names[1:]:
        totals.align[column] = "r"
    for phase, count in (("prefill", cost.prefill), ("decode", cost.decode)):
        layer, model_rows = kinds(count.records)
        rows = [*layer.values(), *model_rows.values()]  # every operator in one row: the rows add up to the totals
        assert sum(r[1] for r in rows) == count.flops and sum(r[2] for r in rows) == count.bytes
        print(phase_table(phase, layer, model_rows, theirs[phase] if theirs else None))
        their_total = theirs["total_results"][phase] if theirs else None
        totals.add_row([phase, _n(count.flops), _n(their_total and their_total["OPs"]), _n(count.bytes),
                        _n(count.fused_bytes), _n(their_total and their_total["memory_access"]),
                        f"{roofline_seconds(count.records) * 1e3:.2f} / "
                        f"{roofline_seconds(count.records, fused=True) * 1e3:.2f}",
                        f"{their_total['inference_time'] * 1e3:.2f}" if their_total else "-"])
    totals.title = "model totals"
    print(totals)
    print(f"KV cache read by the decode step: {cost.kv_cache_bytes:,} bytes; parameters: {cost.param_bytes:,} bytes")


if __name__ == "__main__":
    main()
