"""Ctrl-C, or any exception, inside our own restore code never leaves the model or the process changed
(issue 29, section 1), and threads measuring one model never get each other's numbers.

Interrupts are injected two ways: a real SIGINT (``signal.raise_signal``) delivered from inside a
restore step, which the guard holds until every step ran and then raises; and an exception raised
by one restore step, after which every other step still runs.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import weakref

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch import TorchProfiler, count_ops, state as torch_state
from deeplite_like.backends.torch.counting import recorder
from deeplite_like.backends.torch.counting.recorder import CountingMode
from deeplite_like.backends.torch.training.estimate import estimate_training_memory
from deeplite_like.safety import ConcurrentMeasurementError


def bn_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2), nn.BatchNorm1d(2))


def snapshot(model: nn.Module) -> dict:
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state["devices"] = {v.device.type for v in model.state_dict().values()}
    state["grads"] = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    state["training"] = [m.training for m in model.modules()]
    return state


def same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys() or a["devices"] != b["devices"] or a["training"] != b["training"]:
        return False
    for key in a:
        if isinstance(a[key], torch.Tensor) and not torch.equal(a[key], b[key]):
            return False
    return all((x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))
               for x, y in zip(a["grads"], b["grads"]))


def nothing_of_ours_left(fastpath_before: bool) -> None:
    assert not torch.nn.modules.module._has_any_global_hook()
    assert getattr(recorder._local, "mode", None) is None
    assert torch._C._len_torch_dispatch_stack() == 0
    assert torch.backends.mha.get_fastpath_enabled() == fastpath_before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    torch.equal(torch.ones(2), torch.ones(2))  # no counting mode answers in this thread


def sigint_once(original):
    """``original`` that first delivers a real SIGINT to this process (once)."""
    fired = []

    def wrapped(*args, **kwargs):
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)
        return original(*args, **kwargs)

    return wrapped


def raises_once(original, error=KeyboardInterrupt):
    fired = []

    def wrapped(*args, **kwargs):
        if not fired:
            fired.append(True)
            raise error()
        return original(*args, **kwargs)

    return wrapped


@pytest.fixture
def fastpath():
    """The fast-path setting found; SIGINT with Python's default handler for the test (a shell can start
    the tests with SIGINT ignored, as a background job without job control: then no signal arrives)."""
    before = torch.backends.mha.get_fastpath_enabled()
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield before
    finally:
        signal.signal(signal.SIGINT, handler)
        torch.backends.mha.set_fastpath_enabled(before)


# -- count_ops: the buffer write-back, the mutated-parameter write-back, detach ------------------
@pytest.mark.parametrize("inject", [sigint_once, raises_once])
def test_interrupt_inside_count_ops_buffer_write_back(monkeypatch, inject, fastpath):
    model, x = bn_net().train(), torch.randn(8, 4)
    before = snapshot(model)
    monkeypatch.setattr(CountingMode, "restore_mutated", inject(CountingMode.restore_mutated))
    with pytest.raises(KeyboardInterrupt):
        count_ops(model, x)
    assert same(snapshot(model), before)  # batch-norm statistics put back
    nothing_of_ours_left(fastpath)
    assert count_ops(model, x).macs == 8 * 4 * 6 + 8 * 6 * 2  # 288: the next count works


@pytest.mark.parametrize("inject", [sigint_once])  # (a step that raises instead of running cannot run)
def test_interrupt_while_detaching_the_counting_mode(monkeypatch, inject, fastpath):
    # an encoder layer turns the fused fast path off while counted: it must come back on
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1).eval()
    x = torch.randn(2, 3, 8)
    monkeypatch.setattr(recorder, "remove_global_module_hooks", inject(recorder.remove_global_module_hooks))
    with pytest.raises(KeyboardInterrupt):
        with torch.no_grad():
            count_ops(model, x)
    nothing_of_ours_left(fastpath)


@pytest.mark.parametrize("meta", [False, True])
def test_interrupt_inside_the_swapped_tensor_restore(monkeypatch, meta, fastpath):
    model, x = bn_net().train(), torch.randn(8, 4)
    before = snapshot(model)
    monkeypatch.setattr(torch_state, "_put_back", sigint_once(torch_state._put_back))
    with pytest.raises(KeyboardInterrupt) if meta else contextlib.nullcontext():  # (real: nothing swapped)
        count_ops(model, x, meta=meta, backward=True)
    assert same(snapshot(model), before)  # no meta tensor left in any slot
    nothing_of_ours_left(fastpath)


# -- preserved_model_state (estimate_training_memory, timing, profiles) ---------------------------
@pytest.mark.parametrize("inject", [sigint_once, raises_once])
@pytest.mark.parametrize("meta", [True, False])
def test_interrupt_inside_preserved_model_state_restore(monkeypatch, inject, meta, fastpath):
    model, x = bn_net(), torch.randn(8, 4)
    model[0].weight.grad = torch.ones_like(model[0].weight)
    before = snapshot(model)
    monkeypatch.setattr(torch_state, "_restore_module", inject(torch_state._restore_module))
    with pytest.raises(KeyboardInterrupt):
        estimate_training_memory(model, x, meta=meta)
    after = snapshot(model)
    assert after["devices"] == {"cpu"}  # parameters not left on meta
    assert same(after, before)  # values, the user's .grad, modes
    nothing_of_ours_left(fastpath)


def test_an_interrupt_swallowed_by_a_weakref_callback_is_raised_after_the_count(fastpath):
    # Python prints and drops an exception raised in a weakref callback ("Exception ignored in ...");
    # a Ctrl-C delivered there must still stop the measurement.
    class DropsAnObject(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            class Token:
                pass

            token = Token()
            weakref.finalize(token, signal.raise_signal, signal.SIGINT)
            del token  # the finalizer runs here; the KeyboardInterrupt it raises is swallowed
            return self.fc(x)

    with pytest.raises(KeyboardInterrupt):
        count_ops(DropsAnObject(), torch.randn(2, 4), meta=True)
    nothing_of_ours_left(fastpath)


# -- threads ------------------------------------------------------------------------------------------
def _in_threads(*fns):
    results, errors = [None] * len(fns), []
    barrier = threading.Barrier(len(fns))

    def run(i, fn):
        try:
            barrier.wait()
            results[i] = fn()
        except BaseException as exc:  # handed back below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


@pytest.mark.parametrize("second", ["count_backward", "count_meta", "training_memory", "network_status"])
def test_two_threads_measuring_one_model_never_change_it_nor_mix_numbers(second):
    # Each pair runs 5 times; every result that comes back is the single-threaded one, every other
    # outcome is a ConcurrentMeasurementError naming the other thread, and the model is untouched.
    model, x = bn_net().train(), torch.randn(8, 4)
    before = snapshot(model)
    expected_count = count_ops(model, x).macs  # 288
    others = {
        "count_backward": lambda: count_ops(model, x, backward=True).macs,
        "count_meta": lambda: count_ops(model, x, meta=True).macs,
        "training_memory": lambda: estimate_training_memory(model, x).peak_bytes,
        "network_status": lambda: TorchProfiler(model, {"test": [(x, torch.zeros(8))]}).compute_network_status(
            batch_size=8, short_print=True, mode="train") and None,
    }
    expected_other = others[second]()
    for _ in range(5):
        results, errors = _in_threads(lambda: count_ops(model, x).macs, others[second])
        assert all(isinstance(e, ConcurrentMeasurementError) for e in errors), errors
        assert results[0] in (None, expected_count) and results[1] in (None, expected_other)
        assert same(snapshot(model), before)


def test_one_profiler_shared_by_four_threads_gives_each_its_own_figures():
    # each thread asks for the MACs at its own batch size: Linear(4, 6) + Linear(6, 2) = 36 MACs per sample
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    data = [(torch.randn(8, 4), torch.zeros(8))]
    profiler = TorchProfiler(model, {"test": data})
    batches = [1, 2, 4, 8]
    for _ in range(3):
        results, errors = _in_threads(*[lambda b=b: profiler.compute_status("macs", batch_size=b) for b in batches])
        assert not errors
        assert results == [36 * b for b in batches]


def test_sixty_real_sigints_at_random_moments_of_a_meta_count_leave_nothing(fastpath):
    # A thread sends SIGINT to the process at a random moment of count_ops(meta=True) on a small
    # transformer, 60 times: each ends in a KeyboardInterrupt or a whole count; after every one the
    # dispatch stack is empty, no hook or thread mode is left, the model is as it was, and the
    # interrupt was never swallowed (a count that returned got no SIGINT, or got it after restoring).
    import os
    import random
    import time

    torch.manual_seed(0)
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2).train()
    x = torch.randn(2, 16, 32)
    before = snapshot(model)
    count_ops(model, x, meta=True)  # (the first count of a process sets things up: not the one to time)
    start = time.perf_counter()
    count_ops(model, x, meta=True)
    duration = time.perf_counter() - start
    rng = random.Random(0)
    interrupted = 0
    for _ in range(60):
        delay = rng.uniform(0, duration * 1.2)
        sent = threading.Event()

        def send():
            time.sleep(delay)
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)

        sender = threading.Thread(target=send)
        try:
            sender.start()  # (a short delay can deliver the signal before start() returns)
            count_ops(model, x, meta=True)
            sender.join()
            time.sleep(0.01)  # (the signal is handled at the next bytecode: here, outside any count)
        except KeyboardInterrupt:
            interrupted += 1
            sender.join()
        except BaseException:  # pragma: no cover - reported below
            sender.join()
            raise
        nothing_of_ours_left(fastpath)
        assert same(snapshot(model), before)
    assert interrupted > 0
