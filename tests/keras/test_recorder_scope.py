"""The layer recorder is model-scoped and thread-safe; layers have one naming everywhere.

The recorder sets an instance attribute ``call`` on the layers of one model, records only the
thread that entered it, and removes the attributes in ``finally``; ``keras.layers.Layer`` is
never touched. Every part of the backend names layers with ``counting.recorder.named_layers``.
"""
import threading

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import deeplite_like  # noqa: E402
from deeplite_like.backends.keras.counting import count_ops  # noqa: E402
from deeplite_like.backends.keras.counting.engine import run_recorded  # noqa: E402
from deeplite_like.backends.keras.counting.recorder import LayerRecorder, SpecMaker, named_layers  # noqa: E402
from deeplite_like.backends.keras.params import layerwise_summary  # noqa: E402

L = keras.layers
ORIGINAL_CALL = keras.layers.Layer.__dict__["__call__"]


def _mlp(prefix):
    return keras.Sequential([keras.Input((4,)), L.Dense(8, name=f"{prefix}_fc1"), L.ReLU(name=f"{prefix}_act"),
                             L.Dense(2, name=f"{prefix}_fc2")], name=prefix)


def _leftovers(*models):
    """Layers that still carry an instance attribute the recorder sets."""
    return [layer.name for model in models for layer in model._flatten_layers(include_self=True, recursive=True)
            if "call" in vars(layer) or "_assert_input_compatibility" in vars(layer)]


def _recorder(model):
    specs = SpecMaker(keras)
    return LayerRecorder(named_layers(model), specs.tree, specs.is_symbolic)


def _run_until(model, x, stop, started):
    while not stop.is_set():
        model(x)
        started.set()


@pytest.mark.parametrize("other_runs", ["model_b", "model_a"])
def test_recording_one_model_ignores_other_threads(other_runs):
    """Thread 2 runs model B (or model A itself) over and over while the main thread records model A.

    model A = Input(4) -> a_fc1 -> a_act -> a_fc2: one forward records 4 calls (the model, its 3 layers).
    Three recorded forwards: 12 records, every one a layer of A, 3 of them the model itself.
    """
    model_a, model_b = _mlp("a"), _mlp("b")
    x = np.ones((2, 4), "float32")
    model_a(x), model_b(x)
    stop, started = threading.Event(), threading.Event()
    other = threading.Thread(target=_run_until, args=(model_b if other_runs == "model_b" else model_a, x, stop,
                                                      started))
    other.start()
    try:
        assert started.wait(30), "the other thread never ran its model"
        with _recorder(model_a) as recorder:
            for _ in range(3):
                model_a(x)
    finally:
        stop.set()
        other.join(30)
    paths = [record.path for record in recorder.records]
    assert paths == ["", "a_fc1", "a_act", "a_fc2"] * 3
    assert {record.layer.name for record in recorder.records} <= {"a", "a_fc1", "a_act", "a_fc2"}
    assert keras.layers.Layer.__dict__["__call__"] is ORIGINAL_CALL
    assert _leftovers(model_a, model_b) == []


def test_two_threads_recording_at_once_see_only_their_own_model():
    """Two recorders, on two models, in two threads, entered and left interleaved (A in, B in, A out, B out)."""
    model_a, model_b = _mlp("a"), _mlp("b")
    x = np.ones((2, 4), "float32")
    model_a(x), model_b(x)
    both_in, a_out = threading.Barrier(2, timeout=30), threading.Event()
    found = {}

    def record(model, name):
        with _recorder(model) as recorder:
            both_in.wait()
            for _ in range(5):
                model(x)
            if name == "b":
                a_out.wait(30)  # B leaves after A: the order a class-level patch would get wrong
        if name == "a":
            a_out.set()
        found[name] = recorder

    threads = [threading.Thread(target=record, args=(m, n)) for m, n in ((model_a, "a"), (model_b, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for name in ("a", "b"):
        assert [r.path for r in found[name].records] == ["", f"{name}_fc1", f"{name}_act", f"{name}_fc2"] * 5
    assert keras.layers.Layer.__dict__["__call__"] is ORIGINAL_CALL
    assert _leftovers(model_a, model_b) == []


def test_the_recorder_is_removed_when_the_forward_raises():
    model = _mlp("a")
    model(np.ones((2, 4), "float32"))
    with pytest.raises(ValueError) as info:
        with _recorder(model) as recorder:
            model(np.ones((2, 5), "float32"))  # a_fc1 expects 4 features
    # The input check of a_fc1 failed before its call: the failure is attributed to a_fc1, with its input.
    failed = recorder.failed_record(info.value)
    assert failed is not None and failed.path == "a_fc1" and failed.args[0].shape == (2, 5)
    assert _leftovers(model) == []


def test_a_call_that_raised_inside_the_forward_is_not_priced():
    """A subclassed model catches the failure of one of its layers and goes on with another.

    fc: Dense(4 -> 3) on batch 2: 2*4*3 = 24 MACs, 48 + bias 6 = 54 FLOPs. The Dense that raised
    (it expects 5 features) ran nothing: not counted, not untracked.
    """
    class Tolerant(keras.Model):
        def __init__(self):
            super().__init__(name="tolerant")
            self.wrong = L.Dense(3, name="wrong")
            self.fc = L.Dense(3, name="fc")

        def call(self, x):
            try:
                return self.wrong(x)
            except ValueError as exc:
                caught.append(exc)
                return self.fc(x)

    caught = []
    model = Tolerant()
    model.wrong.build((None, 5))
    model(np.ones((2, 4), "float32"))
    counted = count_ops(model, np.ones((2, 4), "float32"))
    assert (counted.macs, counted.flops) == (24, 54)
    assert "wrong" not in counted.by_module and counted.untracked == {}
    # the recorder forgets a failure once a call around it returned (it would keep its frames alive)
    recorder = run_recorded(model, np.ones((2, 4), "float32"), training=False, on_failure=lambda exc, rec: exc)
    assert [r.path for r in recorder.records if not r.finished] == [] and recorder.failed_record(caught[-1]) is None


def _twins():
    """A subclassed model with two sibling Dense layers both named 'dup' (5 -> 4 -> 4) and a LayerNormalization.

    params: dup 5*4 + 4 = 24, dup_1 4*4 + 4 = 20, ln 2*4 = 8: 52. Batch 2: dup 2*5*4 = 40 MACs,
    80 + 8 = 88 FLOPs; dup_1 2*4*4 = 32 MACs, 64 + 8 = 72 FLOPs.
    """
    class Twins(keras.Model):
        def __init__(self):
            super().__init__(name="twins")
            self.a = L.Dense(4, name="dup")
            self.b = L.Dense(4, name="dup")
            self.c = L.LayerNormalization(name="ln")

        def call(self, x):
            return self.c(self.b(self.a(x)))

    model = Twins()
    model(np.ones((2, 5), "float32"))
    return model


def test_sibling_layers_with_the_same_name_are_named_alike_everywhere():
    model, x = _twins(), np.ones((2, 5), "float32")
    assert [path for path, _ in named_layers(model)] == ["", "dup", "dup_1", "ln"]
    counted = count_ops(model, x)
    # the summary shows each layer by the last part of its qualified name, indented; the model as "(model)"
    rows = {row["module"].strip().replace("(model)", ""): row for row in layerwise_summary(model, x).rows}
    profile = deeplite_like.get_model_profile(model, args=(x,), print_profile=False, warm_up=0)
    modules = {node.name: node for node in profile.modules()}
    assert set(rows) == set(counted.by_module) == set(modules) == {"", "dup", "dup_1", "ln"}
    assert [(rows[n]["params"], rows[n]["macs"], rows[n]["flops"]) for n in ("", "dup", "dup_1")] == \
        [(52, 72, counted.flops), (24, 40, 88), (20, 32, 72)]
    assert [(modules[n].params, modules[n].macs) for n in ("", "dup", "dup_1")] == [(52, 72), (24, 40), (20, 32)]
    assert rows["dup"]["input_shapes"] == "2x5" and rows["dup_1"]["input_shapes"] == "2x4"
