"""A Hugging Face ``transformers`` model built from a config (nothing downloaded), profiled and compared.

Run it from the repository root (needs torch and ``pip install transformers``; without
transformers it says so and exits with status 0)::

    python examples/hf_transformers.py [--output bert.html]

Two BERT classifiers are built from ``BertConfig`` with random weights: a teacher (2 layers,
hidden 64, 4 heads, feed-forward 128) and a student (1 layer, same widths). They take keyword
inputs (``input_ids``, ``attention_mask``), bound with ``ForwardPass(inputs=(...))``. MACs by
hand, per sample of L = 16 tokens, hidden d = 64, feed-forward f = 128, 4 heads of 16:

* per layer: Q, K, V and output projections 4 * L * d * d = 262,144; attention Q.K^T and
  P.V 2 * 4 heads * L * L * 16 = 32,768; feed-forward 2 * L * d * f = 262,144 -> 557,056;
* pooler (first token only) d * d = 4,096; classifier d * 2 labels = 128;
* teacher 2 * 557,056 + 4,224 = 1,118,336; student 557,056 + 4,224 = 561,280;
* on a batch of 2: 2,236,672 and 1,122,560 MACs.

Embedding look-ups are free (moves, not arithmetic); layer norms, GELU, softmax and the
residual adds are FLOPs, not MACs.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys

BATCH, TOKENS = 2, 16
TEACHER_MACS, STUDENT_MACS = BATCH * 1_118_336, BATCH * 561_280  # derived in the module docstring


def build(layers: int):
    """A BERT sequence classifier with random weights, from a config: nothing is downloaded."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64, num_labels=2)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return BertForSequenceClassification(config).eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="also save the report (.html, .md, .json, .csv, .txt)")
    parser.add_argument("--min-run-time", type=float, default=0.2, help="seconds of timed runs per model")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("transformers") is None:
        print("skipped: this example needs Hugging Face transformers, which is not installed here; "
              "install it with: pip install transformers")
        return 0

    import torch

    from deeplite_like import ForwardPass, compare
    from deeplite_like.backends.torch import TorchProfiler

    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(0, 1000, (BATCH, TOKENS), generator=generator),
             "attention_mask": torch.ones(BATCH, TOKENS, dtype=torch.int64)}
    data = {"test": [batch]}
    inputs = ForwardPass(inputs=("input_ids", "attention_mask"))  # batch keys -> keyword arguments
    teacher = TorchProfiler(build(layers=2), data, name="bert-2-layers", forward_pass=inputs)
    student = TorchProfiler(build(layers=1), data, name="bert-1-layer", forward_pass=inputs)
    report = compare([teacher, student], batch_size=BATCH, min_run_time=args.min_run_time)
    print(report)
    macs = (teacher.get_status("macs").value, student.get_status("macs").value)
    assert macs == (TEACHER_MACS, STUDENT_MACS), f"MACs {macs} differ from {(TEACHER_MACS, STUDENT_MACS)} by hand"
    untracked = teacher.get_status("macs").details.get("untracked")
    print(f"operators without a formula: {untracked or 'none'}")
    if args.output:
        print(f"saved {report.save(args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
