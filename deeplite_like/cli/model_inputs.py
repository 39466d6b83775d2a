"""Model inputs on the command line: ``--input-shape`` (repeatable) or ``--inputs FILE``.

Shapes include the batch axis (``1,3,224,224``); tensors made from shapes are drawn from a
fixed seed (standard normal), so two runs see the same inputs. A PyTorch model gets torch
tensors in the dtype of its first floating-point parameter; a Keras model gets float32 numpy
arrays. ``--inputs`` reads real inputs: a ``.pt`` file (a tensor, a tuple / list of tensors, or a
dict of keyword tensors; read with ``torch.load(weights_only=True)``), a ``.npy`` array or a
``.npz`` archive (``arr_0, arr_1, ...`` positional, other names keyword). A numpy file's size is
read from its headers before any array is (``check_numpy_sizes``): one that declares more than
the memory here, or more than it holds (a zip bomb's members), is refused with the estimate.

``--dtype float16|bfloat16`` profiles a copy of the model cast to a lower precision
(``cast_copy``): the model as loaded is never changed. A deep copy is cast
(``Module.to(dtype)``), and the inputs' floating-point tensors with it (integer tensors such as
token ids stay as they are). PyTorch models only.
"""
from __future__ import annotations

import copy
import dataclasses
import pickle
import re
import zipfile
from pathlib import Path
from typing import IO, Any

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading import LoadedModel
from deeplite_like.cli.loading.onnx_files import onnx_inputs
from deeplite_like.cli.loading.tflite_files import tflite_inputs
from deeplite_like.cli.loading.preflight import check_input_bytes, shape_bytes
from deeplite_like.cli.loading.torch_files import require_torch_kind
from deeplite_like.units import format_bytes

SEED = 0
_SHAPE = re.compile(r"^\s*\d+(\s*[,x]\s*\d+)*\s*$")
_NAMED = re.compile(r"^\s*([A-Za-z_][\w.:/-]*)\s*=(.*)$")


class NamedShape(tuple):
    """A shape given as ``NAME=1x3x224x224``: the input it is for (an ONNX graph input's name) in ``.name``."""

    name: str | None = None


def parse_shape(text: str) -> tuple[int, ...]:
    """``'1,3,224,224'`` or ``'1x3x224x224'`` -> ``(1, 3, 224, 224)``; every size must be >= 1.

    ``'input=1x3x224x224'`` names the input (a ``NamedShape``; ONNX files only).
    """
    named = _NAMED.match(text or "")
    if named:
        shape = NamedShape(parse_shape(named.group(2)))
        shape.name = named.group(1)
        return shape
    if not _SHAPE.match(text or ""):
        raise UsageError(f"bad input shape {text!r}: expected positive integers separated by commas, "
                         "batch axis first", "e.g. --input-shape 1,3,224,224")
    shape = tuple(int(part) for part in re.split(r"[,x]", text.replace(" ", "")))
    if any(size < 1 for size in shape):
        raise UsageError(f"bad input shape {text!r}: every size must be at least 1", "e.g. --input-shape 1,3,224,224")
    return shape


def resolve_inputs(loaded: LoadedModel, shapes: list[tuple[int, ...]] | None,
                   inputs_file: str | None) -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` to profile ``loaded`` with: the file, the shapes, or the spec's default."""
    if loaded.framework in ("onnx", "tflite") and inputs_file is not None:
        if shapes:
            raise UsageError("--inputs and --input-shape both given", "give one: the arrays fix the shapes")
        return _read_inputs(Path(inputs_file), loaded.framework)  # numpy arrays; names checked by the backend
    if loaded.framework == "onnx":
        return onnx_inputs(loaded, shapes or [])
    if loaded.framework == "tflite":
        return tflite_inputs(loaded, shapes or [])
    if inputs_file is not None:
        return _read_inputs(Path(inputs_file), loaded.framework)
    if any(getattr(shape, "name", None) for shape in shapes or []):
        raise UsageError("--input-shape NAME=SHAPE names an ONNX graph input; this model takes its inputs in order",
                         "drop the NAME=, e.g. --input-shape 1,3,224,224")
    if shapes:
        _check_shapes(shapes, loaded)
        return tuple(_random(shape, loaded) for shape in shapes), {}
    if loaded.example is not None:
        return loaded.example
    if loaded.input_shapes:
        return tuple(_random(shape, loaded) for shape in loaded.input_shapes), {}
    raise UsageError(f"{loaded.spec!r}: the input shape of this model is not known",
                     "pass --input-shape (batch axis first, e.g. --input-shape 1,3,224,224; repeat it for "
                     "several inputs) or --inputs FILE")


def _check_shapes(shapes: list[tuple[int, ...]], loaded: LoadedModel) -> None:
    """Refuse ``--input-shape`` tensors too large for this machine, before they are drawn."""
    dtype, itemsize = "float32", 4  # drawn in float32 (then cast to a torch model's dtype)
    if loaded.framework == "torch":
        import torch

        first = next((p.dtype for p in loaded.model.parameters() if p.is_floating_point()), torch.float32)
        dtype, itemsize = str(first).replace("torch.", ""), max(4, torch.empty((), dtype=first).element_size())
    what = " + ".join(f"{'x'.join(map(str, shape))} {dtype}" for shape in shapes)
    option = " ".join(f"--input-shape {','.join(map(str, shape))}" for shape in shapes)
    check_input_bytes(option, what, sum(shape_bytes(shape, itemsize) for shape in shapes))


def _random(shape: tuple[int, ...], loaded: LoadedModel) -> Any:
    if loaded.framework == "torch":
        import torch

        dtype = next((p.dtype for p in loaded.model.parameters() if p.is_floating_point()), torch.float32)
        generator = torch.Generator().manual_seed(SEED)
        return torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
    import numpy as np

    return np.random.default_rng(SEED).standard_normal(shape, dtype=np.float32)


def _read_inputs(path: Path, framework: str) -> tuple[tuple, dict]:
    if not path.is_file():
        raise UsageError(f"--inputs: no such file {str(path)!r}", "save inputs with torch.save(x, 'x.pt') or "
                         "numpy.save('x.npy', x)")
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        args, kwargs = _read_numpy(path)
    elif suffix in (".pt", ".pth"):
        args, kwargs = _read_torch(path)
    else:
        raise UsageError(f"--inputs {str(path)!r}: unknown input file type {suffix!r}",
                         "use a .pt file (torch.save) or a .npy / .npz file (numpy.save / numpy.savez)")
    return _convert(args, kwargs, framework)


def _read_numpy(path: Path) -> tuple[tuple, dict]:
    import numpy as np

    hint = "save plain numeric arrays: numpy.save('x.npy', x) or numpy.savez('x.npz', x, mask=mask)"
    check_numpy_sizes(path, hint)
    try:
        data = np.load(path, allow_pickle=False)  # never True: a pickled object array runs code when loaded
        if isinstance(data, np.ndarray):
            return (data,), {}
        with data:  # an .npz reads each array when it is indexed: the refusal comes from here
            names = list(data.files)
            arrays = {n: data[n] for n in names}
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise UsageError(f"--inputs {str(path)!r} holds an object array (pickled Python objects); loading it "
                             "would run code from the file, so deeplite-like refuses to", hint) from None
        raise UsageError(f"cannot read --inputs {str(path)!r} as a numpy file: {exc}", hint) from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read --inputs {str(path)!r} as a numpy file: {type(exc).__name__}: {exc}", hint) \
            from None
    positional = sorted((n for n in names if re.fullmatch(r"arr_\d+", n)), key=lambda n: int(n[4:]))
    return tuple(arrays[n] for n in positional), {n: arrays[n] for n in names if n not in positional}


def _npy_header(stream: IO[bytes], where: str, hint: str) -> tuple[tuple[int, ...], Any, int]:
    """``(shape, dtype, header bytes)`` of the ``.npy`` stream, read without reading its data."""
    import numpy as np

    start = stream.tell() if stream.seekable() else 0
    try:
        version = np.lib.format.read_magic(stream)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = reader(stream, max_header_size=10_000)
    except (ValueError, OSError, EOFError, SyntaxError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read {where} as a numpy array: {exc}", hint) from None
    header = stream.tell() - start if stream.seekable() else 0
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise UsageError(f"{where} declares the shape {shape!r}, which no array has", hint)
    return tuple(shape), dtype, header


def check_numpy_sizes(path: Path, hint: str) -> None:
    """Refuse a ``.npy`` / ``.npz`` whose arrays, as their headers declare them, would not fit here (before reading).

    Each array's bytes are its declared shape times its dtype's size; an ``.npz`` member's are
    also bounded by the size its zip entry declares unpacked (a 2 MB archive that inflates to
    6.5 GB declares so). An array that declares more data than its file (or entry) holds is
    refused as corrupt: numpy would allocate it before finding out.
    """
    where = f"--inputs {str(path)!r}"
    declared: list[tuple[str, int, int]] = []  # (array, bytes its header declares, bytes the file holds for it)
    if path.suffix.lower() == ".npy":
        with open(path, "rb") as stream:
            shape, dtype, header = _npy_header(stream, where, hint)
        declared.append((path.name, shape_bytes(shape, dtype.itemsize), path.stat().st_size - header))
    else:
        try:
            with zipfile.ZipFile(path) as archive:
                members = [info for info in archive.infolist() if not info.is_dir()]
                unpacked = sum(info.file_size for info in members)
                check_input_bytes("--inputs", f"{len(members)} arrays that unpack to {format_bytes(unpacked)}",
                                  unpacked)
                for info in members:
                    with archive.open(info) as stream:
                        shape, dtype, header = _npy_header(stream, f"{where} ({info.filename})", hint)
                    declared.append((info.filename, shape_bytes(shape, dtype.itemsize),
                                     info.file_size - (header or 0)))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError) as exc:
            raise UsageError(f"cannot read {where} as a numpy file: {type(exc).__name__}: {exc}", hint) from None
    total = sum(nbytes for _, nbytes, _ in declared)
    check_input_bytes("--inputs", f"{len(declared)} array{'s' * (len(declared) != 1)} as their headers declare them",
                      total)
    for name, nbytes, holds in declared:
        if nbytes > max(holds, 0):
            raise UsageError(f"{where}: the array {name!r} declares {format_bytes(nbytes)} of data but the file holds "
                             f"{format_bytes(max(holds, 0))} for it; the file is truncated or corrupt", hint)


def _read_torch(path: Path) -> tuple[tuple, dict]:
    try:
        import torch
    except ImportError:
        raise UsageError(f"--inputs {str(path)!r} is a PyTorch file, and torch is not installed here",
                         "install it with: pip install 'deeplite-like[torch]', or save the inputs with numpy") from None
    require_torch_kind(path, f"--inputs {str(path)!r}", "save the inputs with torch.save(x, path)")
    try:
        data = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UsageError(f"--inputs {str(path)!r} holds pickled Python objects; loading it would run code from "
                         "the file, so deeplite-like refuses to", "save tensors only: torch.save((x, mask), path)") \
            from None
    except Exception as exc:  # the weights-only loader ran nothing; any other failure is a file it cannot read
        raise UsageError(f"cannot read --inputs {str(path)!r} as a PyTorch file: {type(exc).__name__}: {exc}",
                         "save it with torch.save") from None
    if isinstance(data, torch.Tensor):
        return (data,), {}
    if isinstance(data, (tuple, list)) and all(isinstance(x, torch.Tensor) for x in data):
        return tuple(data), {}
    if isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in data.items()):
        return (), dict(data)
    raise UsageError(f"--inputs {str(path)!r} holds a {type(data).__name__} that is not a tensor, a tuple of "
                     "tensors or a dict of named tensors", "torch.save(x, path) or torch.save({'input_ids': ids}, path)")


def _convert(args: tuple, kwargs: dict, framework: str) -> tuple[tuple, dict]:
    """Numpy arrays to torch tensors for a torch model; torch tensors to numpy for a Keras model."""
    def convert(value: Any) -> Any:
        if framework == "torch" and type(value).__module__ == "numpy":
            import torch

            return torch.from_numpy(value)
        if framework != "torch" and type(value).__module__.startswith("torch"):
            return value.numpy()
        return value

    return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}


# ------------------------------------------------------------------------------ --dtype: a cast copy
DTYPES = ("float16", "bfloat16")


def cast_copy(loaded: LoadedModel, inputs: tuple[tuple, dict], dtype: str) -> tuple[LoadedModel, tuple[tuple, dict]]:
    """A ``LoadedModel`` holding a copy of the model cast to ``dtype``, and the inputs cast alike."""
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}: not a supported precision", f"use one of {', '.join(DTYPES)}")
    if loaded.framework != "torch":
        raise UsageError(f"--dtype casts PyTorch models; {loaded.spec!r} is a {loaded.framework} model",
                         "drop --dtype, or set a Keras dtype policy in the model's own code")
    import torch
    from torch.utils._pytree import tree_map

    target = getattr(torch, dtype)
    try:
        model = copy.deepcopy(loaded.model)
    except Exception as exc:  # a model holding something that cannot be copied: say so, never cast the original
        raise UsageError(f"--dtype {dtype}: {loaded.spec!r} cannot be copied to cast it ({type(exc).__name__}: {exc})",
                         "drop --dtype, or build the model in that dtype in its factory") from None
    model.to(target)
    before = {str(p.dtype).removeprefix("torch.") for p in loaded.model.parameters() if p.is_floating_point()}

    def cast(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(target)
        return value

    note = f"profiled a copy cast to {dtype}" + (f" (the model as loaded is {', '.join(sorted(before))})"
                                                  if before else "")
    return dataclasses.replace(loaded, model=model, notes=[*loaded.notes, note]), tree_map(cast, inputs)
