"""``KerasProfiler`` end to end: every built-in metric on LeNet-5 (Keras), evaluation, untouched model."""
import json

import numpy as np
import pytest

keras = pytest.importorskip("keras")
if keras.config.backend() != "tensorflow":
    pytest.skip("exact graph-simulation bytes are for the TensorFlow backend (see test_profiler_torch_backend.py)",
                allow_module_level=True)

from deeplite_like import ComputeEvalMetric, ForwardPass, profiler_for  # noqa: E402
from deeplite_like.backends.keras import KerasProfiler, accuracy, topk_accuracy  # noqa: E402
from deeplite_like.zoo import get  # noqa: E402

# LeNet-5 by hand (docs/zoo.rst; the Keras model is the same network, channels-last), batch 1:
#   conv1 6@5x5 on 32x32x1 -> 28x28x6: 6*28*28 * 1*5*5 = 117,600 MACs
#   conv2 16@5x5 on 14x14x6 -> 10x10x16: 16*10*10 * 6*5*5 = 240,000 MACs
#   fc 400->120: 48,000; 120->84: 10,080; 84->10: 840   ->  416,520 MACs
LENET_MACS = 416_520
# params: conv1 6*25+6 = 156; conv2 16*150+16 = 2,416; fc 48,120 + 10,164 + 850 -> 61,706; fp32 -> 246,824 B
LENET_PARAMS = 61_706
# Peak at batch 2 (graph simulation): input 2x32x32x1 fp32 = 8,192 B; conv1's Conv2D output
# 2x28x28x6 fp32 = 37,632 B and its BiasAdd output (another 37,632) are live together:
# 8,192 + 2 * 37,632 = 83,456 B. Everything later is smaller (ReLU replaces the freed Conv2D
# output: the same 83,456; pool1 output 2x14x14x6 = 9,408 B).
LENET_PEAK_BATCH2 = 83_456


@pytest.fixture()
def lenet():
    entry = get("lenet5_keras")
    return entry.build(), entry.synthetic_splits(batch_size=4, batches=2)


def test_every_builtin_metric_on_lenet(lenet):
    model, splits = lenet
    profiler = KerasProfiler(model, splits, name="lenet5_keras")
    report = profiler.compute_network_status(batch_size=2, min_run_time=0.05)
    status = profiler.status_to_dict()
    assert status["macs"] == 2 * LENET_MACS  # counts are per the batch that ran
    assert profiler.get_status("macs").details["per_sample"] == LENET_MACS
    assert status["total_params"] == status["trainable_params"] == LENET_PARAMS
    assert status["model_size"] == 4 * LENET_PARAMS
    assert status["peak_activation_memory"] == LENET_PEAK_BATCH2
    assert profiler.get_status("peak_activation_memory").details["peak_at"].endswith("in 'conv1'")
    assert status["memory_footprint"] == 4 * LENET_PARAMS + LENET_PEAK_BATCH2  # no state weights
    assert status["execution_time"] > 0
    assert status["throughput"] == pytest.approx(2 / status["execution_time"])
    assert profiler.get_status("execution_time").details["compiled"] == "tf.function"
    rows = {row["key"]: row for row in json.loads(report.to_json())["metrics"]}
    assert rows["macs"]["value"] == 2 * LENET_MACS
    assert "tf.function graph" in rows["peak_activation_memory"]["description"]


def test_flops_of_lenet_by_hand(lenet):
    model, splits = lenet
    # FLOPs = 2*MACs + bias adds + ReLUs + max pools, batch 1 (the PyTorch test's derivation):
    #   biases: conv1 6*28*28 = 4,704; conv2 16*10*10 = 1,600; fc 120 + 84 + 10 = 214  -> 6,518
    #   ReLU (1 FLOP/element): 4,704 + 1,600 + 120 + 84 = 6,508
    #   max pool (K FLOPs per output, K = window 4): 6*14*14 = 1,176 -> 4,704; 16*5*5 = 400 -> 1,600  -> 6,304
    flops = KerasProfiler(model, splits).compute_status("flops", batch_size=1)
    assert flops == 2 * LENET_MACS + 6_518 + 6_508 + 6_304


def test_layerwise_summary_rows(lenet):
    model, splits = lenet
    summary = KerasProfiler(model, splits).compute_status("layerwise_summary", batch_size=2)
    rows = {row["module"]: row for row in summary.rows}
    root, conv1, fc1 = rows[""], rows["conv1"], rows["fc1"]
    assert root["macs"] == 2 * LENET_MACS and root["params"] == LENET_PARAMS and root["type"] == "Sequential"
    # conv1: 2 x 117,600 MACs; 156 params; input 2x32x32x1 -> output 2x28x28x6 = 9,408 floats = 37,632 B
    assert (conv1["macs"], conv1["params"], conv1["type"]) == (235_200, 156, "Conv2D")
    assert (conv1["input_shapes"], conv1["output_shapes"], conv1["activation_bytes"]) == \
        ("2x32x32x1", "2x28x28x6", 37_632)
    assert fc1["macs"] == 2 * 48_000 and fc1["params"] == 48_120 and fc1["output_shapes"] == "2x120"
    assert conv1["macs_share"] == pytest.approx(100 * 117_600 / LENET_MACS)
    assert list(rows)[:3] == ["", "conv1", "relu1"]  # call order, the model first (shown as "(model)")
    assert "(model)" in str(summary)


def test_the_model_is_untouched(lenet):
    model, splits = lenet
    optimizer = keras.optimizers.Adam()
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.get_layer("conv1").trainable = False
    flags = {layer.name: layer.trainable for layer in model.layers}
    weights = [w.numpy().copy() for w in model.weights]
    attributes = set(vars(model))
    KerasProfiler(model, splits).compute_network_status(batch_size=2, min_run_time=0.02)
    assert {layer.name: layer.trainable for layer in model.layers} == flags
    assert [w.trainable for w in model.get_layer("conv1").weights] == [False, False]
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(weights, model.weights))
    assert model.compiled and model.optimizer is optimizer and model.optimizer.iterations.numpy() == 0
    assert set(vars(model)) == attributes and model.predict_function is None


def test_training_mode_leaves_batch_norm_statistics():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.BatchNormalization(),
                              keras.layers.Dropout(0.5), keras.layers.Dense(2)])
    variables = [v.numpy().copy() for v in model.variables]  # weights and the dropout seed state
    splits = {"test": [(np.random.default_rng(0).standard_normal((4, 8), dtype=np.float32), np.zeros(4))]}
    profiler = KerasProfiler(model, splits)
    for key in ("macs", "peak_activation_memory", "layerwise_summary"):
        profiler.compute_status(key, batch_size=4, mode="train")
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(variables, model.variables))


def test_profiler_for_picks_keras_and_whole_arrays_are_batched():
    model = get("lenet5_keras").build()
    x = get("lenet5_keras").example_input(batch_size=5)
    profiler = profiler_for(model, {"test": (x, np.arange(5))}, name="arrays", array_batch_size=2)
    assert isinstance(profiler, KerasProfiler) and profiler.backend_name == "keras"
    assert len(profiler.data_splits["test"]) == 3  # 2 + 2 + 1
    assert profiler.compute_status("macs", batch_size=3) == 3 * LENET_MACS


def test_a_clone_with_new_whole_arrays_batches_them():
    model = get("lenet5_keras").build()
    profiler = KerasProfiler(model, {"test": [(get("lenet5_keras").example_input(1), np.zeros(1))]},
                             array_batch_size=4)
    x = get("lenet5_keras").example_input(batch_size=6)
    clone = profiler.clone(data_splits={"test": (x, np.arange(6))}, name="clone")
    assert [len(b[1]) for b in clone.data_splits["test"]] == [4, 2]
    assert clone.compute_status("macs", batch_size=2) == 2 * LENET_MACS


def test_from_inputs_with_one_example():
    model = get("lenet5_keras").build()
    profiler = KerasProfiler.from_inputs(model, get("lenet5_keras").example_input(batch_size=1), name="one")
    assert profiler.compute_status("macs") == LENET_MACS


def _two_named_inputs():
    a, b = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    return keras.Model({"a": a, "b": b}, keras.layers.Dense(2)(keras.layers.Concatenate()([a, b])))


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_from_inputs_with_a_dict_of_named_inputs(batch):
    # model({"a": (B, 4), "b": (B, 3)}): concatenate (free) then Dense 7 -> 2: 14 MACs per sample,
    # 28 + 2 (bias) = 30 FLOPs per sample; params 7*2 + 2 = 16
    example = {"a": np.ones((3, 4), "float32"), "b": np.ones((3, 3), "float32")}
    profiler = KerasProfiler.from_inputs(_two_named_inputs(), example)
    assert profiler.compute_status("macs", batch_size=batch) == 14 * batch
    assert profiler.compute_status("flops", batch_size=batch) == 30 * batch
    assert profiler.compute_status("total_params") == 16


def test_from_inputs_with_a_dict_runs_every_metric():
    example = {"b": np.ones((2, 3), "float32"), "a": np.ones((2, 4), "float32")}  # key order does not matter
    status = KerasProfiler.from_inputs(_two_named_inputs(), example).compute_network_status(batch_size=2)
    assert status["macs"] == 28 and status["flops"] == 60
    assert status["peak_activation_memory"] > 0 and status["execution_time"] > 0


def test_a_channels_first_batch_is_refused_naming_the_model_and_layout():
    model = get("lenet5_keras").build()
    channels_first = np.zeros((2, 1, 32, 32), dtype="float32")
    with pytest.raises(ValueError) as info:
        KerasProfiler(model, {"test": [channels_first]}).compute_status("peak_activation_memory")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    # batch_size=1 (the default) took 1 of the 2 samples; conv1 expects 1 channel last, finds 32
    assert "layer 'conv1' (Conv2D) on input shapes 1x1x32x32" in notes and "model 'lenet5_keras'" in notes
    assert "expects (None, 32, 32, 1)" in notes and "channels-last" in notes


def test_backward_is_refused_with_where_it_is_supported(lenet):
    model, splits = lenet
    with pytest.raises(NotImplementedError, match="forward passes only.*PyTorch backend"):
        KerasProfiler(model, splits).compute_status("macs", backward=True)


def test_a_torch_model_is_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="needs a Keras 3 model.*TorchProfiler"):
        KerasProfiler(torch.nn.Linear(2, 2), {})


# ------------------------------------------------------------------------------- evaluation
def _identity_model():
    """Dense(3 -> 3) with an identity kernel and no bias: the scores are the inputs."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3, use_bias=False)])
    model.set_weights([np.eye(3, dtype="float32")])
    return model


SCORES = np.array([[0.9, 0.5, 0.1],   # ranks 0, 1, 2
                   [0.1, 0.8, 0.6],   # ranks 1, 2, 0
                   [0.2, 0.3, 0.7],   # ranks 2, 1, 0
                   [0.6, 0.1, 0.3]], dtype="float32")  # ranks 0, 2, 1
LABELS = np.array([0, 2, 1, 1])
# top-1 hits: sample 0 only -> 1/4 = 25 %; top-2 adds samples 1 (2 is 2nd) and 2 (1 is 2nd) -> 75 %;
# top-3 -> 100 %.


def test_accuracy_and_topk_by_hand():
    model = _identity_model()
    loader = [(SCORES[:2], LABELS[:2]), (SCORES[2:], LABELS[2:])]
    assert accuracy(model, loader) == 25.0
    assert topk_accuracy(model, loader, k=2) == 75.0
    assert topk_accuracy(model, loader, k=3) == 100.0
    # (N, 1) labels and one-hot rows mean the same
    assert accuracy(model, [(SCORES, LABELS[:, None])]) == 25.0
    assert topk_accuracy(model, [(SCORES, np.eye(3, dtype="float32")[LABELS])], k=2) == 75.0
    with pytest.raises(ValueError, match="top-4 accuracy needs at least 4 classes"):
        topk_accuracy(model, loader, k=4)


def test_accuracy_as_an_eval_metric_of_the_profiler():
    model = _identity_model()
    profiler = KerasProfiler(model, {"test": (SCORES, LABELS)}, array_batch_size=3)
    profiler.register_profiler_function(ComputeEvalMetric(accuracy, key="top1", unit_name="%"))
    assert profiler.compute_status("top1") == 25.0
    assert profiler.get_status("inference_time").value > 0


def test_accuracy_with_named_inputs_and_targets():
    x = keras.Input((3,), name="scores")
    model = keras.Model({"scores": x}, keras.layers.Dense(3, use_bias=False)(x))
    model.set_weights([np.eye(3, dtype="float32")])
    loader = [{"scores": SCORES, "label": LABELS}]
    assert accuracy(model, loader, forward_pass=ForwardPass(inputs=("scores",), targets="label")) == 25.0
