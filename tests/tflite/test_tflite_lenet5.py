"""The truth check: the zoo's Keras LeNet-5, converted to float and full-int8 TFLite, counts what the Keras
backend counts on the live model; params, size by dtype, peak memory, timing and accuracy through the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # the session fixtures convert LeNet-5 twice (seconds each)

# docs/zoo.rst, LeNet-5 per sample: conv1 28x28x6 x 25 = 117,600; conv2 10x10x16 x 150 = 240,000;
# fc1 120 x 400 = 48,000; fc2 84 x 120 = 10,080; fc3 10 x 84 = 840 -> 416,520 MACs
LENET_MACS = 117_600 + 240_000 + 48_000 + 10_080 + 840
# FLOPs: 2 x MACs + biases (4,704 + 1,600 + 120 + 84 + 10) + ReLUs (4,704 + 1,600 + 120 + 84) + max pools
# (out 14x14x6 x 4 + 5x5x16 x 4 = 4,704 + 1,600)
LENET_FLOPS = 2 * LENET_MACS + 6_518 + 6_508 + 6_304


@pytest.mark.parametrize("which", ["lenet5_float", "lenet5_int8"])
def test_lenet5_file_counts_what_keras_counts(which, request, keras_lenet5):
    from deeplite_like.backends.keras import count_ops as keras_count
    from deeplite_like.backends.tflite import count_ops

    counted = count_ops(request.getfixturevalue(which))
    live = keras_count(keras_lenet5, (1, 32, 32, 1))
    assert (counted.macs, counted.flops) == (live.macs, live.flops) == (LENET_MACS, LENET_FLOPS)
    assert counted.untracked == {} and counted.batch_size == 1
    # The converter fuses each ReLU into its CONV_2D / FULLY_CONNECTED (fused RELU, 1 per output), so the conv row
    # holds Keras' Conv2D + ReLU FLOPs; Flatten becomes SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE, all free.
    ops = {name: (s.macs, s.flops) for name, s in counted.by_operator.items()}
    keras_ops = {name: (s.macs, s.flops) for name, s in live.by_operator.items()}
    assert ops["CONV_2D"] == (keras_ops["Conv2D"][0], keras_ops["Conv2D"][1] + 4_704 + 1_600)
    assert ops["FULLY_CONNECTED"] == (keras_ops["Dense"][0], keras_ops["Dense"][1] + 120 + 84)
    assert ops["MAX_POOL_2D"] == keras_ops["MaxPooling2D"]
    assert all(ops[name] == (0, 0) for name in ("SHAPE", "STRIDED_SLICE", "PACK", "RESHAPE"))


def test_params_and_size_by_dtype(lenet5_float, lenet5_int8):
    from deeplite_like.backends.tflite.compute import weight_stats
    from deeplite_like.backends.tflite.graph import load_model

    f, q = weight_stats(load_model(lenet5_float)), weight_stats(load_model(lenet5_int8))
    # 61,706 parameters (docs/zoo.rst): kernels 150 + 2,400 + 48,000 + 10,080 + 840 = 61,470, biases 6+16+120+84+10 = 236
    assert f.params == q.params == 61_706
    assert f.by_dtype == {"FLOAT32": {"params": 61_706, "bytes": 61_706 * 4}}
    # int8: kernels 1 byte each, biases int32 4 bytes: the kernels' bytes are exactly 1/4 of float's
    assert q.by_dtype == {"INT8": {"params": 61_470, "bytes": 61_470}, "INT32": {"params": 236, "bytes": 944}}
    assert 4 * q.by_dtype["INT8"]["bytes"] == f.by_dtype["FLOAT32"]["bytes"] - 236 * 4
    # per-channel quantization: one scale (float32, 4 B) and one zero point (int64, 8 B) per output channel, for each
    # kernel and each bias: 2 x 236 x 12 = 5,664 B; the shape constants (int32, no scale) are index data
    assert (f.quantization_bytes, q.quantization_bytes) == (0, 5_664)
    assert q.bytes == 61_470 + 944 + 5_664 and f.bytes == 246_824
    assert f.index_data_elements == q.index_data_elements > 0


def test_peak_activation_memory(lenet5_float, lenet5_int8):
    from deeplite_like.backends.tflite import load_model, tensor_lifetimes

    # At pool1: the input (32x32x1, live all run) + conv1's output 28x28x6 + pool1's output 14x14x6 =
    # 1,024 + 4,704 + 1,176 = 6,904 elements; float32 4 bytes each = 27,616 B, int8 1 byte = 6,904 B
    for data, width in ((lenet5_float, 4), (lenet5_int8, 1)):
        stats = tensor_lifetimes(load_model(data))
        assert stats.peak_bytes == 6_904 * width and stats.peak_at.startswith("MAX_POOL_2D#1")
        assert stats.input_bytes == 1_024 * width and stats.output_bytes == 10 * width
    # RESHAPE (Flatten) is a view: at its step the float file holds the input 4,096 B + pool2's output 5x5x16 x 4 =
    # 1,600 B (the reshape's output is that storage, counted once) + PACK's int32 [2] shape 8 B = 5,704 B
    # (a copy would make it 7,304)
    stats = tensor_lifetimes(load_model(lenet5_float))
    assert [v for k, v in stats.by_step.items() if k.startswith("RESHAPE#7")] == [5_704]


def test_the_interpreters_arena_beside_our_live_tensor_peak(lenet5_float, lenet5_int8):
    """LiteRT's read-write arena (read from its tensors' addresses) against our live-tensor peak."""
    from deeplite_like.backends.tflite import load_model, resize_inputs, tensor_lifetimes
    from deeplite_like.backends.tflite.graph import interpreter_arena

    # The arena's widest moment is conv1, not pool1: the input 32x32x1 (1,024 elements) + conv1's im2col
    # buffer, 28x28 output positions x a 5x5x1 patch = 19,600 elements + conv1's output 28x28x6 = 4,704.
    # float32: 4,096 + 78,400 + 18,816 = 101,312 B (each a multiple of 64, the arena's alignment);
    # int8: 1,024 + 19,600 padded to 19,648 + 4,704 = 25,376 B
    for data, width, arena in ((lenet5_float, 4, 101_312), (lenet5_int8, 1, 25_376)):
        stats = interpreter_arena(data)
        assert (stats.span, stats.scratch) == (arena, 19_600 * width)
        ours = tensor_lifetimes(load_model(data))
        # ours: 6,904 elements at pool1 (test_peak_activation_memory); conv1's step holds 1,024 + 4,704 = 5,728
        assert ours.peak_bytes == 6_904 * width < stats.span
        conv1 = next(v for k, v in ours.by_step.items() if k.startswith("CONV_2D#0"))
        assert conv1 == 5_728 * width and stats.span - conv1 - stats.scratch == (0 if width == 4 else 48)
        # our planner (greedy by size, 64-byte offsets) lays out the same live tensors without scratch: the
        # aligned peak at pool1, input 1,024 x w + conv1 out 4,704 x w + pool1 out 1,176 x w, each rounded to 64:
        # float 4,096 + 18,816 + 4,736 = 27,648 B; int8 1,024 + 4,736 + 1,216 = 6,976 B
        assert ours.arena_bytes == (27_648 if width == 4 else 6_976)
    # at batch 2 every buffer doubles (all are per sample, and 64-byte multiples in float): 202,624 B
    assert interpreter_arena(resize_inputs(lenet5_float, (2, 32, 32, 1))).span == 2 * 101_312


def test_profiler_for_bytes_and_path_and_status(lenet5_int8, tmp_path):
    from deeplite_like.backends import profiler_for
    from deeplite_like.backends.tflite import TFLiteProfiler

    path = tmp_path / "lenet5_int8.tflite"
    path.write_bytes(lenet5_int8)
    for model in (lenet5_int8, path, str(path)):
        assert type(profiler_for(model)) is TFLiteProfiler
    before = path.read_bytes()
    status = profiler_for(path).compute_network_status(min_run_time=0.02, num_threads=1)
    values = {k: v.value if hasattr(v, "value") else v for k, v in status.items()}
    assert values["macs"] == LENET_MACS and values["total_params"] == 61_706
    assert values["model_size"] == 61_470 + 944 + 5_664 and values["peak_activation_memory"] == 6_904
    # the interpreter's own arena (test_the_interpreters_arena_beside_our_live_tensor_peak): 25,376 B int8;
    # our planner's: the three tensors live at pool1, each rounded up to 64 B: input 1,024 + conv1 out 4,704 ->
    # 4,736 + pool1 out 1,176 -> 1,216 = 6,976 B
    assert values["activation_arena"] == 25_376
    profiler = profiler_for(path)
    profiler.compute_status("activation_arena")
    details = profiler.get_status("activation_arena").details
    assert (details["source"], details["planned"].value, details["kernel_scratch"].value) == ("interpreter", 6_976,
                                                                                               19_600)
    assert values["execution_time"] > 0
    assert path.read_bytes() == before  # the user's file is never changed


def test_eval_metric_runs_through_the_interpreter(keras_lenet5, lenet5_float, lenet5_int8):
    from deeplite_like.backends.tflite import ComputeEvalMetric, TFLiteProfiler

    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 32, 32, 1)).astype(np.float32)
    labels = np.argmax(keras_lenet5.predict(x, verbose=0), axis=1)  # the live model's own answers

    def accuracy(model, loader):
        hits = total = 0
        for xb, yb in loader:
            hits += int((np.argmax(model.predict(xb), axis=1) == yb).sum())
            total += len(yb)
        return hits / total

    results = {}
    for name, data in (("float", lenet5_float), ("int8", lenet5_int8)):
        profiler = TFLiteProfiler(data, {"test": [(x[:8], labels[:8]), (x[8:], labels[8:])]}, register_defaults=False)
        profiler.register_profiler_function(ComputeEvalMetric(accuracy, "accuracy"))
        status = profiler.compute_network_status()
        results[name] = status["accuracy"].value if hasattr(status["accuracy"], "value") else status["accuracy"]
    assert results["float"] == 1.0  # the same float arithmetic gives the same top-1 on every sample
    # deeplite's own helpers, through the interpreter: top-1 100 % in percent; top-10 of 10 classes holds every target
    from deeplite_like.backends.tflite import get_accuracy, get_missclass, get_topk

    read = TFLiteProfiler(lenet5_float).tflite_model
    loader = [(x[:8], labels[:8]), (x[8:], labels[8:])]
    assert (get_accuracy(read, loader), get_missclass(read, loader)) == (100.0, 0.0)
    assert get_topk(read, loader, topk=(1, 10)) == {"top-1": 100.0, "top-10": 100.0}
    assert 0.0 <= results["int8"] <= 1.0
    # the int8 output, dequantized, is near the float one (quantization error only)
    float_out = TFLiteProfiler(lenet5_float).tflite_model.predict(x)
    int8_out = TFLiteProfiler(lenet5_int8).tflite_model.predict(x)
    assert float_out.shape == int8_out.shape == (16, 10)
    assert np.abs(float_out - int8_out).max() < 0.25 * np.abs(float_out).max()


def test_bytes_moved_per_operator_of_the_int8_file(lenet5_int8):
    """Each operator reads its distinct inputs (weights and the int32 bias included) and writes its outputs
    at their stored types; SHAPE reads no data and RESHAPE is a view: no record for either.

    conv1: input 1x32x32x1 int8 (1,024) + W 6x5x5x1 (150) + bias 6 x int32 (24) = 1,198 read, 28x28x6
    (4,704) written; fc1: its input 400 + W 120x400 (48,000) + bias 120 x 4 (480) = 48,880 read, 120 written.
    """
    from deeplite_like.backends.tflite import count_ops

    count = count_ops(lenet5_int8, bytes_moved=True, warn_untracked=False)
    rows = {(r.op, r.macs): (r.bytes_read, r.bytes_written, r.dtype) for r in count.records}
    assert rows[("CONV_2D", 117_600)] == (1_198, 4_704, "int8")
    assert rows[("FULLY_CONNECTED", 48_000)] == (48_880, 120, "int8")
    assert not any(r.op in ("SHAPE", "RESHAPE") for r in count.records)
    assert count.bytes == sum(r.bytes for r in count.records) and count.bytes_counted
