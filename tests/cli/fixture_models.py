"""Small models named by the command-line tests as ``tests.cli.fixture_models:NAME``.

Costs used by the tests (batch 2, ``tiny`` = Linear(4, 3)):
    MACs  = batch * in * out = 2 * 4 * 3 = 24
    FLOPs = 2 * MACs + bias adds (batch * out = 6) = 54
"""
import torch
from torch import nn


def tiny() -> nn.Module:
    """Linear(4, 3), weights from seed 0."""
    torch.manual_seed(0)
    return nn.Linear(4, 3)


def tiny_with_example():
    """``(model, example)``: the factory also says what the model takes (a batch of 2)."""
    return tiny(), torch.ones(2, 4)


def mlp(hidden: int = 5, depth: int = 1) -> nn.Module:
    """Linear(4, hidden) -> ReLU -> ... -> Linear(hidden, 2)."""
    layers = [nn.Linear(4, hidden), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(hidden, hidden), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(hidden, 2))


class TwoInputs(nn.Module):
    """``forward(x, y) = fc(x) + y``: needs two inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + y


def sparse_lookup() -> nn.Module:
    """Embedding(10, 4, sparse=True) -> Linear(4, 2): 40 + 10 fp32 parameters; sparse gradients."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(10, 4, sparse=True), nn.Linear(4, 2))


def broken() -> nn.Module:
    raise RuntimeError("the factory itself is broken")


def not_a_model() -> str:
    return "a string"


INSTANCE = nn.Linear(4, 3)
NUMBER = 42


class _CtrlC(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise KeyboardInterrupt  # what Ctrl-C does while the forward runs


def interrupted() -> nn.Module:
    """A model whose forward is interrupted (Ctrl-C)."""
    return _CtrlC()


class CausalSelfAttention(nn.Module):
    """``scaled_dot_product_attention(x, x, x, is_causal=True)``: no parameters, attention only."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(x, x, x, is_causal=True)


class ThreadRecorder(nn.Module):
    """Linear(4, 3) that records the intra-op thread count of every forward (class attribute ``seen``)."""

    seen: list = []

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        ThreadRecorder.seen.append(torch.get_num_threads())
        return self.fc(x)


def thread_recorder() -> nn.Module:
    ThreadRecorder.seen = []
    return ThreadRecorder()


def tiny_llama():
    """``(model, ids)``: a 2-layer Llama (hidden 64, 4 heads of 16, 2 key/value heads, MLP 128,
    vocabulary 100), float32, and a prompt of 2 x 8 token ids (``tests/torch/test_serving.py``)."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    return transformers.LlamaForCausalLM(config).eval(), torch.zeros(2, 8, dtype=torch.long)
