"""peak_activation_memory: exact hand-derived peaks, and cross-checks against torch's own counters."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.memory import peak_activation_memory
from deeplite_like.backends.torch.tensors import MemoryStats


def mlp_1000(inplace: bool = False) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(1000, 1000), nn.ReLU(inplace=inplace), nn.Linear(1000, 10))


def small_cnn() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    ).eval()


def small_mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 10)).eval()


def test_hand_derived_peak_no_grad():
    # fp32, batch 4, no_grad. Sequential runs `input = module(input)`, so a layer's input is
    # released only after the next layer has returned:
    #   start           x (caller's)                 4*1000*4 = 16000 live
    #   linear1 (addmm) + h1 4*1000*4 = 16000      -> 32000
    #   relu            + h2 16000 (h1 still bound) -> 48000  <- peak
    #                   h1 released                -> 32000
    #   linear2 (addmm) + out 4*10*4 = 160         -> 32160
    #                   h2 released                -> 16160 at the end (x + out)
    stats = peak_activation_memory(mlp_1000(), (torch.randn(4, 1000),))
    assert stats.peak_bytes == 48000
    assert stats.input_bytes == 16000
    assert stats.output_bytes == 160
    assert stats.end_bytes == 16160
    assert stats.allocated_bytes == 16000 + 16000 + 160
    assert stats.activation_peak_bytes == 32000
    assert stats.batch_size == 4 and stats.per_sample_peak_bytes == 48000 / 4
    assert (stats.peak_op, stats.peak_module) == ("aten.relu.default", "1")
    assert stats.peak_at == "aten.relu.default in '1'"


def test_input_sliced_from_a_larger_batch_counts_its_own_samples():
    big = torch.randn(10, 1000)  # 40000 B storage
    stats = peak_activation_memory(mlp_1000(), (big[:4],))  # a view: 4 samples, 16000 B
    assert (stats.input_bytes, stats.peak_bytes) == (16000, 48000)  # as in the test above
    # An output that is the input itself holds the input's bytes, not the 40000 B storage.
    assert peak_activation_memory(nn.Identity(), (big[:4],)).output_bytes == 16000
    # Two inputs overlapping in one storage: rows 0-3 and 2-5 cover rows 0-5 = 6*1000*4 B.
    two = peak_activation_memory(_Pair(), (big[:4], big[2:6]))
    assert two.input_bytes == 24000


class _Pair(nn.Module):
    def forward(self, a, b):
        return a + b


def test_inplace_relu_does_not_allocate():
    # relu_ writes into h1: x 16000 + h1 16000, then linear2 adds 160 -> peak 32160 at addmm in '2'.
    stats = peak_activation_memory(mlp_1000(inplace=True), (torch.randn(4, 1000),))
    assert stats.peak_bytes == 32160
    assert stats.allocated_bytes == 16160
    assert (stats.peak_op, stats.peak_module) == ("aten.addmm.default", "2")


def test_training_forward_keeps_saved_tensors():
    # grad=True: same peak (48000), but at the end autograd still holds h2 (relu saves its
    # result; linear2 saves its input, the same storage). h1 is saved by nobody and is freed;
    # linear1 saves x, already counted. End: x 16000 + h2 16000 + out 160 = 32160.
    stats = peak_activation_memory(mlp_1000(), (torch.randn(4, 1000),), grad=True)
    assert stats.peak_bytes == 48000
    assert stats.end_bytes == 32160
    assert stats.grad is True


def test_views_and_shared_storages_count_once():
    class Views(nn.Module):
        def forward(self, x):
            y = x * 2  # allocates 8*6*4 = 192
            a, b = y.split(3, dim=1)  # views of y: nothing
            return a.t(), b.unsqueeze(0), y[1:], b.reshape(-1)

    stats = peak_activation_memory(Views(), (torch.randn(8, 6),))
    # t / unsqueeze / slicing are views of y: nothing. b is a non-contiguous half of y, so
    # reshape(-1) must copy it (aten.clone): 8*3*4 = 96. Input 192 + y 192 + copy 96 = 480.
    # Outputs: three share y's storage (counted once, 192) + the copy 96 = 288.
    assert stats.allocated_bytes == 192 + 96
    assert stats.peak_bytes == 480 and stats.peak_op == "aten.clone.default"
    assert stats.output_bytes == 288 and stats.end_bytes == 480


def test_kwargs_and_dtype():
    class Add(nn.Module):
        def forward(self, x, *, bias):
            return x + bias

    x = torch.randn(2, 5, dtype=torch.float16)  # 2*5*2 = 20 B
    bias = torch.randn(5, dtype=torch.float16)  # 10 B
    stats = peak_activation_memory(Add(), (x,), {"bias": bias})
    # inputs 20 + 10 = 30; x + bias allocates 20 -> peak 50
    assert (stats.input_bytes, stats.peak_bytes, stats.output_bytes) == (30, 50, 20)


def test_parameters_and_buffers_are_excluded():
    bn = nn.BatchNorm1d(1000).eval()
    stats = peak_activation_memory(bn, (torch.randn(4, 1000),))
    # input 16000 + output 16000; the 4 * 1000 * 4 B of weight, bias and running stats are not
    # activations (eval-mode batch norm returns 0-element save_mean / save_invstd).
    assert stats.peak_bytes == 32000


@pytest.mark.parametrize("grad", [False, True])
def test_meta_matches_real(grad):
    fields = ("peak_bytes", "input_bytes", "output_bytes", "end_bytes", "allocated_bytes", "peak_op", "peak_module")
    model, x = mlp_1000(), torch.randn(4, 1000)
    real = peak_activation_memory(model, (x,), grad=grad)
    fake = peak_activation_memory(model, (x,), grad=grad, meta=True)
    assert fake.meta and not real.meta
    assert [getattr(fake, f) for f in fields] == [getattr(real, f) for f in fields]

    # One known difference: eval-mode batch norm's meta kernel returns save_mean and
    # save_invstd of shape (C,) where the CPU kernel returns empty tensors. For BatchNorm2d(8)
    # fp32 that is 2 * 8 * 4 = 64 B more on meta, alive while the BN output is (so in the peak).
    model, x = small_cnn(), torch.randn(2, 3, 32, 32)
    real = peak_activation_memory(model, (x,), grad=grad)
    fake = peak_activation_memory(model, (x,), grad=grad, meta=True)
    assert fake.peak_bytes - real.peak_bytes == 64
    assert fake.allocated_bytes - real.allocated_bytes == 64
    assert (fake.input_bytes, fake.output_bytes, fake.peak_op, fake.peak_module) == \
        (real.input_bytes, real.output_bytes, real.peak_op, real.peak_module)


def test_meta_model_needs_no_real_weights():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(1000, 1000), nn.ReLU(), nn.Linear(1000, 10))
    stats = peak_activation_memory(model, (torch.randn(4, 1000),))
    assert stats.meta and stats.peak_bytes == 48000  # same derivation as the no_grad test


def test_meta_failure_says_what_to_do():
    class Nonzero(nn.Module):
        def forward(self, x):
            return torch.nonzero(x)

    with pytest.raises((RuntimeError, NotImplementedError)) as info:
        peak_activation_memory(Nonzero(), (torch.ones(4, 3),), meta=True)
    notes = getattr(info.value, "__notes__", [])  # Python >= 3.11; older: in the message
    assert any("pass meta=False" in note for note in notes) or "pass meta=False" in str(info.value)
    # on real tensors: 12 non-zero positions * 2 indices * int64 8 B = 192 B output
    assert peak_activation_memory(Nonzero(), (torch.ones(4, 3),)).output_bytes == 192


def _global_hooks() -> tuple[dict, dict]:
    module_globals = torch.nn.modules.module
    return dict(module_globals._global_forward_hooks), dict(module_globals._global_forward_pre_hooks)


def test_model_left_as_found():
    model = small_cnn().train()
    model[1].eval()
    bn = model[1]
    modes = [m.training for m in model.modules()]
    running = bn.running_mean.clone()
    hooks = dict(model[0]._forward_hooks)
    global_hooks = _global_hooks()
    peak_activation_memory(model, (torch.randn(2, 3, 32, 32),), grad=True, train=True)
    assert [m.training for m in model.modules()] == modes
    assert torch.equal(bn.running_mean, running) and int(bn.num_batches_tracked) == 0
    assert dict(model[0]._forward_hooks) == hooks
    assert all(p.grad is None for p in model.parameters())
    assert _global_hooks() == global_hooks


def test_fused_transformer_fastpath_is_turned_off():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).eval()
    x = torch.randn(2, 10, 32)  # 2*10*32*4 = 2560 B; the output has the same shape
    fused = peak_activation_memory(layer, (x,), allow_fastpath=True)
    # The fused kernel shows only its output: 2560 + 2560 = 5120, every intermediate hidden.
    assert (fused.peak_bytes, fused.peak_op) == (5120, "aten._transformer_encoder_layer_fwd.default")
    unfused = peak_activation_memory(layer, (x,))
    assert unfused.peak_bytes > fused.peak_bytes and unfused.peak_module != ""
    assert torch.backends.mha.get_fastpath_enabled()  # restored
    # On meta, attention takes the math path (scores materialised): an upper bound.
    assert peak_activation_memory(layer, (x,), meta=True).peak_bytes >= unfused.peak_bytes


def test_globals_restored_when_forward_raises():
    class Fails(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.lin(x)
            raise ValueError("inside forward")

    model = Fails().train()
    global_hooks = _global_hooks()
    with pytest.raises(ValueError, match="inside forward"):
        peak_activation_memory(model, (torch.randn(3, 2),), train=False)
    assert model.training
    assert torch.backends.mha.get_fastpath_enabled()
    assert _global_hooks() == global_hooks
    assert not torch._C._len_torch_dispatch_stack()  # the dispatch mode was popped


def test_batch_size_inference_and_errors():
    stats = peak_activation_memory(nn.Identity(), (torch.randn(6, 2),))
    assert stats.batch_size == 6 and stats.per_sample_peak_bytes == 48 / 6
    assert peak_activation_memory(nn.Identity(), (torch.randn(6, 2),), batch_size=6).batch_size == 6
    # a batch_size that is no dimension of the inputs would label batch 6's peak per sample of 3 (issue 29)
    with pytest.raises(ValueError, match=r"peak_activation_memory\(batch_size=3\) disagrees with the inputs \(6x2\)"):
        peak_activation_memory(nn.Identity(), (torch.randn(6, 2),), batch_size=3)
    with pytest.raises(ValueError, match="pass batch_size"):
        peak_activation_memory(nn.Identity(), (torch.tensor(1.0),))
    with pytest.raises(TypeError, match="expects a torch.nn.Module"):
        peak_activation_memory(lambda x: x, (torch.randn(2),))


def _profiler_peak(model: nn.Module, x: torch.Tensor, grad: bool) -> int:
    """Peak of the running sum of the CPU profiler's allocation/free events during one forward."""
    from tests.torch.allocator_steps import allocator_peak

    def forward() -> None:
        out = model(x)
        del out

    with torch.set_grad_enabled(grad):
        model(x)  # warm up (one-time packing of weights is not an activation)
        return allocator_peak(forward)


@pytest.mark.parametrize("grad", [False, True])
def test_agrees_with_profiler_on_mlp(grad):
    # The profiler sees the allocator: inputs were allocated before it started, so its peak is
    # our peak minus the inputs. Linear/GELU/Tanh kernels use no scratch: exact agreement.
    model, x = small_mlp(), torch.randn(8, 64)
    ours = peak_activation_memory(model, (x,), grad=grad)
    assert ours.activation_peak_bytes == _profiler_peak(model, x, grad)
    # and by hand, no_grad: h1 8*256*4 = 8192 + gelu out 8192 = 16384 over the 2048 B input
    if not grad:
        assert ours.activation_peak_bytes == 16384


@pytest.mark.parametrize("grad", [False, True])
def test_agrees_with_profiler_on_cnn(grad):
    # The CPU convolution allocates scratch inside its kernel (on the development machine: a
    # 131072 B buffer alive while conv1's 65536 B output is allocated), which no dispatch-level
    # tracker can see. So the profiler may read higher, by at most that scratch: here bounded
    # by twice the largest activation (conv1 out: 2*8*32*32*4 = 65536 B). Ours must never be
    # higher than what the allocator really held.
    model, x = small_cnn(), torch.randn(2, 3, 32, 32)
    ours = peak_activation_memory(model, (x,), grad=grad).activation_peak_bytes
    theirs = _profiler_peak(model, x, grad)
    assert ours <= theirs <= ours + 2 * 65536
    # by hand, no_grad: conv1 out 65536 + batch-norm out 65536 = 131072 over the input
    if not grad:
        assert ours == 131072


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_agrees_with_cuda_max_memory_allocated():
    # The caching allocator rounds each block up to a multiple of 512 B; the MLP's activations
    # are multiples of 512 (8*256*4 = 8192) except the 320 B output (rounded to 512).
    model, x = small_mlp().cuda(), torch.randn(8, 64, device="cuda")
    with torch.no_grad():
        model(x)  # warm-up: cuBLAS creates its workspace on first use
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.no_grad():
        out = model(x)
    torch.cuda.synchronize()
    allocator_peak = torch.cuda.max_memory_allocated() - base
    del out
    ours = peak_activation_memory(model, (x,))
    assert ours.activation_peak_bytes <= allocator_peak <= ours.activation_peak_bytes + 4 * 512


def test_result_type():
    assert isinstance(peak_activation_memory(nn.Identity(), (torch.randn(1, 1),)), MemoryStats)


def test_output_in_a_mapping_pytree_does_not_know_counts():
    from collections.abc import Mapping

    class Out(Mapping):  # not a dict: torch's pytree sees one leaf, the mapping itself
        def __init__(self, **values):
            self._values = values

        def __getitem__(self, key):
            return self._values[key]

        def __iter__(self):
            return iter(self._values)

        def __len__(self):
            return len(self._values)

    class Model(nn.Module):
        def forward(self, x):
            return Out(y=x * 2)

    # the output y is 2*3 float32 = 24 B, held by the mapping; the input is 24 B too
    stats = peak_activation_memory(Model(), (torch.ones(2, 3),))
    assert stats.output_bytes == 24
    assert stats.input_bytes == 24 and stats.peak_bytes == 48
