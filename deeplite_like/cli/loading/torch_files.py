"""PyTorch models named on the command line - files, torchvision, and the hubs (``hf:``, ``timm:``) -
loaded without running untrusted code.

* A TorchScript archive (``torch.jit.save``) is loaded with ``torch.jit.load``: its code is
  TorchScript, run by TorchScript's interpreter, not Python.
* A ``torch.export`` archive (``.pt2``) is checked record by record first
  (``deeplite_like.cli.loading.export_archive``: every pickle must load with
  ``weights_only=True``, no code in shape expressions, operator names or native libraries),
  then loaded with ``torch.export.load`` from the checked copy; its sample inputs, when saved,
  become the default inputs.
* Anything else is read with ``torch.load(weights_only=True)``, which unpickles only tensors
  and plain containers. A pickled module (``torch.save(model)``) needs its classes' code to
  run and is refused, with what to do instead; a ``state_dict`` is weights without a model,
  and the error says how to pair it with a factory (``--weights``).

**Models named by a hub**: ``hf:NAME_OR_DIR[?task=TASK]`` (Hugging Face transformers) and ``timm:NAME``.

``hf:`` reads only the model's configuration (``AutoConfig.from_pretrained``: a local
directory holding ``config.json``, the local cache, or the hub), then builds the architecture
from it on the meta device: no weights are downloaded or allocated, so a 70B model is
profiled in seconds on a laptop. Counting, parameters, size and peak memory are measured on
meta; nothing runs for real, so nothing is timed. Code from the hub is never run
(``trust_remote_code`` stays off): a model that needs its own code is refused with what to do.

The head comes from ``?task=`` (``causal-lm``, ``masked-lm``, ``seq2seq-lm``,
``sequence-classification``, ``token-classification``, ``image-classification``, ``base``),
else from the config's ``architectures`` entry, else the base model. The example input is one
sequence of ``--seq-len`` tokens (default: 128, capped by the model's maximum), or one image
of the config's size; decoders run with ``use_cache=False``, as in training.

``timm:NAME`` is ``timm.create_model(NAME, pretrained=False)`` (random weights) with the
model's own input size.

Imports torch (transformers, timm) only when one of these forms is used.
"""
from __future__ import annotations

import difflib
import importlib.util
import pickle
import re
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import deeplite_like.cli.loading.preflight as preflight
from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading.export_archive import checked_archive
from deeplite_like.cli.loading.preflight import (EXPORT_SUFFIXES, LoadedModel, PICKLE, ZIP, check_input_bytes,
                                                 describe, kind_of, require_framework, require_known_model)
from deeplite_like.units import format_bytes


_UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")
_WEIGHTS_UNPICKLER = re.compile(r"WeightsUnpickler error:\s*([^\n]+(?:\n(?!\n)[^\n]*)*)")
_STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model", "module", "net", "weights")
SAVE_HINT = ("save the model in a form that loads without running Python code: TorchScript "
             "(torch.jit.script(model).save('model.pt')) or torch.export "
             "(torch.export.save(torch.export.export(model, (x,)), 'model.pt2')); or save "
             "model.state_dict() and pass it with --weights FILE to the model's factory "
             "(deeplite-like profile models.py:build --weights FILE)")


def _torch(spec: str) -> Any:
    require_framework("torch", spec)
    import torch

    return torch


def _archive_members(path: Path) -> list[str]:
    if not zipfile.is_zipfile(path):
        return []
    with zipfile.ZipFile(path) as archive:
        return archive.namelist()


def load_torch_file(spec: str, path: Path) -> LoadedModel:
    """A TorchScript, ``torch.export`` or pickled PyTorch file (the last one only if it is safe)."""
    torch = _torch(spec)
    if path.suffix.lower() not in EXPORT_SUFFIXES:  # a .pt2 archive is checked record by record
        require_torch_kind(path, f"{spec!r}", SAVE_HINT)
    members = _archive_members(path)
    name = path.stem
    if any("/code/" in m for m in members) or any(m.endswith("/constants.pkl") for m in members):
        with warnings.catch_warnings():  # torch.jit.load's deprecation notice is not the user's concern here
            warnings.filterwarnings("ignore", message=r".*torch\.jit\.load.*deprecated", category=DeprecationWarning)
            try:
                model = torch.jit.load(str(path), map_location="cpu")
            except RuntimeError as exc:
                raise UsageError(f"{spec!r} looks like a TorchScript archive but cannot be loaded: "
                                 f"{_first_line(exc)}", "re-save it with torch.jit.save") from None
        loaded = LoadedModel(spec, name, "torch", model.eval())
        loaded.limits["layerwise_summary"] = "a TorchScript module takes no forward hooks, so it has no per-layer table"
        return loaded
    if any(m.endswith("/archive_format") for m in members) or path.suffix.lower() == ".pt2":
        return _load_exported(spec, path, torch)
    return _refuse_pickle(spec, path, torch)


def require_torch_kind(path: Path, what: str, hint: str) -> None:
    """Refuse a file that is neither a zip archive nor a pickle before torch reads it, and a zip archive
    that would unpack to more than the memory available here.

    ``what`` names the file in the message (``"'model.pth'"``, ``"--weights 'w.pt'"``).
    """
    kind = kind_of(path)
    if kind not in (ZIP, PICKLE):
        raise UsageError(f"{what} is not a PyTorch file: it is {describe(kind)}, not the zip archive (or pickle) "
                         "that torch.save, torch.jit.save or torch.export.save writes", hint)
    if kind == ZIP:  # a zip bomb: refused from the sizes its entries declare, before torch unpacks it
        try:
            with zipfile.ZipFile(path) as archive:
                unpacked = sum(info.file_size for info in archive.infolist())
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as exc:
            raise UsageError(f"{what} is a damaged zip archive: {exc}", hint) from None
        available = preflight.available_memory()  # looked up when called: a test may stand in for it
        if available is not None and unpacked > available:
            raise UsageError(f"{what} unpacks to {format_bytes(unpacked)}, more than the {format_bytes(available)} "
                             "of memory available here; refused before reading it", hint)


def _load_exported(spec: str, path: Path, torch: Any) -> LoadedModel:
    archive = checked_archive(spec, path.read_bytes())  # raises before torch reads anything unsafe
    try:
        program = torch.export.load(archive)
    except Exception as exc:  # torch raises RuntimeError, KeyError or ValueError on a bad archive
        raise UsageError(f"{spec!r} is not a torch.export archive that this torch can read: "
                         f"{type(exc).__name__}: {_first_line(exc)}",
                         "save it with torch.export.save(torch.export.export(model, (x,)), 'model.pt2')") from None
    model = program.module(check_guards=False)  # guards as a pre-hook, not a `_guards_fn` row per layer
    # torch.export's module() replaces train()/eval() on the instance by methods that raise: the
    # graph was traced in one mode and does not read the `training` flags. Removing the
    # instance attributes gives back nn.Module's methods, so profiling can set and restore the
    # flags as it does for every model; they change nothing in this graph.
    for method in ("train", "eval"):
        if method in vars(model):
            delattr(model, method)
    example = None
    sample = getattr(program, "example_inputs", None)
    if sample is not None:
        args, kwargs = sample
        example = (tuple(args), dict(kwargs))
    loaded = LoadedModel(spec, path.stem, "torch", model, example=example)
    loaded.notes.append("torch.export specialises shapes: the program runs only on inputs like those it was "
                        "exported with, unless it was exported with dynamic_shapes")
    return loaded


def _refuse_pickle(spec: str, path: Path, torch: Any) -> LoadedModel:
    """Read ``path`` with ``weights_only=True``; every outcome is an explained ``UsageError``."""
    try:
        content = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        match = _UNSUPPORTED_GLOBAL.search(str(exc))
        if match is None:  # not a pickle the safe loader can follow at all (garbage, another format)
            detail = _WEIGHTS_UNPICKLER.search(str(exc))
            raise UsageError(f"cannot read {spec!r} as a PyTorch file: it is not a file torch.save wrote, or it "
                             "holds objects that weights-only loading refuses"
                             + (f" ({detail.group(1).strip()})" if detail else ""), SAVE_HINT) from None
        raise UsageError(f"{spec!r} is a pickled Python object (it needs the Python class {match.group(1)}), such "
                         "as torch.save(model) writes; loading it would run arbitrary code from the file "
                         "(weights_only=False), so deeplite-like refuses to", SAVE_HINT) from None
    except Exception as exc:  # the weights-only loader ran nothing; any other failure is a file it cannot read
        raise UsageError(f"cannot read {spec!r} as a PyTorch file: {type(exc).__name__}: {_first_line(exc)}",
                         SAVE_HINT) from None
    state_dict, where = _find_state_dict(content)
    if state_dict is not None:
        tensors = [k for k, v in state_dict.items() if isinstance(v, torch.Tensor)]
        example = ", ".join(repr(k) for k in tensors[:3])
        raise UsageError(f"{spec!r} holds a state_dict{where} (weights only, {len(tensors)} tensors such as "
                         f"{example}), not a model: the code that builds the model is not in the file",
                         "pass the file with --weights to the model's factory, e.g. "
                         f"deeplite-like profile models.py:build --weights {path}")
    raise UsageError(f"{spec!r} holds a {type(content).__name__}, not a model", SAVE_HINT)


def _find_state_dict(content: Any) -> tuple[Mapping | None, str]:
    """The ``state_dict`` in a loaded file: the file itself, or under a checkpoint key."""
    if _is_state_dict(content):
        return content, ""
    if isinstance(content, Mapping):
        for key in _STATE_DICT_KEYS:
            if _is_state_dict(content.get(key)):
                return content[key], f" under the key {key!r}"
    return None, ""


def _is_state_dict(value: Any) -> bool:
    import torch

    return (isinstance(value, Mapping) and bool(value) and all(isinstance(k, str) for k in value)
            and any(isinstance(v, torch.Tensor) for v in value.values()))


def load_state_dict_into(loaded: LoadedModel, weights: str) -> None:
    """Load the ``state_dict`` in the file ``weights`` into ``loaded.model`` (strict key match)."""
    torch = _torch(loaded.spec)
    path = Path(weights)
    if not path.is_file():
        raise UsageError(f"--weights: no such file {weights!r}", "give the path of a saved state_dict")
    require_torch_kind(path, f"--weights {weights!r}", "save it with torch.save(model.state_dict(), path)")
    try:
        content = torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise UsageError(f"--weights {weights!r} is a pickled Python object, not plain weights; loading it "
                         "would run arbitrary code, so deeplite-like refuses to",
                         "save model.state_dict() instead of the model") from None
    except Exception as exc:  # the weights-only loader ran nothing; any other failure is a file it cannot read
        raise UsageError(f"cannot read --weights {weights!r} as a PyTorch file: {type(exc).__name__}: "
                         f"{_first_line(exc)}",
                         "save it with torch.save(model.state_dict(), path)") from None
    state_dict, _ = _find_state_dict(content)
    if state_dict is None:
        raise UsageError(f"--weights {weights!r} holds a {type(content).__name__}, not a state_dict",
                         "save it with torch.save(model.state_dict(), path)")
    try:
        loaded.model.load_state_dict(state_dict)
    except RuntimeError as exc:
        raise UsageError(f"--weights {weights!r} does not fit {loaded.spec!r}: {_first_line(exc, 300)}",
                         "pass the factory and --model-args that built the saved model") from None
    loaded.notes.append(f"weights loaded from {path.name}")


def load_torchvision(spec: str, name: str, model_args: tuple[tuple, dict]) -> LoadedModel:
    """``torchvision.models.get_model(name, weights=None, **kwargs)``: random weights, nothing downloaded."""
    _torch(spec)
    try:
        import torchvision
    except ImportError:
        raise UsageError(f"{spec!r} needs torchvision, which is not installed here",
                         "install it with: pip install torchvision (the release built for your torch)") from None
    args, kwargs = model_args
    if args:
        raise UsageError(f"{spec!r}: torchvision models take keyword --model-args only (a JSON object)",
                         'e.g. --model-args \'{"num_classes": 10}\'')
    if "weights" in kwargs:
        raise UsageError(f"{spec!r}: weights are never downloaded; the model is built with random weights",
                         "drop 'weights' from --model-args")
    require_known_model(spec, name, torchvision.models.list_models(), "torchvision",
                        "see torchvision.models.list_models() for the names")
    try:
        model = torchvision.models.get_model(name, weights=None, **kwargs)
    except TypeError as exc:
        raise UsageError(f"{spec!r}: {exc}", "fix --model-args") from None
    size = 299 if name == "inception_v3" else 224
    loaded = LoadedModel(spec, name, "torch", model.eval(), input_shapes=[(1, 3, size, size)])
    loaded.notes.append(f"random weights (nothing downloaded); default input 1x3x{size}x{size}")
    return loaded


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


# -- Models named by a hub: hf: (transformers, built on meta from the config) and timm: ----------------------
#: ``?task=`` -> the transformers auto class that builds that head.
TASKS = {
    "base": "AutoModel",
    "causal-lm": "AutoModelForCausalLM",
    "masked-lm": "AutoModelForMaskedLM",
    "seq2seq-lm": "AutoModelForSeq2SeqLM",
    "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "image-classification": "AutoModelForImageClassification",
}
DEFAULT_SEQ_LEN = 128
_NOT_TIMED = "built on the meta device from its configuration (no weights): nothing runs for real, so nothing is timed"


def _require(package: str, spec: str, extra: str) -> Any:
    require_framework("torch", spec)
    if importlib.util.find_spec(package) is None:
        raise UsageError(f"{spec!r} needs {package}, which is not installed here", f"install it with: pip install {extra}")
    return importlib.import_module(package)


def parse_hf_spec(rest: str, spec: str) -> tuple[str, str | None]:
    """``NAME_OR_DIR[?task=TASK]`` -> ``(name, task or None)``."""
    name, _, query = rest.partition("?")
    if not name:
        raise UsageError(f"{spec!r}: no model named after 'hf:'", "e.g. hf:gpt2, hf:meta-llama/Llama-2-7b-hf?task=causal-lm, "
                         "or hf:path/to/dir (a directory holding config.json)")
    options = parse_qs(query, keep_blank_values=True) if query else {}
    unknown = sorted(set(options) - {"task"})
    if unknown:
        raise UsageError(f"{spec!r}: unknown option {unknown[0]!r} after '?'", "the only option is task=, e.g. ?task=causal-lm")
    task = options.get("task", [None])[-1]
    if task is not None and task not in TASKS:
        close = difflib.get_close_matches(task, TASKS, n=2)
        raise UsageError(f"{spec!r}: unknown task {task!r}",
                         (f"did you mean {', '.join(close)}? " if close else "") + f"tasks: {', '.join(TASKS)}")
    return name, task


def load_hf(spec: str, rest: str, model_args: tuple[tuple, dict], seq_len: int | None = None) -> LoadedModel:
    """Build the model ``hf:NAME_OR_DIR[?task=...]`` names from its configuration, on meta."""
    transformers = _require("transformers", spec, "transformers")
    import torch

    name, task = parse_hf_spec(rest, spec)
    args, overrides = model_args
    if args:
        raise UsageError(f"{spec!r}: hf: models take keyword --model-args only (config overrides, a JSON object)",
                         'e.g. --model-args \'{"num_hidden_layers": 2}\'')
    config = _config(transformers, name, spec)
    for key, value in overrides.items():  # e.g. fewer layers for a quick look
        if not hasattr(config, key):
            raise UsageError(f"{spec!r}: --model-args {key!r} is not a field of {type(config).__name__}",
                             "pass fields of the model's config.json")
        setattr(config, key, value)
    builder = _builder(transformers, config, task, spec)
    try:
        with torch.device("meta"):
            model = builder(config)
    except (ValueError, TypeError, KeyError, ImportError) as exc:
        raise UsageError(f"{spec!r}: transformers cannot build {type(config).__name__} "
                         f"({getattr(config, 'model_type', '?')}) as {task or 'its default head'}: "
                         f"{str(exc).splitlines()[0][:300]}", "choose another ?task=, or update transformers") from None
    model.eval()
    example, described = _example(config, model, seq_len)
    loaded = LoadedModel(spec, name.rstrip("/").rsplit("/", 1)[-1], "torch", model, example=example)
    loaded.limits.update({"execution_time": _NOT_TIMED, "throughput": _NOT_TIMED})
    loaded.notes.append(f"{type(model).__name__} built from its configuration on the meta device (no weights "
                        f"downloaded or allocated); input {described}")
    return loaded


def _config(transformers: Any, name: str, spec: str) -> Any:
    try:
        return transformers.AutoConfig.from_pretrained(name, trust_remote_code=False)
    except ValueError as exc:  # a config that needs the model's own code, or an unknown model_type
        text = str(exc).splitlines()[0][:300]
        if "trust_remote_code" in str(exc):
            raise UsageError(f"{spec!r} needs Python code from the hub to build (trust_remote_code); deeplite-like "
                             "never runs code downloaded with a model",
                             "write a factory that builds it and profile that: deeplite-like profile models.py:build") \
                from None
        raise UsageError(f"{spec!r}: {text}", "update transformers, or check the config's model_type") from None
    except OSError:  # no such directory / not in the cache and the hub is unreachable or has no such repo
        raise UsageError(f"cannot resolve {spec!r}: {name!r} is not a local directory holding config.json, not in the "
                         "Hugging Face cache, and the hub did not answer for it (offline, a private repo, or a typo)",
                         f"check the name; or fetch the config once where the hub is reachable "
                         f"(huggingface-cli download {name} config.json --local-dir DIR) and pass hf:DIR") from None


def _builder(transformers: Any, config: Any, task: str | None, spec: str) -> Any:
    if task is not None:
        return getattr(transformers, TASKS[task]).from_config
    for architecture in getattr(config, "architectures", None) or ():
        if not isinstance(architecture, str) or not architecture.isidentifier() or architecture.startswith("_"):
            raise UsageError(f"{spec!r}: its config's architectures entry {architecture!r} is not a class name",
                             f"fix config.json, or choose the head with ?task= ({', '.join(TASKS)})")
        cls = getattr(transformers, architecture, None)
        if cls is None:
            continue
        if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
            kind = "class" if isinstance(cls, type) else type(cls).__name__
            raise UsageError(f"{spec!r}: its config's architectures entry {architecture!r} names transformers."
                             f"{architecture}, a {kind} that is not a model class (a PreTrainedModel)",
                             f"fix config.json, or choose the head with ?task= ({', '.join(TASKS)})")
        return cls._from_config
    return transformers.AutoModel.from_config


def _example(config: Any, model: Any, seq_len: int | None) -> tuple[tuple[tuple, dict], str]:
    """One sensible input: a sequence of token ids, or an image of the config's size."""
    import torch

    generator = torch.Generator().manual_seed(0)
    text = getattr(config, "get_text_config", lambda: config)()
    vision = getattr(config, "vision_config", None) or config
    kwargs: dict[str, Any] = {}
    if getattr(text, "vocab_size", None) and not getattr(config, "image_size", None):
        limit = getattr(text, "max_position_embeddings", None) or getattr(text, "n_positions", None)
        length = seq_len or (min(DEFAULT_SEQ_LEN, limit) if limit else DEFAULT_SEQ_LEN)
        if limit and length > limit:
            raise UsageError(f"--seq-len {length} is longer than the model's maximum ({limit} positions)",
                             f"use --seq-len {limit} or less")
        sequences = 2 if getattr(config, "is_encoder_decoder", False) else 1
        check_input_bytes(f"--seq-len {length}", f"{sequences} sequence{'s' * (sequences > 1)} of {length} int64 "
                          "token ids", sequences * length * 8)  # before allocating them
        ids = torch.randint(0, int(text.vocab_size), (1, length), generator=generator)
        kwargs["input_ids"] = ids
        if getattr(config, "is_encoder_decoder", False):
            kwargs["decoder_input_ids"] = ids.clone()
        if hasattr(config, "use_cache"):
            kwargs["use_cache"] = False
        return ((), kwargs), f"1x{length} token ids" + (" (encoder and decoder)" if "decoder_input_ids" in kwargs else "")
    size = getattr(vision, "image_size", None) or 224
    size = tuple(size) if isinstance(size, (list, tuple)) else (int(size), int(size))
    channels = int(getattr(vision, "num_channels", 3))
    pixels = torch.randn((1, channels, *size), generator=generator)
    return ((), {"pixel_values": pixels}), f"1x{channels}x{size[0]}x{size[1]} image"


def load_timm(spec: str, name: str, model_args: tuple[tuple, dict]) -> LoadedModel:
    """``timm.create_model(NAME, pretrained=False, **kwargs)``: random weights, nothing downloaded."""
    timm = _require("timm", spec, "timm")
    args, kwargs = model_args
    if args:
        raise UsageError(f"{spec!r}: timm models take keyword --model-args only (a JSON object)",
                         'e.g. --model-args \'{"num_classes": 10}\'')
    if kwargs.get("pretrained"):
        raise UsageError(f"{spec!r}: weights are never downloaded; the model is built with random weights",
                         "drop 'pretrained' from --model-args")
    require_known_model(spec, name, timm.list_models(), "timm", "see timm.list_models() for the names")
    try:
        model = timm.create_model(name, pretrained=False, **kwargs)
    except TypeError as exc:
        raise UsageError(f"{spec!r}: {exc}", "fix --model-args") from None
    config = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None) or {}
    shape = tuple(int(d) for d in config.get("input_size", (3, 224, 224)))
    loaded = LoadedModel(spec, name, "torch", model.eval(), input_shapes=[(1, *shape)])
    loaded.notes.append(f"random weights (nothing downloaded); default input 1x{'x'.join(map(str, shape))}")
    return loaded
