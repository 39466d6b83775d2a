"""What the counting engine's fast paths must keep true (no timings here: see benchmarks/).

The engine wraps each module's ``forward`` for the count instead of registering hooks, skips
torch's dynamo-disabling wrapper while dynamo is not loaded, caches per-op facts by op
identity, and on the meta device replays the outputs of repeated ops instead of running their
(often Python) meta kernels. Each of those must leave counts, attribution, thread scoping and
the user's model exactly as the plain implementation would.
"""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import (Cost, CountOptions, ForwardError, count_ops, recorder,
                                                   register_formula, unregister)
from deeplite_like.backends.torch.counting.formulas._common import bind
from deeplite_like.backends.torch.counting.registry import OpCall

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

aten = torch.ops.aten
BATCH = 2


def stats(s) -> tuple[int, int, int]:
    return s.macs, s.flops, s.calls


def assert_no_trace_of_counting(model: nn.Module) -> None:
    for name, module in model.named_modules():
        assert "forward" not in module.__dict__, name
        assert not module._forward_hooks and not module._forward_pre_hooks, name
    assert not torch.nn.modules.module._has_any_global_hook() and getattr(recorder._local, "mode", None) is None
    assert torch._C._len_torch_dispatch_stack() == 0


# -- forward wrappers ---------------------------------------------------------------------------
class Gate(nn.Module):
    """Calls ``on_enter`` when it runs in the thread that built it (the test's thread)."""

    def __init__(self, on_enter):
        super().__init__()
        self.owner = threading.get_ident()
        self.on_enter = on_enter

    def forward(self, x):
        if threading.get_ident() == self.owner:
            self.on_enter()
        return x


def gated_mlp(on_enter) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4, bias=False), Gate(on_enter), nn.Linear(4, 4, bias=False))


# gated_mlp on a (2, 4) input: two mm of (2, 4) @ (4, 4): 2 * 2*4*4 = 64 MACs, 128 FLOPs; the Gate is free
MLP_MACS, MLP_FLOPS, LAYER_MACS = 64, 128, 32


def run_in_thread(fn) -> None:
    errors: list[BaseException] = []

    def target():
        try:
            fn()
        except BaseException as exc:  # handed back to the test's thread below
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def test_a_thread_running_the_model_while_it_is_counted_is_neither_counted_nor_changed():
    x = torch.randn(BATCH, 4)
    seen: list[torch.Tensor] = []
    model = gated_mlp(lambda: run_in_thread(lambda: seen.extend(model(x) for _ in range(3))))
    with torch.no_grad():
        expected = model[2](model[0](x))
        result = count_ops(model, x)
    # the other thread ran the model 3 times inside the count: none of its 6 mm are counted
    assert (result.macs, result.flops) == (MLP_MACS, MLP_FLOPS)
    assert stats(result.by_module["0"]) == (LAYER_MACS, 2 * LAYER_MACS, 1)
    assert len(seen) == 3 and all(torch.equal(y, expected) for y in seen)
    assert_no_trace_of_counting(model)


def test_a_second_thread_counting_the_same_model_meanwhile_is_refused_by_name():
    # Two threads measuring one model would restore each other's snapshots (buffers, grads): the
    # second is refused at once, naming the thread measuring it (waiting would deadlock here: the
    # first thread's forward waits for the second). The first count is exact and the model untouched.
    from deeplite_like.safety import ConcurrentMeasurementError

    x = torch.randn(BATCH, 4)
    refused: list = []

    def inner_count():
        with pytest.raises(ConcurrentMeasurementError, match=r"Sequential is being measured by MainThread") as info:
            count_ops(model, x)
        refused.append(info.value)

    model = gated_mlp(lambda: run_in_thread(inner_count))
    outer = count_ops(model, x)  # the inner count is tried while the outer one is inside the Gate
    assert len(refused) == 1
    assert (outer.macs, outer.flops) == (MLP_MACS, MLP_FLOPS)
    assert {name: s.calls for name, s in outer.by_module.items()} == {"": 1, "0": 1, "1": 1, "2": 1}
    assert_no_trace_of_counting(model)


def test_a_users_instance_forward_is_counted_and_put_back():
    model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False))
    first = model[0]

    def doubled(x):  # the user's own per-instance forward: the class forward, then * 2
        return type(first).forward(first, x) * 2

    first.forward = doubled
    result = count_ops(model, torch.randn(BATCH, 4))
    # module "0": mm 2*4*4 = 32 MACs (64 FLOPs) + mul by 2 on 8 elements = 72 FLOPs
    assert stats(result.by_module["0"]) == (32, 72, 1)
    assert first.__dict__["forward"] is doubled
    assert "forward" not in model.__dict__ and "forward" not in model[1].__dict__


def test_wrappers_are_removed_when_the_forward_raises():
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(5, 2)))
    with pytest.raises(ForwardError, match="module '1.1' \\(Linear\\)"):
        count_ops(model, torch.randn(BATCH, 4))
    assert_no_trace_of_counting(model)


def test_a_module_whose_forward_is_a_property_is_counted_through_hooks():
    class PropertyForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4, bias=False)
            self.scale = nn.Parameter(torch.full((4,), 2.0))

        @property
        def forward(self):  # an instance attribute cannot shadow this: the engine falls back to hooks
            return self._run

        def _run(self, x):
            return self.fc(x * self.scale)

    model = nn.Sequential(PropertyForward())
    result = count_ops(model, torch.randn(BATCH, 4))
    # fc: mm 2*4*4 = 32 MACs, 64 FLOPs; module "0" adds its mul by scale on 8 elements: 72 FLOPs
    assert stats(result.by_module["0.fc"]) == (32, 64, 1)
    assert stats(result.by_module["0"]) == (32, 72, 1)
    assert {k: stats(v) for k, v in result.module_ops["0"].items()} == {"aten.mul": (0, 8, 1)}
    assert_no_trace_of_counting(model)

    with pytest.raises(ForwardError, match="module '0' \\(PropertyForward\\)"):
        count_ops(model, torch.randn(BATCH, 5))  # x * scale fails in the hooked module itself
    assert_no_trace_of_counting(model)


def test_transformer_encoder_layer_children_are_attributed_on_the_unfused_path():
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        result = count_ops(layer, torch.randn(2, 5, 16))
    # 2 x 5 = 10 tokens: linear1 10*16*32 = 5120 MACs, + 320 bias adds -> 10560 FLOPs;
    # linear2 10*32*16 = 5120 MACs, + 160 bias adds -> 10400 FLOPs
    assert stats(result.by_module["linear1"]) == (5120, 10560, 1)
    assert stats(result.by_module["linear2"]) == (5120, 10400, 1)
    assert {"self_attn", "norm1", "norm2"} <= result.by_module.keys()
    assert_no_trace_of_counting(layer)


# -- dynamo ------------------------------------------------------------------------------------
@pytest.mark.slow  # (about 2 s here)
def test_counting_does_not_load_dynamo_in_a_process_that_has_not():
    # torch wraps a dispatch mode in torch._dynamo.disable, whose first call imports TorchDynamo
    # (over a second); the counting mode leaves the wrapper out while dynamo is not loaded
    code = ("import sys, torch\n"
            "from deeplite_like.backends.torch import count_ops\n"
            "r = count_ops(torch.nn.Linear(4, 2), torch.randn(3, 4))\n"
            "print(r.macs, 'torch._dynamo' in sys.modules)\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["24", "False"]  # Linear(4, 2), batch 3: 3*4*2 = 24 MACs


def test_peak_memory_does_not_load_dynamo_in_a_process_that_has_not():
    # the memory tracker is a LightDispatchMode too (it used to import TorchDynamo at first use: seconds)
    code = ("import sys, torch\n"
            "from deeplite_like.backends.torch.memory import peak_activation_memory\n"
            "m = peak_activation_memory(torch.nn.Linear(4, 2), (torch.randn(3, 4),))\n"
            "print(m.peak_bytes > 0, 'torch._dynamo' in sys.modules)\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_memory_tracker_takes_the_dynamo_safe_class_once_dynamo_is_loaded():
    import torch._dynamo  # noqa: F401

    from deeplite_like.backends.torch.memory import peak_activation_memory

    # Linear(4, 2) at batch 3, fp32: input 48 B, output 24 B; the result is the same as without dynamo
    stats = peak_activation_memory(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
    assert (stats.input_bytes, stats.output_bytes) == (48, 24)


def test_counting_mode_takes_the_dynamo_safe_class_once_dynamo_is_loaded():
    import torch._dynamo  # noqa: F401  (loaded by torch.compile anyway)

    assert "torch._dynamo" in sys.modules
    mode = recorder.counting_mode(CountOptions())
    assert mode._dynamo_safe and isinstance(mode, recorder.CountingMode)
    plain = recorder.CountingMode(CountOptions())  # made directly (as a subclass would be): switches at its first op
    plain.set_phase("forward")
    with plain:
        torch.ones(2) + 1
    assert plain._dynamo_safe and isinstance(plain, recorder.CountingMode)
    assert stats(plain.finish().by_operator["aten.add"]) == (0, 2, 1)  # 2 elements: 2 FLOPs


def test_a_compiled_model_counts_like_the_eager_one():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    eager = count_ops(model, x)
    compiled = count_ops(torch.compile(model, backend="eager"), x)
    # Linear(4, 8): 3*4*8 = 96 MACs, 192 + 24 bias = 216 FLOPs; ReLU 24; Linear(8, 2): 3*8*2 = 48 MACs,
    # 96 + 6 = 102 FLOPs -> 144 MACs, 342 FLOPs
    assert (eager.macs, eager.flops) == (compiled.macs, compiled.flops) == (144, 342)
    assert stats(compiled.by_module["_orig_mod.2"]) == stats(eager.by_module["2"]) == (48, 102, 1)


# -- meta replay -------------------------------------------------------------------------------
META_KERNEL_CALLS = [0]


@torch.library.custom_op("dlperf::scale3", mutates_args=())
def scale3(x: torch.Tensor) -> torch.Tensor:
    """x * 3, with a meta kernel that counts its calls."""
    return x * 3


@scale3.register_fake
def _(x):
    META_KERNEL_CALLS[0] += 1
    return torch.empty_like(x)


@pytest.fixture
def scale3_formula():
    @register_formula("dlperf::scale3")
    def _scale3(call: OpCall) -> Cost:
        """1 FLOP per element."""
        return Cost.elementwise(call.out.numel())

    try:
        yield
    finally:
        unregister("dlperf::scale3")


class Scale3Stack(nn.Module):
    def forward(self, x):
        for _ in range(3):
            x = scale3(x)
        return scale3(x.t())  # another shape: a new key


def test_meta_replay_runs_the_meta_kernel_once_per_distinct_call(scale3_formula, monkeypatch):
    from deeplite_like.backends.torch.counting import meta as meta_replay

    monkeypatch.setattr(meta_replay, "_RECORDED", {})  # a process that has recorded nothing yet
    x = torch.randn(2, 5)
    META_KERNEL_CALLS[0] = 0
    result = count_ops(Scale3Stack(), x, meta=True)
    # 4 calls on 10 elements: 40 FLOPs; the kernel ran for (2, 5) once and for its transpose once
    assert (result.macs, result.flops) == (0, 40)
    assert stats(result.by_operator["dlperf.scale3"]) == (0, 40, 4)
    assert META_KERNEL_CALLS[0] == 2
    # what was recorded is kept for the process: a second count runs no meta kernel, same figures
    again = count_ops(Scale3Stack(), x, meta=True)
    assert META_KERNEL_CALLS[0] == 2 and again.as_dict() == result.as_dict()
    count_ops(Scale3Stack(), torch.randn(3, 5), meta=True)  # new shapes: (3, 5) and (5, 3)
    assert META_KERNEL_CALLS[0] == 4


def test_in_place_pointwise_ops_on_self_alone_are_replayed_from_their_first_call():
    from deeplite_like.backends.torch.counting.registry import IN_PLACE, NEW, POINTWISE_IN_PLACE, op_info

    replay = {str(op): op_info(op)[3] for op in (aten.relu_.default, aten.hardtanh_.default, aten.clamp_.default,
                                                 aten.add_.Tensor, aten.unsqueeze_.default, aten.add.Tensor)}
    # pointwise, only self is a tensor: metadata cannot change. add_ takes a tensor to broadcast (its
    # kernel checks shapes) and unsqueeze_ changes the shape of self: both IN_PLACE, replayed only
    # once a first call has left the metadata of self unchanged; add returns a new tensor.
    assert replay == {"aten.relu_.default": POINTWISE_IN_PLACE, "aten.hardtanh_.default": POINTWISE_IN_PLACE,
                      "aten.clamp_.default": POINTWISE_IN_PLACE, "aten.add_.Tensor": IN_PLACE,
                      "aten.unsqueeze_.default": IN_PLACE, "aten.add.Tensor": NEW}
    # MobileNet's ReLU6(inplace=True) is hardtanh_: counted on meta as on real tensors
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True)).eval()
    x = torch.randn(BATCH, 3, 6, 6)
    real, meta = count_ops(model, x), count_ops(model, x, meta=True)
    # hardtanh_ on 2*8*4*4 = 256 elements: 256 FLOPs (one compare-and-clip each)
    assert stats(meta.by_operator["aten.hardtanh_"]) == stats(real.by_operator["aten.hardtanh_"])
    assert real.as_dict() == meta.as_dict()


def test_meta_replay_gives_outputs_like_the_kernel():
    mode = recorder.counting_mode(CountOptions(), meta=True)
    mode.set_phase("forward")
    x = torch.empty(1, 3, 8, 8, device="meta").to(memory_format=torch.channels_last)
    w = torch.empty(4, 3, 3, 3, device="meta")
    expected = aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    with mode:
        first = aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        second = aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        y = torch.empty(2, 3, device="meta")
        same = [y.relu_(), y.relu_()]
        previous = torch.get_default_dtype()
        zeros = [torch.zeros(2, device="meta")]
        try:
            torch.set_default_dtype(torch.float64)
            zeros.append(torch.zeros(2, device="meta"))
        finally:
            torch.set_default_dtype(previous)
    for out in (first, second):
        assert (out.shape, out.stride(), out.dtype) == (expected.shape, expected.stride(), expected.dtype)
    assert second is not first  # a fresh tensor, never a shared one
    assert all(t is y for t in same) and y._version == 2  # in place: self returned, version bumped
    assert [t.dtype for t in zeros] == [torch.float32, torch.float64]  # the default dtype is part of the key
    # 2 convolutions: 1*4*8*8 outputs x 3*3*3 = 6912 MACs each; relu_ 6 elements twice: 12 FLOPs
    result = mode.finish()
    assert stats(result.by_operator["aten.convolution"]) == (13824, 27648, 2)
    assert stats(result.by_operator["aten.relu_"]) == (0, 12, 2)


def test_meta_counts_equal_real_counts_on_repeated_blocks():
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
              for _ in range(3)]
    model = nn.Sequential(*blocks, nn.Flatten(), nn.Linear(8 * 6 * 6, 4)).eval()
    x = torch.randn(BATCH, 8, 6, 6)
    real, meta = count_ops(model, x), count_ops(model, x, meta=True)
    # per block, batch 2: conv 2*8*6*6 = 576 outputs x 8*3*3 = 72 -> 41472 MACs; linear 2*288*4 = 2304
    assert real.macs == meta.macs == 3 * 41472 + 2304
    assert real.as_dict() == meta.as_dict()


# -- formula helpers ---------------------------------------------------------------------------
def test_bind_hands_each_call_its_own_list_defaults():
    op = aten.max_pool2d.default
    x = torch.empty(1, 1, 4, 4, device="meta")
    call = OpCall(op, (x, [2, 2]), {}, None)
    first = bind(call)
    assert first["stride"] == [] and first["padding"] == [0, 0]
    first["padding"].append(7)  # a formula changing what it was given ...
    assert bind(call)["padding"] == [0, 0]  # ... does not change the next call's default


def test_meta_copies_are_swapped_in_for_the_count_and_out_after():
    # The meta copies stand in every owner's slot during the count (state.swapped_tensors: tied
    # weights stay tied) and the user's tensors are back afterwards, also when the forward raises.
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight
            self.seen = []

        def forward(self, x):
            self.seen.append((self.a.weight.device.type, self.a.weight is self.b.weight))
            return self.b(self.a(x))

    model, x = Tied(), torch.randn(2, 4)
    weight = model.a.weight
    # two Linear(4, 4) at batch 2: 2 * 4 * 4 = 32 MACs each
    assert count_ops(model, x, meta=True).macs == 64
    assert model.seen == [("meta", True)]
    assert model.a.weight is weight and model.b.weight is weight and not weight.is_meta
    with pytest.raises(ForwardError):
        count_ops(model, torch.randn(2, 5), meta=True)
    assert model.a.weight is weight and model.b.weight is weight


def test_a_torchscript_module_counts_on_meta():
    scripted = torch.jit.script(nn.Sequential(nn.Linear(4, 3), nn.ReLU()))
    weight = scripted[0].weight
    # Linear(4, 3) at batch 2: 24 MACs, as on real tensors (functional_call refused TorchScript)
    assert count_ops(scripted, torch.randn(2, 4), meta=True).macs == count_ops(scripted, torch.randn(2, 4)).macs == 24
    assert scripted[0].weight is weight and not weight.is_meta
