"""The bundled example models: a registry of specs by name (no framework imported here).

::

    from deeplite_like import zoo

    zoo.names()                      # ('lenet5', 'resnet_small', ...)
    entry = zoo.get("resnet_small")
    model = entry.build()            # eval mode, same weights on every call
    x = entry.example_input(batch_size=4)
    splits = entry.synthetic_splits()  # {"train": [(x, y), ...], "test": [...]}
    student = zoo.get(entry.student).build()

Importing this module does not import torch: a spec names its factory as
``"module:function"``, and that module is imported when the model is first built. Each default
configuration's parameter and MAC counts are derived by hand in ``docs/zoo.rst``.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

__all__ = ["ZOO", "ZooEntry", "get", "names", "register"]

_TASKS = ("image-classification", "text-classification", "token-tagging")
_DTYPES = ("float32", "int64")


@dataclass(frozen=True)
class ZooEntry:
    """The spec of one bundled model.

    Attributes:
        name: registry name (``"lenet5"``).
        summary: one line on the architecture.
        task: ``"image-classification"``, ``"text-classification"`` or ``"token-tagging"``.
        input_shape: shape of one sample, without the batch axis (``(1, 32, 32)``, ``(16,)``).
        input_dtype: ``"float32"`` (images) or ``"int64"`` (token ids).
        num_classes: number of classes (of tags, for token tagging).
        output_shape: shape of one sample's output, without the batch axis; its last axis is
            the class axis (``(10,)``, ``(16, 17)``).
        factory: ``"module:function"`` that builds the model from ``kwargs``.
        kwargs: the factory's keyword arguments for this entry (read-only).
        vocab_size: token vocabulary size, for text models.
        student: name of a smaller entry to compare this one with, if any.
        teacher: name of the entry this one is the student of, if any.
        framework: the framework the factory builds for (``"torch"`` or ``"keras"``).
    """

    name: str
    summary: str
    task: str
    input_shape: tuple[int, ...]
    input_dtype: str
    num_classes: int
    output_shape: tuple[int, ...]
    factory: str
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    vocab_size: int | None = None
    student: str | None = None
    teacher: str | None = None
    framework: str = "torch"

    def __post_init__(self) -> None:
        if self.task not in _TASKS:
            raise ValueError(f"zoo entry {self.name!r}: task {self.task!r} is not one of {_TASKS}")
        if self.input_dtype not in _DTYPES:
            raise ValueError(f"zoo entry {self.name!r}: input_dtype {self.input_dtype!r} is not one of {_DTYPES}")
        if self.input_dtype == "int64" and self.vocab_size is None:
            raise ValueError(f"zoo entry {self.name!r} takes token ids (int64) and so needs a vocab_size")
        if ":" not in self.factory:
            raise ValueError(f"zoo entry {self.name!r}: factory {self.factory!r} must be 'module:function'")
        object.__setattr__(self, "input_shape", tuple(self.input_shape))
        object.__setattr__(self, "output_shape", tuple(self.output_shape))
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    def _factory(self) -> Callable[..., Any]:
        module_name, _, function_name = self.factory.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if exc.name is not None and exc.name.split(".")[0] == self.framework:
                raise ImportError(f"zoo model {self.name!r} needs {self.framework}, which is not installed here; "
                                  f"install it with: pip install 'deeplite-like[{self.framework}]'") from exc
            raise
        return getattr(module, function_name)

    def build(self, seed: int = 0, **overrides: Any) -> Any:
        """Build the model in eval mode, its weights drawn with ``torch.manual_seed(seed)``.

        ``overrides`` replace the entry's factory ``kwargs`` (e.g. ``num_classes=100``). The
        global RNG state is left exactly as it was (the seeding happens inside
        ``torch.random.fork_rng``), so two builds with one seed give identical weights.
        A Keras entry's factory takes ``seed`` and seeds each layer's initializer with it.
        """
        factory = self._factory()
        accepted = inspect.signature(factory).parameters
        unknown = sorted(set(overrides) - set(accepted))
        if unknown:
            raise TypeError(f"zoo model {self.name!r} does not take {', '.join(unknown)}; "
                            f"its factory {self.factory} accepts: {', '.join(accepted)}")
        if self.framework == "keras":  # Keras factories seed each initializer; no global RNG is used
            return factory(**{**self.kwargs, **overrides, "seed": seed})
        import torch  # the factory imported it already; this is for fork_rng

        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = factory(**{**self.kwargs, **overrides})
        return model.eval()

    def example_input(self, batch_size: int = 1, seed: int = 0) -> Any:
        """A deterministic input batch of shape ``(batch_size, *input_shape)`` (a torch tensor).

        It fits the entry's default configuration (not one changed by ``build`` overrides
        that alter the input, e.g. ``vocab_size``).
        """
        return self._data().example_input(self, batch_size=batch_size, seed=seed)

    def synthetic_splits(self, batch_size: int = 8, batches: int = 4, seed: int = 0) -> dict[str, list]:
        """``{"train": [(x, y), ...], "test": [...]}``: tiny deterministic data (see ``zoo.torch_models``)."""
        return self._data().synthetic_splits(self, batch_size=batch_size, batches=batches, seed=seed)

    def _data(self) -> Any:
        """The module drawing this entry's data: ``zoo.keras_models`` (NumPy arrays, channels-last) for a
        Keras entry, ``zoo.torch_models`` (torch tensors) otherwise."""
        return importlib.import_module("deeplite_like.zoo.keras_models" if self.framework == "keras" else
                                       "deeplite_like.zoo.torch_models")


ZOO: dict[str, ZooEntry] = {}


def register(entry: ZooEntry, override: bool = False) -> ZooEntry:
    """Add ``entry`` to the zoo; replacing an existing name needs ``override=True``."""
    if entry.name in ZOO and not override:
        raise ValueError(f"the zoo already has a model named {entry.name!r}; pass override=True to replace it")
    ZOO[entry.name] = entry
    return entry


def names() -> tuple[str, ...]:
    """Registered model names, in registration order."""
    return tuple(ZOO)


def get(name: str) -> ZooEntry:
    """The spec registered as ``name``; raises ``ValueError`` listing close names otherwise."""
    try:
        return ZOO[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), ZOO, n=3)
        hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
        raise ValueError(f"no zoo model named {name!r}; {hint}available: {', '.join(ZOO)}") from None


_TORCH = "deeplite_like.zoo.torch_models"
_IMAGE = dict(task="image-classification", input_dtype="float32", num_classes=10, output_shape=(10,))
_TEXT = dict(input_shape=(16,), input_dtype="int64", vocab_size=1000)

register(ZooEntry(
    "lenet5", "LeNet-5: conv 6@5x5, pool, conv 16@5x5, pool, fc 120-84-10 (ReLU, max pool)",
    input_shape=(1, 32, 32), factory=f"{_TORCH}:lenet5", **_IMAGE))
register(ZooEntry(
    "resnet_small", "ResNet-8 for CIFAR: 3x3 stem, BasicBlocks at widths 16/32/64 (1x1 projection "
    "shortcuts when downsampling), global average pool, fc",
    input_shape=(3, 32, 32), factory=f"{_TORCH}:resnet_small", kwargs={"widths": (16, 32, 64)},
    student="resnet_small_student", **_IMAGE))
register(ZooEntry(
    "resnet_small_student", "resnet_small at half width (8/16/32)",
    input_shape=(3, 32, 32), factory=f"{_TORCH}:resnet_small", kwargs={"widths": (8, 16, 32)},
    teacher="resnet_small", **_IMAGE))
register(ZooEntry(
    "mobilenet_small", "MobileNet-style: 3x3/2 stem, two depthwise-separable blocks, one inverted "
    "residual (expansion 4), global average pool, fc",
    input_shape=(3, 32, 32), factory=f"{_TORCH}:mobilenet_small", kwargs={"width_mult": 1.0},
    student="mobilenet_small_student", **_IMAGE))
register(ZooEntry(
    "mobilenet_small_student", "mobilenet_small with width multiplier 0.5",
    input_shape=(3, 32, 32), factory=f"{_TORCH}:mobilenet_small", kwargs={"width_mult": 0.5},
    teacher="mobilenet_small", **_IMAGE))
register(ZooEntry(
    "transformer_encoder", "text classifier: token + learned positional embedding, 2 post-norm encoder "
    "layers (d_model 64, 4 heads, feed-forward 128), mean pool, linear",
    task="text-classification", num_classes=4, output_shape=(4,), factory=f"{_TORCH}:transformer_encoder",
    kwargs={"d_model": 64, "nhead": 4, "dim_feedforward": 128, "num_layers": 2},
    student="transformer_encoder_student", **_TEXT))
register(ZooEntry(
    "transformer_encoder_student", "transformer_encoder with 1 layer, d_model 32, feed-forward 64",
    task="text-classification", num_classes=4, output_shape=(4,), factory=f"{_TORCH}:transformer_encoder",
    kwargs={"d_model": 32, "nhead": 4, "dim_feedforward": 64, "num_layers": 1},
    teacher="transformer_encoder", **_TEXT))
register(ZooEntry(
    "lstm_tagger", "part-of-speech style tagger: embedding 32, bidirectional LSTM (hidden 32 per "
    "direction), linear head to 17 tags per token",
    task="token-tagging", num_classes=17, output_shape=(16, 17), factory=f"{_TORCH}:lstm_tagger",
    kwargs={"embed_dim": 32, "hidden_size": 32}, student="lstm_tagger_student", **_TEXT))
register(ZooEntry(
    "lstm_tagger_student", "lstm_tagger with hidden size 16 per direction",
    task="token-tagging", num_classes=17, output_shape=(16, 17), factory=f"{_TORCH}:lstm_tagger",
    kwargs={"embed_dim": 32, "hidden_size": 16}, teacher="lstm_tagger", **_TEXT))

# Keras 3 twins of the models above (channels-last inputs); built only where Keras is installed.
_KERAS = "deeplite_like.zoo.keras_models"
register(ZooEntry(
    "lenet5_keras", "LeNet-5 in Keras, channels-last: the same network as 'lenet5' (same params and MACs)",
    input_shape=(32, 32, 1), factory=f"{_KERAS}:lenet5", framework="keras", **_IMAGE))
