"""Roofline: the device registry, calibration, predicted time per call / operator / module, table and chart."""
from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest

from deeplite_like import roofline
from deeplite_like.results import OpCount, OpRecord
from deeplite_like.roofline import DeviceModel, device_model, load_devices, predict, register_device
from deeplite_like.units import format_bytes

SOURCES = {"peak": "made up for the tests", "bandwidth": "made up", "memory": "made up"}
# 1e12 FLOP/s, 1e11 bytes/s: the ridge point is 1e12 / 1e11 = 10 FLOPs per byte
TOY = DeviceModel("Toy", "gpu", {"fp32": 1e12}, 1e11, 2**30, sources=SOURCES)

# 2e9 FLOPs / 1e12 = 2 ms of compute; 1e8 bytes / 1e11 = 1 ms of memory -> compute bound, 2 ms
BIG_MATMUL = OpRecord("aten.mm", "enc.0.attn", "forward", 1_000_000_000, 2_000_000_000, 60_000_000, 40_000_000,
                      "float32", 100_000_000)
# 1e6 FLOPs / 1e12 = 1 us; 1e9 bytes / 1e11 = 10 ms -> memory bound, 10 ms
BIG_COPY = OpRecord("aten.add", "enc.1", "backward", 0, 1_000_000, 500_000_000, 500_000_000, "float32", 100_000_000)
NOTHING = OpRecord("aten.view", "", "forward", 0, 0, 0, 0, "float32", 0)


@pytest.fixture(autouse=True)
def _registry_as_shipped():
    """Each test sees the built-in registry only: what a test registers is removed after it."""
    registry = dict(roofline._registry())
    calibrated = dict(roofline._CALIBRATED)
    yield
    roofline._REGISTRY.clear()
    roofline._REGISTRY.update(registry)
    roofline._CALIBRATED.clear()
    roofline._CALIBRATED.update(calibrated)


def test_compute_bound_and_memory_bound_calls():
    p = predict([BIG_MATMUL, BIG_COPY], TOY)
    matmul, copy = p.ops
    assert (matmul.compute_s, matmul.memory_s) == pytest.approx((2e-3, 1e-3))
    assert matmul.time_s == pytest.approx(2e-3) and matmul.bound == "compute"
    assert matmul.intensity == pytest.approx(20.0)  # 2e9 FLOPs / 1e8 bytes
    assert copy.time_s == pytest.approx(10e-3) and copy.bound == "memory"
    assert copy.intensity == pytest.approx(1e-3)  # 1e6 / 1e9
    assert p.time_s == pytest.approx(12e-3)  # 2 ms + 10 ms: calls do not overlap
    assert p.ridge == pytest.approx(10.0)  # 1e12 / 1e11
    assert p.total.bound == "memory"  # 10 ms of the 12 are memory bound
    assert (p.total.compute_bound_s, p.total.memory_bound_s) == pytest.approx((2e-3, 10e-3))


def test_a_call_that_computes_and_moves_nothing_takes_no_time():
    op = predict([NOTHING], TOY).ops[0]
    assert (op.time_s, op.bound, op.intensity, op.peak_dtype) == (0.0, "none", None, "")


def test_sums_per_module_are_nested_and_per_operator_and_phase_flat():
    p = predict(OpCount(records=[BIG_MATMUL, BIG_COPY, NOTHING], bytes_counted=True), TOY)
    seconds = {name: row.time_s for name, row in p.by_module.items()}
    # enc.0.attn: the matmul (2 ms); enc.0 and enc hold it too; enc.1: the add (10 ms);
    # enc: 2 + 10 = 12 ms; the model "": everything, the view (0 s) included
    assert seconds == pytest.approx({"enc.0.attn": 2e-3, "enc.0": 2e-3, "enc": 12e-3, "": 12e-3, "enc.1": 10e-3})
    assert {name: row.calls for name, row in p.by_module.items()} == {
        "enc.0.attn": 1, "enc.0": 1, "enc": 2, "": 3, "enc.1": 1}
    assert p.by_module["enc"].flops == 2_001_000_000 and p.by_module["enc"].bytes == 1_100_000_000
    assert {k: v.time_s for k, v in p.by_operator.items()} == pytest.approx(
        {"aten.mm": 2e-3, "aten.add": 10e-3, "aten.view": 0.0})
    assert {k: v.time_s for k, v in p.by_phase.items()} == pytest.approx({"forward": 2e-3, "backward": 10e-3})
    assert p.by_module[""].as_dict() == p.total.as_dict()


def test_a_count_without_bytes_is_refused():
    with pytest.raises(ValueError, match=r"counted without bytes moved.*bytes_moved=True"):
        predict(OpCount(macs=1, flops=2), TOY)
    with pytest.raises(ValueError, match=r"top\(n=...\) must be >= 1 \(operators or calls\), got 0"):
        predict([BIG_MATMUL], TOY).top(0)


def test_fused_view_prices_fused_bytes():
    # fused_bytes 1e8 / 1e11 = 1 ms (unfused: 1e9 / 1e11 = 10 ms); 1e6 FLOPs still take 1 us
    op = predict([BIG_COPY], TOY, fused=True).ops[0]
    assert op.bytes == 100_000_000 and op.time_s == pytest.approx(1e-3) and op.bound == "memory"


MIXED = DeviceModel("Mixed", "gpu", {"fp32": 1e12, "tf32": 4e12, "bf16": 8e12, "fp16": 8e12, "fp8": 16e12,
                                     "int8": 32e12}, 1e15, 2**30, sources=SOURCES)


@pytest.mark.parametrize("dtype, macs, flops, override, seconds, peak", [
    ("bfloat16", 1, 8_000_000_000, None, 1e-3, "bf16"),          # 8e9 / 8e12
    ("float16", 1, 8_000_000_000, None, 1e-3, "fp16"),           # 8e9 / 8e12
    ("float8_e4m3fn", 1, 16_000_000_000, None, 1e-3, "fp8"),     # 16e9 / 16e12
    ("uint8", 1, 32_000_000_000, None, 1e-3, "int8"),            # 32e9 / 32e12
    ("float32", 1, 1_000_000_000, None, 1e-3, "fp32"),           # 1e9 / 1e12: fp32 unless tf32 is asked for
    ("float32", 1, 4_000_000_000, "tf32", 1e-3, "tf32"),         # a contraction in tf32: 4e9 / 4e12
    ("float32", 0, 1_000_000_000, "tf32", 1e-3, "fp32"),         # no MACs: tf32 is a matmul mode, 1e9 / 1e12
    ("float32", 0, 8_000_000_000, "bf16", 1e-3, "bf16"),         # the override prices every record: 8e9 / 8e12
    ("float32", 0, 8_000_000_000, "torch.bfloat16", 1e-3, "bf16"),
])
def test_which_peak_prices_a_record(dtype, macs, flops, override, seconds, peak):
    # bytes 0: the time is the compute term alone
    op = predict([OpRecord("op", "", "forward", macs, flops, 0, 0, dtype)], MIXED, dtype=override).ops[0]
    assert op.peak_dtype == peak and op.time_s == pytest.approx(seconds)


def test_records_without_a_listed_peak_say_how_they_were_priced():
    records = [OpRecord("aten.mm", "", "forward", 1, 8_000_000_000, 0, 0, "bfloat16"),
               OpRecord("attention", "", "forward", 1, 8_000_000_000, 0, 0, ""),      # priced whole: no dtype
               OpRecord("aten.add", "", "forward", 0, 1_000_000_000, 0, 0, "float64")]
    p = predict(records, MIXED)
    # the undtyped record takes bf16, the dtype of most records (float64 has no peak, so bf16 is the only one):
    # 8e9 / 8e12 = 1 ms; float64 has no peak listed: fp32, 1e9 / 1e12 = 1 ms, and a note says so
    assert [op.peak_dtype for op in p.ops] == ["bf16", "bf16", "fp32"]
    assert p.time_s == pytest.approx(3e-3)
    assert p.notes == ["1 call(s) in float64 priced at the fp32 peak (the registry lists no float64 peak)"]
    with pytest.raises(ValueError, match=r"dtype='fp64': expected one of"):
        predict(records, MIXED, dtype="fp64")


def test_a_device_without_the_dtype_says_which_it_has():
    bf16 = OpRecord("aten.mm", "", "forward", 1, 2, 0, 0, "bfloat16")
    with pytest.raises(ValueError, match=r"T4 has no bf16 peak .*it has fp32, fp16, int8.*dtype='fp32'"):
        predict([bf16], "t4")
    # 2 FLOPs at the T4's fp16 peak, 65 TFLOP/s
    assert predict([bf16], "t4", dtype="fp16").time_s == pytest.approx(2 / 65e12)


def test_mfu_and_bandwidth_utilisation_of_a_measured_time():
    p = predict([BIG_MATMUL], TOY)
    # 2e9 FLOPs in 4 ms = 5e11 FLOP/s of a 1e12 peak: 0.5; 1e8 bytes in 4 ms = 2.5e10 B/s of 1e11: 0.25
    assert p.mfu(4e-3) == pytest.approx(0.5)
    assert p.bandwidth_utilisation(4e-3) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="measured_s must be a positive"):
        p.mfu(0)


def test_top_ops_table_and_json():
    p = predict([BIG_MATMUL, BIG_COPY, NOTHING, BIG_COPY], TOY)
    assert [name for name, _ in p.top(2)] == ["aten.add", "aten.mm"]  # 20 ms (2 calls of 10), then 2 ms
    assert [op.op for op in p.top(1, by="call")] == ["aten.add"]
    table = p.top_table(2)
    assert table.title == "Predicted time on Toy: the 2 slowest operators"
    rows = [list(row) for row in table.to_table().rows]
    # aten.add: 2 calls, 2e6 FLOPs, 2e9 bytes = 1.863 GiB, 1e-3 FLOPs/byte, 20 ms = 20/22 = 90.9 % of 22 ms
    assert rows[0] == ["aten.add", "2", "2.000 MFLOPs", "1.863 GiB", "0.001", "20.00 ms", "90.9 %", "memory"]
    # aten.mm: 2e9 FLOPs, 1e8 bytes = 95.37 MiB, 20 FLOPs/byte, 2 ms = 9.1 %
    assert rows[1] == ["aten.mm", "1", "2.000 GFLOPs", "95.37 MiB", "20", "2.000 ms", "9.1 %", "compute"]
    assert "total predicted: 22.00 ms on Toy" in table.to_text()
    data = json.loads(p.to_json(calls=True))
    assert data["time_s"] == pytest.approx(22e-3) and data["ridge_flops_per_byte"] == pytest.approx(10.0)
    assert data["by_operator"]["aten.mm"]["bound"] == "compute" and len(data["calls"]) == 4
    assert data["calls"][0]["bound"] == "compute" and data["device"]["name"] == "Toy"
    assert data["by_operator"]["aten.view"]["intensity"] is None


def test_chart_draws_the_roof_and_one_point_per_operator():
    svg = predict([BIG_MATMUL, BIG_COPY, NOTHING], TOY).chart()
    # aten.mm and aten.add are drawn; aten.view has no FLOPs and no bytes: left out, and counted
    assert svg.count('class="point"') == 2
    assert "1 not drawn (no FLOPs or no bytes)" in svg
    # one slope (1e11 B/s = 100 GB/s) and one ceiling (fp32, 1e12 = 1 TFLOP/s)
    assert svg.count('class="roof"') == 2
    assert "100.0 GB/s" in svg and "fp32 1.000 TFLOP/s" in svg
    assert "aten.mm: 20 FLOPs/byte, 1e+12 FLOP/s predicted (compute bound, 1 calls)" in svg
    # a measured time moves the point: 2e9 FLOPs in 4 ms = 5e11 FLOP/s
    assert "5e+11 FLOP/s measured" in predict([BIG_MATMUL], TOY).chart(measured={"aten.mm": 4e-3})
    modules = predict([BIG_MATMUL, BIG_COPY], TOY).chart(by="module")
    assert modules.count('class="point"') == 5  # enc.0.attn, enc.0, enc, the model, enc.1


def test_html_page_holds_the_chart_and_the_table():
    page = predict([BIG_MATMUL, BIG_COPY], TOY).to_html(n=5)
    assert page.startswith("<!DOCTYPE html>") and page.count('class="point"') == 2
    assert "<title>Roofline on Toy</title>" in page and "predicted 12.00 ms" in page  # 2 ms + 10 ms
    assert page.index("roofline-chart") < page.index("Predicted time on Toy: the 2 slowest operators")


def test_chart_draws_a_ceiling_per_dtype_used():
    records = [OpRecord("aten.mm", "", "forward", 1, 8_000_000, 1000, 0, "bfloat16"),
               OpRecord("aten.add", "", "forward", 0, 1000, 8000, 0, "float32")]
    svg = predict(records, MIXED).chart()
    assert svg.count('class="roof"') == 3  # the slope, the bf16 and the fp32 ceilings
    assert "bf16 8.000 TFLOP/s" in svg and "fp32 1.000 TFLOP/s" in svg


# ------------------------------------------------------------------------------ the registry
def test_lookup_by_name_or_alias_in_any_case():
    assert device_model("h100").name == "H100 SXM"
    assert device_model("H100-sxm").name == device_model("h100_SXM").name == "H100 SXM"
    assert device_model("a100").name == "A100 80GB" and device_model("A100 40GB").name == "A100 40GB"
    assert device_model("RPI5").name == "Raspberry Pi 5"
    assert device_model(TOY) is TOY


def test_unknown_device_lists_the_known_ones():
    with pytest.raises(ValueError) as error:
        device_model("h1000")
    message = str(error.value)
    assert message.startswith("unknown device 'h1000'; known devices: H100 SXM, H100 PCIe, H200, A100 40GB")
    assert "this machine" in message and "load_devices(path)" in message


def test_registry_holds_dense_datasheet_figures_each_with_its_source():
    names = roofline.known_devices()
    assert names == ["H100 SXM", "H100 PCIe", "H200", "A100 40GB", "A100 80GB", "L4", "L40S", "T4", "RTX 4090",
                     "Jetson AGX Orin", "Raspberry Pi 5", "Apple M1", "Apple M2", "Apple M3", "this machine"]
    for name in names[:-1]:
        device = device_model(name)
        for figure in [d for d, peak in device.peak_flops.items() if peak is not None] + ["bandwidth", "memory"]:
            assert re.search(r"https://\S+", device.source(figure)), (name, figure)
    h100 = device_model("H100 SXM")
    # datasheet: BF16 1,979 TFLOPS with sparsity -> 989.5 dense; FP8 3,958 -> 1,979; 3.35 TB/s; 80 GiB
    assert h100.peak("bf16") == pytest.approx(989.5e12) and h100.peak("fp8") == pytest.approx(1979e12)
    assert h100.memory_bandwidth == pytest.approx(3.35e12) and h100.memory_bytes == 80 * 2**30
    assert h100.ridge("bf16") == pytest.approx(989.5e12 / 3.35e12)  # 295.4 FLOPs per byte
    # A100 datasheet: dense TF32 156, BF16 312; no fp8 on Ampere
    a100 = device_model("A100 80GB")
    assert (a100.peak("tf32"), a100.peak("bf16"), a100.peak_flops["fp8"]) == (156e12, 312e12, None)
    # Raspberry Pi 5: 4 cores x 2.4e9 x 2 pipes x 4 lanes x 2 = 153.6 GFLOP/s; 4267e6 x 4 bytes = 17.07 GB/s
    pi = device_model("Raspberry Pi 5")
    assert pi.peak("fp32") == pytest.approx(153.6e9) and pi.memory_bandwidth == pytest.approx(17.07e9)
    assert pi.peak_flops["bf16"] is None


def test_a_user_toml_device(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('''
[[device]]
name = "My NPU"
aliases = ["npu"]
kind = "edge"
bandwidth_gbps = 50
memory = "8 GiB"
[device.peak_tflops]
fp16 = 4.0
int8 = 8.0
[device.sources]
peak = "vendor sheet"
bandwidth = "vendor sheet"
memory = "vendor sheet"
''')
    (npu,) = load_devices(path)
    assert device_model("NPU") is npu and "My NPU" in roofline.known_devices()
    # 4 TFLOP/s = 4e12; 50 GB/s = 5e10; 8 GiB = 8 x 2^30 bytes; fp16 ridge 4e12 / 5e10 = 80 FLOPs/byte
    assert npu.peak("float16") == 4e12 and npu.memory_bandwidth == 5e10 and npu.memory_bytes == 8 * 2**30
    assert npu.ridge("fp16") == pytest.approx(80.0) and npu.peak_flops["fp32"] is None
    with pytest.raises(ValueError, match=r"taken by \['My NPU'\]; pass replace=True"):
        load_devices(path)
    # a file registers all its devices or none: the second one here collides with the first
    twice = tmp_path / "twice.toml"
    twice.write_text(path.read_text().replace("My NPU", "Other NPU").replace('"npu"', '"other"') * 2)
    with pytest.raises(ValueError, match=r"twice.toml: device 'Other NPU': its name or an alias is taken"):
        load_devices(twice)
    with pytest.raises(ValueError, match="unknown device 'other'"):
        device_model("other")
    assert load_devices(path, replace=True)[0].name == "My NPU"


@pytest.mark.parametrize("change, message", [
    (("memory = \"8 GiB\"", "memory = \"8 GiB\"\nclock = 1"), r"device 1 \('Bad'\): unknown key\(s\) \['clock'\]"),
    (("peak = \"x\"\n", ""), r"\('Bad'\): device 'Bad': every figure names its source; none for \['fp16'\]"),
    (("fp16 = 4.0", "fp16 = -4.0"), r"\('Bad'\): peak_tflops.fp16 must be a positive finite number, got -4.0"),
    (("fp16 = 4.0", "fp64 = 4.0"), r"unknown dtype\(s\) \['fp64'\] in its peaks"),
    (("kind = \"edge\"", "kind = \"tpu\""), r"kind must be one of \('gpu', 'cpu', 'edge'\), got 'tpu'"),
    (("[[device]]", "[[devices]]"), r"expected one or more \[\[device\]\] tables and nothing else"),
    (("name = \"Bad\"", "name = \"h100\""), r"bad.toml: device 'h100': its name or an alias is taken by \['H100 SXM'\]"),
    (("[device.peak_tflops]", "sources = \"x\"\n[device.peak_tflops]"),
     r"sources is a table of figure = source \(peak, bandwidth, memory\), got 'x'"),
    (("kind = \"edge\"", "kind = \"edge\"\naliases = \"bad\""), r"aliases is a list of names, got 'bad'"),
])
def test_a_bad_user_file_names_the_file_the_device_and_the_fault(tmp_path, change, message):
    text = ('[[device]]\nname = "Bad"\nkind = "edge"\nbandwidth_gbps = 50\nmemory = "8 GiB"\n'
            '[device.peak_tflops]\nfp16 = 4.0\n[device.sources]\npeak = "x"\nbandwidth = "x"\nmemory = "x"\n')
    path = tmp_path / "bad.toml"
    if "sources = " in change[1]:  # a sources that is not a table: the [device.sources] table goes
        text = text[:text.index("[device.sources]")]
    path.write_text(text.replace(*change))
    with pytest.raises(ValueError, match=message):
        load_devices(path)


def test_register_device_refuses_this_machines_names():
    with pytest.raises(ValueError, match="name this machine"):
        register_device(DeviceModel("Local", "cpu", {"fp32": 1.0}, 1.0, 1, sources=SOURCES))
    register_device(TOY)
    assert device_model("toy") is TOY


# ------------------------------------------------------------------------------ this machine
def test_this_machine_is_calibrated_once_per_thread_count(monkeypatch):
    calls = []
    monkeypatch.setattr(roofline, "_CALIBRATED", {})  # (another test of this process may have calibrated)
    monkeypatch.setattr(roofline, "calibrate", lambda threads: calls.append(threads) or TOY)
    assert device_model("this machine", num_threads=1) is TOY and device_model("LOCAL", num_threads=1) is TOY
    assert calls == [1]
    with pytest.raises(ValueError, match="num_threads must be >= 1"):
        device_model("this", num_threads=0)


@pytest.mark.slow  # importing torch and two short timings: about 2.5 s here
def test_calibrate_measures_positive_figures_and_restores_the_thread_count():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    start = time.perf_counter()
    device = roofline.calibrate(num_threads=target, seconds=0.2)
    assert time.perf_counter() - start < 2  # two 0.1 s budgets, the buffers' allocation and a warm-up each
    assert torch.get_num_threads() == before
    peak = device.peak("fp32")
    assert math.isfinite(peak) and peak > 1e8 and device.memory_bandwidth > 1e8 and device.memory_bytes > 2**20
    assert device.name == "this machine" and device.peak_flops["bf16"] is None
    thread_text = f"{target} thread{'s' if target != 1 else ''}"
    assert re.match(rf"measured on this machine, \d{{4}}-\d\d-\d\d, {thread_text}: torch ", device.source("fp32"))
    assert "copy of 128.0 MiB (read + written)" in device.source("bandwidth")
    with pytest.raises(ValueError, match="one thread count"):
        roofline.calibrate(num_threads="auto")


def test_the_docs_registry_table_is_the_registry():
    # docs/roofline.rst lists every built-in device: name, kind, dense TFLOP/s per dtype ("-": none),
    # GB/s and memory, one row each; this keeps the page and devices.toml the same
    text = (Path(__file__).resolve().parents[2] / "docs" / "roofline.rst").read_text(encoding="utf-8")
    rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    for name in roofline.known_devices()[:-1]:
        device = device_model(name)
        peaks = ["-" if device.peak_flops[d] is None else f"{device.peak_flops[d] / 1e12:g}"
                 for d in roofline.PEAK_DTYPES]
        cells = [device.name, device.kind, *peaks, f"{device.memory_bandwidth / 1e9:g}",
                 format_bytes(device.memory_bytes)]
        assert cells in rows, f"docs/roofline.rst: no row {cells}"
        assert device.source("bandwidth") in text, f"docs/roofline.rst misses {name}'s bandwidth source"
