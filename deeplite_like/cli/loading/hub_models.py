"""Models named by a hub: ``hf:NAME_OR_DIR[?task=TASK]`` (Hugging Face transformers) and ``timm:NAME``.

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

Imports transformers / timm only when one of these forms is used.
"""
from __future__ import annotations

import difflib
import importlib.util
from typing import Any
from urllib.parse import parse_qs

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading.preflight import LoadedModel, check_input_bytes, require_framework, require_known_model

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
