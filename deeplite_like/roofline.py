"""How long a counted model would take on a device: the roofline of its operators (no framework imports).

``DeviceModel`` is a device's peak dense FLOP/s per dtype, memory bandwidth and capacity, each with its
source: the registry ``devices.toml`` shipped with the package (``device_model``), a user's own file
(``load_devices``) or this machine, measured (``calibrate``). ``predict`` prices every ``OpRecord``
of a count (the formula and what it leaves out: its docstring) into a ``Prediction``: per call,
operator, module, phase and total, with MFU, a table of the top ops and a roofline chart.
"""
from __future__ import annotations

import datetime
import math
import os
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

from deeplite_like.errors import check_positive_int
from deeplite_like.reports.charts import PALETTE, RoofPoint, roofline_chart
from deeplite_like.reports.base import format_quantity, format_seconds, strict_json
from deeplite_like.reports.html import document, report_section
from deeplite_like.reports.table import TableReport
from deeplite_like.results import OpCount, OpRecord
from deeplite_like.timing import AUTO, check_num_threads, time_blocks
from deeplite_like.units import format_bytes, format_share, parse_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser before Python 3.11: the tomli package (a dependency there)
    import tomli as tomllib

__all__ = ["DeviceModel", "OpTime", "PEAK_DTYPES", "Prediction", "RooflineRow", "THIS_MACHINE", "calibrate",
           "device_model", "known_devices", "load_devices", "peak_dtype", "predict", "register_device"]

#: The dtypes a device lists a peak for, in the registry's spelling.
PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")

#: Device kinds.
KINDS = ("gpu", "cpu", "edge")

#: The name (and aliases) of the device measured by ``calibrate``.
THIS_MACHINE = "this machine"
_THIS_MACHINE_ALIASES = ("this", "local", "host")

# torch's spelling of a record's dtype -> the peak its arithmetic runs at (every float8_* is fp8)
_RECORD_DTYPES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                  "int8": "int8", "uint8": "int8", "qint8": "int8", "quint8": "int8"}

_DEVICE_KEYS = {"name", "aliases", "kind", "peak_tflops", "bandwidth_gbps", "memory", "sources"}


def _lookup_key(name: str) -> str:
    """``'H100-SXM'``, ``'h100 sxm'`` and ``'h100_sxm'`` are one key: case, ``-``, ``_`` and spaces do not count."""
    return " ".join(str(name).lower().replace("-", " ").replace("_", " ").split())


def peak_dtype(dtype: str, contraction: bool = True) -> str | None:
    """The registry dtype (``PEAK_DTYPES``) whose peak prices arithmetic in ``dtype``, or ``None`` if none does.

    ``dtype`` is torch's spelling (``float32``, ``bfloat16``, ``float8_e4m3fn``, ``int8``) or the
    registry's (``fp32``, ``tf32``, ...). ``tf32`` is a tensor-core mode of matrix products: a
    record that is not a contraction (``contraction=False``: no MACs) runs at the fp32 peak.
    """
    text = str(dtype).lower().removeprefix("torch.")
    key = text if text in PEAK_DTYPES else ("fp8" if text.startswith("float8") else _RECORD_DTYPES.get(text))
    if key == "tf32" and not contraction:
        return "fp32"
    return key


@dataclass(frozen=True)
class DeviceModel:
    """One device as a roofline sees it: what it computes per second and how fast it moves bytes.

    Attributes:
        name: the device's name (``"H100 SXM"``); ``aliases`` other names it is found by.
        kind: ``"gpu"``, ``"cpu"`` or ``"edge"``.
        peak_flops: registry dtype (``PEAK_DTYPES``) -> peak dense FLOP/s (operations/s for
            int8); ``None`` where the device has no such path (or no published figure).
        memory_bandwidth: bytes per second. memory_bytes: capacity in bytes.
        sources: figure -> where it comes from (a datasheet and its URL, a derivation, or a
            measurement): ``"peak"`` covers every peak without a key of its own (``"fp8"``),
            ``"bandwidth"`` and ``"memory"`` the other two. Every figure has one.
    """

    name: str
    kind: str
    peak_flops: Mapping[str, float | None]
    memory_bandwidth: float
    memory_bytes: int
    aliases: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"device {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a device needs a name, got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {KINDS}, got {self.kind!r}")
        unknown = sorted(set(self.peak_flops) - set(PEAK_DTYPES))
        if unknown:
            raise ValueError(f"{where}: unknown dtype(s) {unknown} in its peaks; the dtypes are {PEAK_DTYPES}")
        peaks = {dtype: self.peak_flops.get(dtype) for dtype in PEAK_DTYPES}
        for dtype, peak in peaks.items():
            if peak is not None:
                _check_positive(peak, f"{where}: peak {dtype} FLOP/s")
        if all(peak is None for peak in peaks.values()):
            raise ValueError(f"{where}: give at least one peak ({', '.join(PEAK_DTYPES)})")
        _check_positive(self.memory_bandwidth, f"{where}: memory bandwidth (bytes/s)")
        _check_positive(self.memory_bytes, f"{where}: memory capacity (bytes)")
        sources = {str(key): str(value) for key, value in self.sources.items()}
        figures = [d for d, p in peaks.items() if p is not None] + ["bandwidth", "memory"]
        missing = [f for f in figures if not sources.get(f) and not (f in PEAK_DTYPES and sources.get("peak"))]
        if missing:
            raise ValueError(f"{where}: every figure names its source; none for {missing} (give sources.peak, "
                             "sources.bandwidth, sources.memory, or a source per dtype)")
        object.__setattr__(self, "peak_flops", peaks)
        object.__setattr__(self, "sources", sources)
        object.__setattr__(self, "aliases", tuple(str(alias) for alias in self.aliases))
        object.__setattr__(self, "memory_bandwidth", float(self.memory_bandwidth))
        object.__setattr__(self, "memory_bytes", int(self.memory_bytes))

    def peak(self, dtype: str = "fp32", contraction: bool = True) -> float:
        """Peak FLOP/s for arithmetic in ``dtype`` (either spelling, see ``peak_dtype``); ``ValueError`` if none."""
        key = peak_dtype(dtype, contraction)
        if key is None:
            raise ValueError(f"no peak is listed for dtype {dtype!r}; the registry lists {', '.join(PEAK_DTYPES)} "
                             "(torch's float32, bfloat16, float16, float8_*, int8 and uint8 map onto them)")
        peak = self.peak_flops[key]
        if peak is None:
            has = [d for d in PEAK_DTYPES if self.peak_flops[d] is not None]
            raise ValueError(f"{self.name} has no {key} peak (no such path on it, or none published); it has "
                             f"{', '.join(has)}. Price the records at one of those: predict(..., dtype={has[0]!r})")
        return peak

    def ridge(self, dtype: str = "fp32") -> float:
        """The ridge point in FLOPs per byte: below it an op is memory bound, above it compute bound."""
        return self.peak(dtype) / self.memory_bandwidth

    def source(self, figure: str) -> str:
        """Where ``figure`` (a dtype, ``"bandwidth"`` or ``"memory"``) comes from."""
        if figure in PEAK_DTYPES:
            return self.sources.get(figure) or self.sources["peak"]
        return self.sources[figure]

    def as_dict(self) -> dict:
        return {"name": self.name, "aliases": list(self.aliases), "kind": self.kind,
                "peak_flops": dict(self.peak_flops), "memory_bandwidth": self.memory_bandwidth,
                "memory_bytes": self.memory_bytes, "sources": dict(self.sources)}


def _check_positive(value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive finite number, got {value!r}")


# ------------------------------------------------------------------------------ the registry
_REGISTRY: dict[str, DeviceModel] = {}  # lookup key of every name and alias -> device
_BUILT_IN: list[DeviceModel] = []  # read from devices.toml on first use
_CALIBRATED: dict[Any, DeviceModel] = {}  # threads -> this machine, measured once per process


def _parse_device(entry: Any, where: str) -> DeviceModel:
    """One ``[[device]]`` table of a registry file as a ``DeviceModel``; ``ValueError`` naming ``where``."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a device is a table ([[device]]), got {type(entry).__name__}")
    where = f"{where} ({entry.get('name', 'no name')!r})"
    unknown = sorted(set(entry) - _DEVICE_KEYS)
    missing = sorted({"name", "kind", "peak_tflops", "bandwidth_gbps", "memory", "sources"} - set(entry))
    if unknown or missing:
        raise ValueError(f"{where}: " + "; ".join(
            ([f"unknown key(s) {unknown}"] if unknown else []) + ([f"missing {missing}"] if missing else [])) +
            f". A device has {sorted(_DEVICE_KEYS)} (see deeplite_like/devices.toml)")
    peaks, sources, aliases = entry["peak_tflops"], entry["sources"], entry.get("aliases", [])
    if not isinstance(peaks, dict):
        raise ValueError(f"{where}: peak_tflops is a table of dtype = TFLOP/s, got {peaks!r}")
    if not isinstance(sources, dict):
        raise ValueError(f"{where}: sources is a table of figure = source (peak, bandwidth, memory), got {sources!r}")
    if not isinstance(aliases, list) or not all(isinstance(alias, str) for alias in aliases):
        raise ValueError(f"{where}: aliases is a list of names, got {aliases!r}")
    try:
        for dtype, value in peaks.items():
            _check_positive(value, f"peak_tflops.{dtype}")
        _check_positive(entry["bandwidth_gbps"], "bandwidth_gbps")
        return DeviceModel(name=entry["name"], kind=entry["kind"],
                           peak_flops={dtype: value * 1e12 for dtype, value in peaks.items()},
                           memory_bandwidth=entry["bandwidth_gbps"] * 1e9, memory_bytes=parse_bytes(entry["memory"]),
                           aliases=tuple(aliases), sources=sources)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{where}: {error}") from None


def _read_devices(text: bytes, where: str) -> list[DeviceModel]:
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{where} is not a TOML file: {error}") from None
    entries = data.get("device")
    if not isinstance(entries, list) or not entries or set(data) != {"device"}:
        raise ValueError(f"{where}: expected one or more [[device]] tables and nothing else, got keys "
                         f"{sorted(data)}")
    return [_parse_device(entry, f"{where}: device {index + 1}") for index, entry in enumerate(entries)]


def _registry() -> dict[str, DeviceModel]:
    """The registry, with the built-in devices read from ``devices.toml`` on first use."""
    if not _BUILT_IN:
        text = resources.files("deeplite_like").joinpath("devices.toml").read_bytes()
        _BUILT_IN.extend(_read_devices(text, "deeplite_like/devices.toml"))
        for device in _BUILT_IN:
            _add(device, replace=False)
    return _REGISTRY


def is_this_machine(name: str | DeviceModel) -> bool:
    """Whether ``name`` asks for this machine (``"this machine"``, ``"this"``, ``"local"``, ``"host"``): calibrated."""
    if isinstance(name, DeviceModel):
        return name.name == THIS_MACHINE
    return _lookup_key(name) in (_lookup_key(THIS_MACHINE), *_THIS_MACHINE_ALIASES)


def known_devices() -> list[str]:
    """The names of the registered devices (built in, then the user's), and ``THIS_MACHINE``."""
    names = list(dict.fromkeys(device.name for device in _registry().values()))
    return names + [THIS_MACHINE]


def register_device(device: DeviceModel, replace: bool = False) -> DeviceModel:
    """Add ``device`` to the registry, found by its name and aliases; returns it.

    A name or alias already taken by another device raises ``ValueError`` unless ``replace=True``,
    which removes that device first (so a user can correct a built-in figure).
    """
    if not isinstance(device, DeviceModel):
        raise TypeError(f"register_device takes a DeviceModel, got {type(device).__name__}")
    _registry()
    return _add(device, replace)


def _add(device: DeviceModel, replace: bool) -> DeviceModel:
    keys = [_lookup_key(name) for name in (device.name, *device.aliases)]
    reserved = [k for k in keys if k in (_lookup_key(THIS_MACHINE), *_THIS_MACHINE_ALIASES)]
    if reserved:
        raise ValueError(f"device {device.name!r}: {reserved} name this machine (calibrate); choose another name")
    taken = {_REGISTRY[k].name for k in keys if k in _REGISTRY}
    if taken and not replace:
        raise ValueError(f"device {device.name!r}: its name or an alias is taken by {sorted(taken)}; pass "
                         "replace=True to replace that device, or give it another name")
    for key in [k for k, d in _REGISTRY.items() if d.name in taken]:
        del _REGISTRY[key]
    for key in keys:
        _REGISTRY[key] = device
    return device


def load_devices(path: str | os.PathLike, replace: bool = False) -> list[DeviceModel]:
    """Register the devices of a TOML file written like ``deeplite_like/devices.toml``; returns them.

    Each ``[[device]]`` has ``name``, ``kind``, ``peak_tflops`` (dtype = dense TFLOP/s),
    ``bandwidth_gbps`` (10^9 bytes/s), ``memory`` (``"24 GiB"``), ``sources`` (``peak``,
    ``bandwidth``, ``memory``) and optional ``aliases``. ``replace``: as ``register_device``.
    """
    where = str(path)
    try:
        text = Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"cannot read the device file {where}: {error.strerror or error}") from None
    devices = _read_devices(text, where)
    before = dict(_registry())
    try:
        return [register_device(device, replace=replace) for device in devices]
    except ValueError as error:  # all of the file or none of it
        _REGISTRY.clear()
        _REGISTRY.update(before)
        raise ValueError(f"{where}: {error}") from None


def device_model(name: str | DeviceModel, num_threads: int | None = None) -> DeviceModel:
    """The device called ``name`` or one of its aliases, case, ``-`` and ``_`` aside (``"h100"`` -> H100 SXM).

    ``"this machine"`` (or ``"this"``, ``"local"``, ``"host"``) is measured by ``calibrate`` at
    ``num_threads``, once per process and thread count. An unknown name raises ``ValueError``
    listing the known ones. A ``DeviceModel`` is returned as is.
    """
    if isinstance(name, DeviceModel):
        return name
    key = _lookup_key(name)
    if is_this_machine(name):
        threads = check_num_threads(num_threads)
        if threads not in _CALIBRATED:
            _CALIBRATED[threads] = calibrate(threads)
        return _CALIBRATED[threads]
    device = _registry().get(key)
    if device is None:
        raise ValueError(f"unknown device {name!r}; known devices: {', '.join(known_devices())} (aliases such as "
                         "'h100' work too). Add your own with deeplite_like.roofline.load_devices(path) or "
                         "register_device(DeviceModel(...))")
    return device


# ------------------------------------------------------------------------------ this machine
#: Calibration sizes: an n x n fp32 matmul (2 n^3 FLOPs), a copy of this many bytes (read once, written once).
CALIBRATION_MATMUL_N = 1024
CALIBRATION_COPY_BYTES = 128 * 2**20


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): unknown, reported as 1 byte
        return 1


def calibrate(num_threads: int | None = None, seconds: float = 1.5) -> DeviceModel:
    """``THIS_MACHINE`` measured: fp32 matmul FLOP/s and streaming-copy bytes/s at ``num_threads`` threads.

    Two measurements of about ``seconds / 2`` each, timed by ``timing.time_blocks`` (the repo's one
    timing loop): an ``n x n`` fp32 matmul (``CALIBRATION_MATMUL_N``; ``2 n^3`` FLOPs per call) and a
    copy of ``CALIBRATION_COPY_BYTES`` (more than a last-level cache holds) from one buffer to
    another, counted as read + written (``2 x`` its size per call, as STREAM's Copy counts it). Each
    rate is the best block's, as STREAM reports. Only fp32 is measured: the other dtypes have no peak
    (price their records with ``predict(..., dtype="fp32")``). Torch is used when installed (its
    thread count set to ``num_threads`` and restored after; ``None`` keeps it), else NumPy (whose
    BLAS threads cannot be set here: ``num_threads`` must then be ``None``). Memory capacity is the
    machine's physical memory.
    """
    threads = check_num_threads(num_threads)
    if threads == AUTO:
        raise ValueError("calibrate measures at one thread count: pass num_threads as an int, or None to keep "
                         "the framework's")
    _check_positive(seconds, "seconds")
    n, size = CALIBRATION_MATMUL_N, CALIBRATION_COPY_BYTES
    try:  # deferred: importing deeplite_like never imports a framework (docs/architecture.rst)
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        previous = torch.get_num_threads()
        try:
            if threads is not None:
                torch.set_num_threads(threads)
            used, library = torch.get_num_threads(), f"torch {torch.__version__}"
            a, b = torch.rand(n, n), torch.rand(n, n)
            source, target = torch.ones(size // 4), torch.zeros(size // 4)
            matmul_s = _best(lambda: torch.mm(a, b), seconds / 2)
            copy_s = _best(lambda: target.copy_(source), seconds / 2)
        finally:
            torch.set_num_threads(previous)
    else:
        import numpy
        if threads is not None:
            raise ValueError(f"num_threads={threads}: without torch, calibrate times NumPy, whose BLAS threads it "
                             "cannot set; install torch or leave num_threads out")
        used, library = "the BLAS library's own", f"NumPy {numpy.__version__}"
        a, b = numpy.random.rand(n, n).astype(numpy.float32), numpy.random.rand(n, n).astype(numpy.float32)
        source, target = numpy.ones(size // 4, numpy.float32), numpy.zeros(size // 4, numpy.float32)
        matmul_s = _best(lambda: numpy.matmul(a, b), seconds / 2)
        copy_s = _best(lambda: numpy.copyto(target, source), seconds / 2)
    stamp = f"measured on this machine, {datetime.date.today().isoformat()}, {used} thread{'s' if used != 1 else ''}"
    return DeviceModel(
        name=THIS_MACHINE, kind="cpu", aliases=_THIS_MACHINE_ALIASES,
        peak_flops={"fp32": 2 * n**3 / matmul_s}, memory_bandwidth=2 * size / copy_s,
        memory_bytes=_physical_memory(),
        sources={"peak": f"{stamp}: {library} fp32 matmul {n}x{n} (2n^3 FLOPs a call), best block",
                 "bandwidth": f"{stamp}: {library} copy of {format_bytes(size)} (read + written), best block",
                 "memory": "this machine's physical memory (os.sysconf)"})


def _best(call: Any, budget: float) -> float:
    """Seconds per call of the fastest block of ``call`` timed for about ``budget`` seconds."""
    blocks = time_blocks(call, lambda: None, warmup=1, min_run_time=budget, min_blocks=3)
    return min(blocks.times)


# ------------------------------------------------------------------------------ prediction
class OpTime(NamedTuple):
    """One operator call priced on a device: ``compute_s`` = flops / peak, ``memory_s`` = bytes / bandwidth.

    ``bytes`` is the unfused or the fused figure (``Prediction.fused``); ``peak_dtype`` the registry
    dtype whose peak priced it (``""`` when it has no FLOPs).
    """

    op: str
    module: str
    phase: str
    flops: int
    bytes: int
    peak_dtype: str
    compute_s: float
    memory_s: float

    @property
    def time_s(self) -> float:
        """The roofline: the slower of computing and moving."""
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"`` (whichever takes longer; a tie is compute), ``"none"`` at 0 time."""
        if self.time_s == 0:
            return "none"
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte; ``None`` when it moves no bytes."""
        return self.flops / self.bytes if self.bytes else None


@dataclass
class RooflineRow:
    """Predicted figures summed under one name (an operator, a module, a phase, the model).

    ``time_s`` sums the calls' roofline times (no overlap between calls); ``compute_bound_s`` and
    ``memory_bound_s`` split it by each call's bound; ``ideal_compute_s`` sums flops / peak (MFU's
    numerator).
    """

    calls: int = 0
    flops: int = 0
    bytes: int = 0
    time_s: float = 0.0
    compute_bound_s: float = 0.0
    memory_bound_s: float = 0.0
    ideal_compute_s: float = 0.0

    def add(self, op: OpTime) -> None:
        self.calls += 1
        self.flops += op.flops
        self.bytes += op.bytes
        self.time_s += op.time_s
        self.ideal_compute_s += op.compute_s
        if op.bound == "compute":
            self.compute_bound_s += op.time_s
        elif op.bound == "memory":
            self.memory_bound_s += op.time_s

    @property
    def bound(self) -> str:
        """Where most of the time goes: ``"compute"``, ``"memory"`` or ``"none"`` (no time)."""
        if self.time_s == 0:
            return "none"
        return "compute" if self.compute_bound_s >= self.memory_bound_s else "memory"

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.bytes else None

    @property
    def flops_per_s(self) -> float | None:
        """Predicted achieved FLOP/s: flops / time."""
        return self.flops / self.time_s if self.time_s else None

    def as_dict(self) -> dict:
        return {"calls": self.calls, "flops": self.flops, "bytes": self.bytes, "time_s": self.time_s,
                "bound": self.bound, "intensity": self.intensity, "compute_bound_s": self.compute_bound_s,
                "memory_bound_s": self.memory_bound_s, "ideal_compute_s": self.ideal_compute_s}


def _modules_up(name: str) -> list[str]:
    """``"a.b.c"`` -> ``["a.b.c", "a.b", "a", ""]``: the module and every enclosing one, the model last."""
    names = [name]
    while name:
        name = name.rpartition(".")[0]
        names.append(name)
    return names


@dataclass
class Prediction:
    """What ``predict`` returns: every call priced on ``device``, and sums per operator, module and phase.

    ``by_module`` is nested (a module includes its descendants; ``""`` is the model),
    ``by_operator`` and ``by_phase`` are flat; ``total`` is the model's. ``notes`` say what was
    assumed (a dtype priced at another's peak). Times are in seconds.
    """

    device: DeviceModel
    ops: list[OpTime]
    fused: bool
    dtype: str | None
    by_operator: dict[str, RooflineRow]
    by_module: dict[str, RooflineRow]
    by_phase: dict[str, RooflineRow]
    total: RooflineRow
    notes: list[str]

    @property
    def time_s(self) -> float:
        return self.total.time_s

    @property
    def main_dtype(self) -> str:
        """The peak dtype that priced the most FLOPs (``fp32`` when none did)."""
        flops: dict[str, int] = {}
        for op in self.ops:
            if op.peak_dtype:
                flops[op.peak_dtype] = flops.get(op.peak_dtype, 0) + op.flops
        return max(flops, key=flops.__getitem__) if flops else "fp32"

    @property
    def ridge(self) -> float:
        """The device's ridge point (FLOPs per byte) at ``main_dtype``."""
        return self.device.ridge(self.main_dtype)

    def top(self, n: int = 10, by: str = "operator") -> list[tuple[str, RooflineRow]] | list[OpTime]:
        """The ``n`` slowest, by predicted time: operators (``by="operator"``) or single calls (``"call"``)."""
        n = check_positive_int(n, "n", "top", "operators or calls")
        if by == "call":
            return sorted(self.ops, key=lambda op: -op.time_s)[:n]
        if by != "operator":
            raise ValueError(f"top(by={by!r}): expected 'operator' or 'call'")
        return sorted(self.by_operator.items(), key=lambda item: -item[1].time_s)[:n]

    def mfu(self, measured_s: float) -> float:
        """Model FLOPs utilisation of a measured time: the peaks' time for the FLOPs / ``measured_s``.

        With one dtype that is FLOPs / measured / peak; with several, each call's FLOPs count at the
        peak that priced them.
        """
        _check_positive(measured_s, "measured_s")
        return self.total.ideal_compute_s / measured_s

    def bandwidth_utilisation(self, measured_s: float) -> float:
        """Bytes moved / ``measured_s`` / the device's bandwidth."""
        _check_positive(measured_s, "measured_s")
        return self.total.bytes / measured_s / self.device.memory_bandwidth

    def as_dict(self, calls: bool = False) -> dict:
        """JSON-ready figures; ``calls=True`` adds every priced call (long for a large model)."""
        data = {"device": self.device.as_dict(), "fused": self.fused, "dtype": self.dtype,
                "main_dtype": self.main_dtype, "ridge_flops_per_byte": self.ridge, "time_s": self.time_s,
                "total": self.total.as_dict(),
                "by_operator": {k: v.as_dict() for k, v in self.by_operator.items()},
                "by_module": {k: v.as_dict() for k, v in self.by_module.items()},
                "by_phase": {k: v.as_dict() for k, v in self.by_phase.items()}, "notes": list(self.notes)}
        if calls:
            data["calls"] = [{**op._asdict(), "time_s": op.time_s, "bound": op.bound} for op in self.ops]
        return data

    def to_json(self, indent: int | None = 2, calls: bool = False) -> str:
        return strict_json(self.as_dict(calls), indent=indent)

    def top_table(self, n: int = 10) -> TableReport:
        """The ``n`` operators with the longest predicted time, with their bound: a ``TableReport``."""
        total = self.time_s
        rows = [{"operator": name, "calls": row.calls, "flops": row.flops, "bytes": row.bytes,
                 "intensity": row.intensity, "time_s": row.time_s,
                 "share": 100 * row.time_s / total if total else 0.0, "bound": row.bound}
                for name, row in self.top(n)]
        view = "fused" if self.fused else "unfused"
        notes = [f"total predicted: {format_seconds(total)} on {self.device.name} ({view} bytes; "
                 f"{self.main_dtype} ridge point {self.ridge:.3g} FLOPs/byte)",
                 "time = max(FLOPs / peak, bytes / bandwidth) per call, summed; launch overhead, caches and "
                 "overlap between calls are left out", *self.notes]
        return TableReport(
            f"Predicted time on {self.device.name}: the {len(rows)} slowest operator{'s' if len(rows) != 1 else ''}",
            ["operator", "calls", "flops", "bytes", "intensity", "time_s", "share", "bound"], rows,
            formatters={"flops": lambda v: format_quantity(v, "count", "FLOPs"), "bytes": format_bytes,
                        "intensity": lambda v: "" if v is None else f"{v:.3g}", "time_s": format_seconds,
                        "share": format_share},
            headers={"flops": "FLOPs", "intensity": "FLOPs/B", "time_s": "time", "share": "% time"},
            notes=notes, drop_order=("calls", "intensity", "flops", "bytes", "share"))

    def chart(self, by: str = "operator", measured: Mapping[str, float] | None = None) -> str:
        """A roofline chart (SVG) with one point per operator (``by="operator"``) or module (``"module"``).

        A point's y is its predicted FLOP/s, or its achieved one where ``measured`` (name -> seconds)
        gives a time; the roofs drawn are the peaks of the dtypes that priced calls.
        """
        if by not in ("operator", "module"):
            raise ValueError(f"chart(by={by!r}): expected 'operator' or 'module'")
        rows = self.by_operator if by == "operator" else self.by_module
        measured = dict(measured or {})
        points = []
        for name, row in rows.items():
            seconds = measured.get(name, row.time_s)
            label = name if name or by == "operator" else "(model)"
            rate = row.flops / seconds if seconds else 0.0
            tone = PALETTE[1] if row.bound == "compute" else PALETTE[0]
            kind = "measured" if name in measured else "predicted"
            points.append(RoofPoint(label, row.intensity or 0.0, rate, tone,
                                    f"{label}: {row.intensity or 0:.3g} FLOPs/byte, {rate:.3g} FLOP/s {kind} "
                                    f"({row.bound} bound, {row.calls} calls)"))
        used = sorted({op.peak_dtype for op in self.ops if op.peak_dtype} or {self.main_dtype})
        ceilings = {dtype: self.device.peak(dtype) for dtype in used}
        return roofline_chart(f"Roofline on {self.device.name}", points, self.device.memory_bandwidth, ceilings,
                              subtitle=f"one point per {by}; orange: compute bound, blue: memory bound"
                                       f"{'; measured where given' if measured else ''}")

    def to_html(self, n: int = 10, by: str = "operator", measured: Mapping[str, float] | None = None) -> str:
        """One self-contained HTML page: the roofline chart (``chart``) above the top-``n`` table (``top_table``).

        A report that has its own page adds the same two parts as sections: ``chart()`` is an
        ``<svg>`` element, ``html.report_section(top_table())`` the table.
        """
        return document(f"Roofline on {self.device.name}",
                        [f'<div class="charts">{self.chart(by, measured)}</div>', report_section(self.top_table(n))],
                        subtitle=f"predicted {format_seconds(self.time_s)}")


def predict(count_or_records: OpCount | Iterable[OpRecord], device: str | DeviceModel, dtype: str | None = None,
            fused: bool = False) -> Prediction:
    """Price every operator call on ``device`` with the roofline model; a ``Prediction``.

    Per call: ``time = max(flops / peak, bytes / bandwidth)``, named ``compute`` or ``memory`` bound
    by the larger term (0 FLOPs and 0 bytes take 0 time); arithmetic intensity = flops / bytes.
    ``bytes`` is ``OpRecord.bytes`` (read + written, unfused), or ``fused_bytes`` with ``fused=True``.

    Which peak: the record's dtype (float32 -> fp32; bfloat16, float16; float8_* -> fp8; int8 and
    uint8 -> int8); ``dtype=`` (``"tf32"``, ``"bf16"``, or torch's spelling) prices every record at
    that one instead. tf32 applies to contractions only (records with MACs): other fp32 arithmetic
    stays at the fp32 peak, as on the hardware. A record with FLOPs but no dtype (a cost priced whole)
    takes the dtype that priced most records; one in a dtype the registry lists no peak for
    (float64, int64) is priced at fp32, and ``notes`` says so. A device without the needed peak (bf16
    on a T4) raises ``ValueError`` naming it.

    What the model leaves out: kernel launch and framework overhead per call (which dominate small
    ops, on a CPU too), caches (a tensor re-read from cache costs no DRAM bandwidth, so small models
    run faster than predicted, and the unfused bytes overcount what a fused kernel moves), overlap
    between calls (their times are summed), the vector units that elementwise arithmetic runs on (it
    is priced at its dtype's tensor peak, which matters little: it is memory bound), clocks below the
    datasheet's boost, sparsity, and communication between devices. Peaks are datasheet figures that
    real kernels reach only in part (a large GEMM: about 60-80 %).
    """
    if isinstance(count_or_records, OpCount) and not count_or_records.bytes_counted:
        raise ValueError("this OpCount was counted without bytes moved, so there is nothing to price; count with "
                         "count_ops(model, ..., bytes_moved=True)")
    device = device_model(device)
    records = list(count_or_records.records if isinstance(count_or_records, OpCount) else count_or_records)
    override = None
    if dtype is not None:
        override = peak_dtype(dtype)
        if override is None:
            raise ValueError(f"dtype={dtype!r}: expected one of {PEAK_DTYPES} or torch's spelling (float32, bfloat16, "
                             "float16, float8_e4m3fn, int8)")
    seen: dict[str, int] = {}
    for record in records:
        key = peak_dtype(record.dtype) if record.dtype else None
        if key is not None:
            seen[key] = seen.get(key, 0) + 1
    usual = max(seen, key=seen.__getitem__) if seen else "fp32"
    fallback: dict[str, int] = {}
    ops = []
    for record in records:
        moved = record.fused_bytes if fused else record.bytes
        key = ""
        if record.flops:
            contraction = record.macs > 0
            key = peak_dtype(override or record.dtype or usual, contraction) or ""
            if not key:
                fallback[record.dtype] = fallback.get(record.dtype, 0) + 1
                key = "fp32"
        compute_s = record.flops / device.peak(key, contraction=record.macs > 0) if key else 0.0
        ops.append(OpTime(record.op, record.module, record.phase, int(record.flops), int(moved), key, compute_s,
                          moved / device.memory_bandwidth))
    notes = [f"{calls} call(s) in {name} priced at the fp32 peak (the registry lists no {name} peak)"
             for name, calls in fallback.items()]
    by_operator: dict[str, RooflineRow] = {}
    by_module: dict[str, RooflineRow] = {}
    by_phase: dict[str, RooflineRow] = {}
    total = RooflineRow()
    for op in ops:
        total.add(op)
        by_operator.setdefault(op.op, RooflineRow()).add(op)
        by_phase.setdefault(op.phase, RooflineRow()).add(op)
        for module in _modules_up(op.module):
            by_module.setdefault(module, RooflineRow()).add(op)
    return Prediction(device, ops, fused, override, by_operator, by_module, by_phase, total, notes)
