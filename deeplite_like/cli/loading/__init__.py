"""MODEL specs on the command line: what each form names, and loading it.

Forms, tried in this order::

    zoo:NAME                       a bundled model (``deeplite_like.zoo``)
    hf:NAME_OR_DIR[?task=TASK]     a transformers model built on meta from its config (``torch_files``)
    timm:NAME                      ``timm.create_model(NAME, pretrained=False)``
    torchvision:NAME               ``torchvision.models.get_model(NAME, weights=None)``
    keras.applications:NAME        ``keras.applications.NAME(weights=None)``
    path/to/file.py:factory        ``factory()`` from a Python file
    package.module:factory         ``factory()`` from an importable module
    path/to/model.pt / .pth / .ts  a TorchScript archive (``torch.jit.save``)
    path/to/model.pt2              a ``torch.export`` program (``torch.export.save``)
    path/to/model.keras            a saved Keras model (``model.save``)
    path/to/model.onnx             an ONNX file (``onnx_files``: protobuf data, no code, no custom-op library)
    path/to/model.tflite           a TFLite file (``tflite_files``: flatbuffer data, no code, no custom-op library)

A factory is called with ``--model-args`` (a JSON object of keyword arguments, or a JSON list
of positional ones), or with no arguments. It returns the model, or ``(model, example)`` where
``example`` is its input: a tensor, a tuple of tensors, a dict of keyword tensors or
``deeplite_like.Inputs``. A module attribute that already is a model is used as it is.

A factory's module and the factory itself are imported and called with ``sys.argv`` holding only
their own name, and a ``SystemExit`` from them is an error; standard-library functions and
frameworks' file loaders are refused (``preflight``). A file with no model extension is
refused by its name and kind, never by its content.

Weights are never downloaded (``weights=None``). Pickled PyTorch files are read with
``torch.load(weights_only=True)``: a file that needs arbitrary code to load is refused, and a
file of weights alone (a ``state_dict``) is explained (pass it with ``--weights`` to a factory).

This package: this module is the dispatcher, and imports the loaders; they import what they
share from ``preflight`` (``LoadedModel``, the checks made before anything is loaded), never
this module. ``torch_files`` (TorchScript, ``torch.export``, pickles, torchvision, ``hf:``,
``timm:``; with ``export_archive`` checking a ``.pt2`` record by record), ``keras_files``,
``onnx_files`` and ``tflite_files`` import their framework only when their form is used.
"""
from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

from deeplite_like.cli.exit_codes import ProfilingFailed, UsageError
from deeplite_like.cli.loading.keras_files import keras_input_shapes, load_keras_application, load_keras_file
from deeplite_like.cli.loading.onnx_files import load_onnx_file
from deeplite_like.cli.loading.tflite_files import load_tflite_file
from deeplite_like.cli.loading.preflight import (FORMS, FORMS_HINT, KERAS_SUFFIXES, MODEL_FILE_SUFFIXES, ONNX_SUFFIXES,
                                                 TFLITE_SUFFIXES, LoadedModel, file_kind, refuse_loader,
                                                 refuse_stdlib_module, require_framework, require_known_model)
from deeplite_like.cli.loading.torch_files import (load_hf, load_state_dict_into, load_timm, load_torch_file,
                                                   load_torchvision)

__all__ = ["FORMS", "FORMS_HINT", "LoadedModel", "framework_of", "load_model", "parse_model_args",
           "require_framework", "require_known_model"]



def parse_model_args(text: str | None) -> tuple[tuple, dict]:
    """``--model-args`` JSON -> ``(args, kwargs)``: an object gives keywords, a list positionals."""
    if text is None:
        return (), {}
    example = 'write a JSON object of keyword arguments, e.g. --model-args \'{"num_classes": 100}\''
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--model-args is not valid JSON: {exc.msg} at character {exc.pos} of {text!r}", example) \
            from None
    except RecursionError:
        raise UsageError("--model-args nests its JSON too deeply to read", example) from None
    except ValueError as exc:  # an int of more than 4300 digits
        raise UsageError(f"--model-args cannot be read: {exc}", example) from None
    if isinstance(value, dict):
        return (), value
    if isinstance(value, list):
        return tuple(value), {}
    raise UsageError(f"--model-args must be a JSON object (keyword arguments) or list (positional ones), "
                     f"got {type(value).__name__} {text!r}", 'e.g. --model-args \'{"num_classes": 100}\'')


def framework_of(model: Any) -> str | None:
    """``'torch'`` or ``'keras'`` by the model's classes (no framework imported), else ``None``."""
    from deeplite_like.backends import backend_for

    try:
        return backend_for(model).name
    except TypeError:
        return None


def load_model(spec: str, model_args: tuple[tuple, dict] = ((), {}), weights: str | None = None,
               seq_len: int | None = None) -> LoadedModel:
    """Load the model ``spec`` names (see the module docstring for the forms).

    Raises ``UsageError`` when the spec cannot be resolved (unknown form or name, missing
    file or package, a file refused as unsafe) and ``ProfilingFailed`` when the model's own
    code fails while it is built.
    """
    spec = spec.strip()
    if not spec:
        raise UsageError("MODEL is empty", FORMS_HINT)
    prefix, sep, rest = spec.partition(":")
    if sep and prefix == "zoo":
        loaded = _load_zoo(spec, rest, model_args)
    elif sep and prefix == "hf":
        loaded = load_hf(spec, rest, model_args, seq_len)
    elif sep and prefix == "timm":
        loaded = load_timm(spec, rest, model_args)
    elif sep and prefix == "torchvision":
        loaded = load_torchvision(spec, rest, model_args)
    elif sep and prefix in ("keras.applications", "keras"):
        loaded = load_keras_application(spec, rest, model_args)
    else:
        loaded = _load_file_or_factory(spec, model_args)
    if weights is not None:
        if loaded.framework != "torch":
            raise UsageError(f"--weights loads a PyTorch state_dict, but {spec!r} is a {loaded.framework} model",
                             "drop --weights, or name a PyTorch model")
        load_state_dict_into(loaded, weights)
    return loaded


# ------------------------------------------------------------------------------ the forms
def _load_zoo(spec: str, name: str, model_args: tuple[tuple, dict]) -> LoadedModel:
    from deeplite_like import zoo

    try:
        entry = zoo.get(name)
    except ValueError as exc:
        raise UsageError(f"{spec!r}: {exc}", "list the bundled models with: deeplite-like demo --list") from None
    args, kwargs = model_args
    if args:
        raise UsageError(f"{spec!r}: a zoo model takes keyword --model-args only (a JSON object), got a list",
                         f"its factory {entry.factory} accepts: "
                         f"{', '.join(inspect.signature(entry._factory()).parameters)}")
    require_framework(entry.framework, spec)
    try:
        model = entry.build(**kwargs)
    except TypeError as exc:
        raise UsageError(f"{spec!r}: {exc}", "fix --model-args") from None
    return LoadedModel(spec, entry.name, entry.framework, model, example=((entry.example_input(batch_size=1),), {}))


def _load_file_or_factory(spec: str, model_args: tuple[tuple, dict]) -> LoadedModel:
    target, sep, attribute = spec.rpartition(":")
    if sep and target.endswith(".py"):
        module = _import_file(Path(target), spec)
        return _from_factory(spec, module, attribute, model_args)
    path = Path(spec)
    suffix = path.suffix.lower()
    if suffix in MODEL_FILE_SUFFIXES or path.is_file():
        if not path.is_file():
            raise UsageError(f"no such model file: {spec!r}" + ("" if path.parent.is_dir() else
                                                               f" (no directory {str(path.parent)!r})"),
                             FORMS_HINT)
        if suffix not in MODEL_FILE_SUFFIXES:
            _refuse_unknown_file(spec, path)
        if model_args != ((), {}):
            raise UsageError(f"--model-args applies to factories; {spec!r} is a saved model file",
                             "drop --model-args")
        if suffix in ONNX_SUFFIXES:
            return load_onnx_file(spec, path)
        if suffix in TFLITE_SUFFIXES:
            return load_tflite_file(spec, path)
        if suffix in KERAS_SUFFIXES:
            return load_keras_file(spec, path)
        return load_torch_file(spec, path)
    if sep and target and attribute and all(part.isidentifier() for part in target.split(".")):
        refuse_stdlib_module(spec, target)
        try:
            # The current directory is importable as under `python -m`; a console script's would not be.
            with _importable_directory(Path.cwd()), user_argv(target):
                module = importlib.import_module(target)
        except SystemExit as exc:
            raise _exited(spec, f"module {target!r} called sys.exit({exc.code!r}) while being imported", exc) \
                from exc
        except ModuleNotFoundError as exc:
            missing = exc.name or "?"
            if target == missing or target.startswith(missing + "."):
                raise UsageError(f"{spec!r}: no module named {missing!r} can be imported",
                                 "check the spelling, install the package, or run from the directory that holds "
                                 "it (the current directory is importable)") from None
            raise UsageError(f"{spec!r}: module {target!r} imports {missing!r}, which is not installed here",
                             f"install {missing}") from exc
        except Exception as exc:
            raise ProfilingFailed(f"{spec!r}: importing {target!r} raised {type(exc).__name__}: {exc}",
                                  "run with --verbose for the traceback") from exc
        return _from_factory(spec, module, attribute, model_args)
    if sep and ("/" in target or os.sep in target):
        raise UsageError(f"cannot tell what model {spec!r} names: {target!r} is not a .py file", FORMS_HINT)
    raise UsageError(f"cannot tell what model {spec!r} names", FORMS_HINT)


def _refuse_unknown_file(spec: str, path: Path) -> None:
    """An existing file whose name is no model form: say so by its name and kind, never by its content."""
    if path.suffix.lower() == ".py":
        raise UsageError(f"{spec!r} is a Python file; name the function in it that builds the model",
                         f"write {spec}:FACTORY, e.g. deeplite-like profile {spec}:build")
    known = ", ".join(MODEL_FILE_SUFFIXES)
    kind = file_kind(path)
    extension = f"the extension {path.suffix!r}" if path.suffix else "no extension"
    raise UsageError(f"{spec!r} is not a model file deeplite-like can load: it is {kind} with {extension} "
                     f"(model files end in {known})", FORMS_HINT)


@contextlib.contextmanager
def _importable_directory(directory: Path) -> Iterator[None]:
    """Put ``directory`` first on ``sys.path`` while a file is imported (its sibling imports work)."""
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


@contextlib.contextmanager
def user_argv(program: str) -> Iterator[None]:
    """``sys.argv = [program]`` while user code is imported or called; restored in ``finally``.

    The command line's own arguments are not the user file's: an ``argparse`` parser run at
    import would read them, fail on the options it does not know and exit.
    """
    saved = sys.argv
    sys.argv = [program]
    try:
        yield
    finally:
        sys.argv = saved


def _exited(spec: str, what: str, exc: SystemExit) -> ProfilingFailed:
    """The error for user code that raised ``SystemExit``: never a silent exit, whatever its code."""
    return ProfilingFailed(f"{spec!r}: {what}; deeplite-like needs a model from it" +
                           (" (argparse exits so when parse_args() finds an error, or on --help)"
                            if exc.code == 2 else ""),
                           "parse command-line arguments only under `if __name__ == '__main__':`, and return "
                           "the model (or raise an exception) instead of exiting")


def _import_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise UsageError(f"{spec!r}: no such Python file {str(path)!r}", FORMS_HINT)
    name = f"deeplite_like_user_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"{spec!r}: {str(path)!r} cannot be imported as a Python module", FORMS_HINT)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        with _importable_directory(path.resolve().parent), user_argv(str(path)):
            module_spec.loader.exec_module(module)
    except SystemExit as exc:
        del sys.modules[name]
        raise _exited(spec, f"{path.name} called sys.exit({exc.code!r}) while being imported", exc) from exc
    except ImportError as exc:
        del sys.modules[name]
        raise UsageError(f"{spec!r}: {path.name} imports {exc.name or 'a module'!r}, which is not installed here",
                         f"install it, or fix the import ({exc})") from exc
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise ProfilingFailed(f"{spec!r}: running {path.name} raised {type(exc).__name__}: {exc}",
                              "run with --verbose for the traceback") from exc
    return module


def _from_factory(spec: str, module: Any, attribute: str, model_args: tuple[tuple, dict]) -> LoadedModel:
    if not attribute.isidentifier():
        raise UsageError(f"{spec!r}: {attribute!r} is not a Python name", "write module:factory, e.g. models:resnet")
    if not hasattr(module, attribute):
        names = [n for n in vars(module) if not n.startswith("_")]
        close = difflib.get_close_matches(attribute, names, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else \
            f"it defines: {', '.join(sorted(n for n in names if callable(getattr(module, n))))[:300]}"
        raise UsageError(f"{spec!r}: {_module_label(module)} has no attribute {attribute!r}", hint)
    factory = getattr(module, attribute)
    refuse_loader(spec, factory)
    args, kwargs = model_args
    if framework_of(factory) is not None:  # already a model (a module-level instance)
        if model_args != ((), {}):
            raise UsageError(f"{spec!r} is a model instance, not a factory; it takes no --model-args",
                             "drop --model-args")
        return _loaded(spec, attribute, factory, None)
    if not callable(factory):
        raise UsageError(f"{spec!r}: {attribute!r} is a {type(factory).__name__}, not a model or a factory",
                         "name a function or class that builds the model")
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            shown = signature.replace(return_annotation=inspect.Signature.empty)
            raise UsageError(f"{spec!r}: cannot call {attribute}{shown} with --model-args: {exc}",
                             "fix --model-args (a JSON object of keyword arguments)") from None
    try:
        with user_argv(spec):
            result = factory(*args, **kwargs)
    except SystemExit as exc:
        raise _exited(spec, f"{attribute}() called sys.exit({exc.code!r}) instead of returning a model", exc) \
            from exc
    except Exception as exc:
        raise ProfilingFailed(f"{spec!r}: {attribute}() raised {type(exc).__name__}: {exc}",
                              "run with --verbose for the traceback") from exc
    example = None
    if isinstance(result, tuple) and len(result) == 2 and framework_of(result[0]) is not None:
        result, example = result
        example = _as_inputs(example, spec)
    return _loaded(spec, attribute, result, example)


def _loaded(spec: str, name: str, model: Any, example: tuple[tuple, dict] | None) -> LoadedModel:
    framework = framework_of(model)
    if framework is None:
        raise ProfilingFailed(f"{spec!r} built a {type(model).__module__}.{type(model).__qualname__}, which is "
                              "neither a torch.nn.Module nor a Keras model",
                              "the factory must return the model, or (model, example_input)")
    loaded = LoadedModel(spec, name, framework, model, example=example)
    if framework == "keras":
        loaded.input_shapes = keras_input_shapes(model)
    return loaded


def _as_inputs(example: Any, spec: str) -> tuple[tuple, dict]:
    from deeplite_like.data import Inputs

    if isinstance(example, Inputs):
        return tuple(example.args), dict(example.kwargs)
    if isinstance(example, dict):
        if not all(isinstance(k, str) for k in example):
            raise ProfilingFailed(f"{spec!r}: the example's dict keys must be keyword names (str)",
                                  "return (model, {'input_ids': ids, ...})")
        return (), dict(example)
    if isinstance(example, (tuple, list)):
        return tuple(example), {}
    return (example,), {}


def _module_label(module: Any) -> str:
    file = getattr(module, "__file__", None)
    if module.__name__.startswith("deeplite_like_user_") and file:
        return os.path.basename(file)
    return f"module {module.__name__!r}"
