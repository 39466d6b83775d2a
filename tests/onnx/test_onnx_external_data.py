"""Models whose weights live in an external-data file (every export over 2 GB): counted, sized and profiled from
the graph alone, the weights never read; only small tensors a value is needed of (a ``Reshape`` shape) are read,
and ONNX Runtime reads the rest itself from the model's folder when it runs the file."""
from __future__ import annotations

import ctypes
import json
import os
import resource
import struct
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.external_data_helper import convert_model_to_external_data  # noqa: E402

from deeplite_like.backends.onnx import OnnxProfiler, OnnxSession, count_ops, node_times  # noqa: E402
from deeplite_like.backends.onnx.compute import ComputeComplexity, ComputeMemory, ComputeParams, ComputeSize  # noqa: E402
from deeplite_like.backends.onnx.graph import external_folder, initializer_stats, load_model  # noqa: E402
from tests.cli.conftest import cli  # noqa: E402,F401  (the fixture)

F = TensorProto.FLOAT


class _opens:
    """Which of ``paths`` were opened inside the ``with`` block, by anyone (onnx opens external data in C++, where
    no Python hook sees it): Linux's inotify, read through ctypes; nothing is patched.
    ``opened`` is the set of those paths opened at least once."""

    IN_OPEN, IN_NONBLOCK = 0x20, 0o4000

    def __init__(self, *paths) -> None:
        self.paths = [str(p) for p in paths]
        self.opened: set[str] = set()

    def __enter__(self) -> "_opens":
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK)
        if self.fd < 0:
            pytest.skip("inotify is not available here")
        self.watches = {self.libc.inotify_add_watch(self.fd, p.encode(), self.IN_OPEN): p for p in self.paths}
        return self

    def __exit__(self, *exc) -> None:
        try:
            while True:
                events, offset = os.read(self.fd, 65536), 0
                while offset + 16 <= len(events):  # struct inotify_event: int wd, u32 mask, cookie, len; name[len]
                    wd, mask, _, length = struct.unpack_from("iIII", events, offset)
                    if mask & self.IN_OPEN and wd in self.watches:
                        self.opened.add(self.watches[wd])
                    offset += 16 + length
        except BlockingIOError:  # no event left
            pass
        finally:
            os.close(self.fd)


def _external(name: str, dims, location: str, elem_type=F) -> onnx.TensorProto:
    """An initializer whose bytes are at ``location`` (offset 0), with no data in the proto."""
    tensor = onnx.TensorProto(name=name, data_type=elem_type, dims=list(dims), data_location=TensorProto.EXTERNAL)
    width = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    for key, value in (("location", location), ("offset", "0"), ("length", str(int(np.prod(dims)) * width))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


K, N = 40_000, 16_384


@pytest.fixture
def llm_sized(tmp_path):
    """A MatMul by a [40000, 16384] fp32 weight (2,621,440,000 bytes, over protobuf's 2 GB) stored in a sparse
    file that was never written (``truncate``: no disk used, reading it would cost 2.6 GB of memory), then a
    Reshape whose shape ``[2, -1]`` is itself external (16 bytes, written: a value shape inference needs)."""
    (tmp_path / "w.bin").open("wb").truncate(K * N * 4)
    np.array([2, -1], dtype=np.int64).tofile(tmp_path / "shape.bin")
    nodes = [helper.make_node("MatMul", ["a", "w"], ["y"], name="proj"),
             helper.make_node("Reshape", ["y", "shape"], ["z"], name="flat")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", F, ["batch", K])],
                              [helper.make_tensor_value_info("z", F, None)],
                              [_external("w", (K, N), "w.bin"), _external("shape", (2,), "shape.bin", TensorProto.INT64)])
    path = tmp_path / "llm.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    assert (tmp_path / "w.bin").stat().st_blocks == 0  # sparse: the 2.6 GB take no disk
    return path


def test_model_over_2gb_is_counted_sized_and_profiled_without_reading_its_weights(llm_sized):
    if not sys.platform.startswith("linux"):
        pytest.skip("watches the data file with Linux's inotify")
    start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    weights, shape = llm_sized.parent / "w.bin", llm_sized.parent / "shape.bin"
    with _opens(weights, shape) as watch:
        counted = count_ops(llm_sized, batch=2)
        stats = initializer_stats(load_model(llm_sized))
        profiler = OnnxProfiler(llm_sized, dims={"batch": 2}, register_defaults=False)
        for function in (ComputeComplexity(), ComputeParams(), ComputeSize(), ComputeMemory()):
            profiler.register_profiler_function(function)
        profiler.compute_network_status()
    assert watch.opened == {str(shape)}  # the 16-byte shape was read (shape inference); the 2.6 GB never opened
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start) < 1024 * 1024  # peak RSS grew < 1 GiB
    # MACs: 2 rows x 16,384 outputs x K 40,000 = 1,310,720,000; FLOPs 2 x MACs (no bias; Reshape free).
    assert (counted.macs, counted.flops, counted.untracked) == (1_310_720_000, 2_621_440_000, {})
    # params 40,000 x 16,384 = 655,360,000 fp32, 4 bytes each = 2,621,440,000 B; the int64 shape is index data.
    assert (stats.params, stats.bytes, stats.index_data) == (655_360_000, 2_621_440_000, 2)
    status = dict(profiler.status_items())
    assert (status["macs"], status["total_params"], status["model_size"]) == (1_310_720_000, 655_360_000,
                                                                            2_621_440_000)
    # peak at the MatMul: a (2, 40000) fp32 320,000 B + y (2, 16384) 131,072 B = 451,072 (z is a view of y);
    # footprint = the weights 2,621,440,000 + 451,072 = 2,621,891,072.
    assert (status["peak_activation_memory"], status["memory_footprint"]) == (451_072, 2_621_891_072)


def test_a_copy_of_the_loaded_proto_is_refused_as_any_proto_with_external_data(llm_sized):
    loaded = load_model(llm_sized)
    assert external_folder(loaded) == llm_sized.parent.resolve()
    copy = onnx.ModelProto()
    copy.CopyFrom(loaded)  # a copy does not know the folder: its external data would be read from nowhere
    assert external_folder(copy) is None
    with pytest.raises(ValueError, match="initializer 'w' stores its data in external file 'w.bin'.*pass the model's path"):
        count_ops(copy, batch=2)


def _small_model():
    """Conv (bias) -> Reshape by an initializer shape -> com.microsoft.FusedMatMul, with random weights."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
               for name, shape in (("cw", (4, 3, 3, 3)), ("cb", (4,)), ("mw", (256, 10)))]
    weights.append(numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape"))
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Reshape", ["c", "shape"], ["r"], name="flat"),
             helper.make_node("FusedMatMul", ["r", "mw"], ["y"], domain="com.microsoft", alpha=1.0, name="head")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", F, None)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])


def test_small_model_with_external_data_counts_and_runs_as_its_inline_twin(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    inline = _small_model()
    external = onnx.ModelProto()
    external.CopyFrom(inline)
    convert_model_to_external_data(external, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    path = tmp_path / "small.onnx"
    onnx.save_model(external, str(path))
    # Conv: (1, 4, 8, 8) = 256 outputs x 3 x 3 x 3 = 6,912 MACs, + 256 bias; FusedMatMul (its output shape is
    # read from an ONNX Runtime run, which reads the weights from the folder): 10 outputs x K 256 = 2,560 MACs.
    # MACs 9,472; FLOPs 2 x 9,472 + 256 = 19,200.
    by_path, by_proto = count_ops(path), count_ops(inline)
    assert (by_path.macs, by_path.flops, by_path.untracked) == (9_472, 19_200, {})
    assert {k: (v.macs, v.flops) for k, v in by_path.by_operator.items()} == \
        {k: (v.macs, v.flops) for k, v in by_proto.by_operator.items()}
    # params 108 + 4 + 2,560 = 2,672 (the int64 shape is index data), 4 bytes each: 10,688 B
    stats = initializer_stats(load_model(path))
    assert (stats.params, stats.bytes) == (2_672, 10_688) == (initializer_stats(inline).params,
                                                              initializer_stats(inline).bytes)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = ort.InferenceSession(inline.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(OnnxSession(path).predict(x), expected, rtol=1e-5)
    profiler = OnnxProfiler(path, inputs=x)
    profiler.compute_network_status(min_run_time=0.01)
    assert profiler.status_get("macs") == 9_472 and profiler.status_get("execution_time") > 0
    # ORT's per-node profile of a named copy (its session reads the weights from the folder too): all 3 joined
    times = node_times(path, inputs=x, repeats=1, optimization="disabled")
    assert [(n.name, n.macs, n.time_s is not None) for n in times.nodes] == [
        ("conv", 6_912, True), ("flat", 0, True), ("head", 2_560, True)]


def test_the_command_line_profiles_the_model_over_2gb_without_reading_its_weights(cli, llm_sized):
    pytest.importorskip("onnxruntime")
    if not sys.platform.startswith("linux"):
        pytest.skip("watches the data file with Linux's inotify")
    with _opens(llm_sized.parent / "w.bin") as watch:  # the CLI's loaded proto remembers its folder
        code, out, err = cli("profile", str(llm_sized), "--input-shape", "a=2x40000", "--metrics",
                             "macs,params,size,memory", "--format", "json", "--no-progress")
    assert code == 0, err
    assert watch.opened == set()
    values = {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]}
    # the hand-derived figures of the test above: 1,310,720,000 MACs, 655,360,000 params, 2,621,440,000 B
    assert (values["macs"], values["total_params"], values["model_size"]) == (1_310_720_000, 655_360_000,
                                                                            2_621_440_000)
