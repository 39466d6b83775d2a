"""``Device``: where work runs, named case-insensitively (``cpu``, ``gpu``/``cuda``, ``cuda:N``, ``meta``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

_ALIASES = {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda", "meta": "meta"}


@dataclass(frozen=True)
class Device:
    """A device kind and optional index. ``Device.parse('GPU') == Device.CUDA``.

    Class constants: ``Device.CPU``, ``Device.GPU`` (same as ``Device.CUDA``), ``Device.META``.
    The constructor reads names as ``parse`` does, so deeplite-profiler's ``Device('CPU')`` is
    ``Device.CPU`` and ``Device('unknown device')`` raises ``ValueError``.
    ``str(Device.parse('cuda:1')) == 'cuda:1'``, which frameworks accept as a device string.
    """

    kind: str
    index: int | None = None

    CPU: ClassVar["Device"]
    GPU: ClassVar["Device"]
    CUDA: ClassVar["Device"]
    META: ClassVar["Device"]

    def __post_init__(self) -> None:
        if isinstance(self.kind, Device):
            kind, index = self.kind.kind, self.kind.index
        elif self.kind not in ("cpu", "cuda", "meta") and isinstance(self.kind, str):
            kind, index = _parse_text(self.kind)
        else:
            kind, index = self.kind, None
        if kind not in ("cpu", "cuda", "meta"):
            raise ValueError(f"unknown device kind {self.kind!r}; expected 'cpu', 'gpu', 'cuda', 'cuda:N' or 'meta'")
        if index is not None:
            if self.index is not None and self.index != index:
                raise ValueError(f"Device({self.kind!r}, {self.index!r}) names two indices")
            object.__setattr__(self, "index", index)
        object.__setattr__(self, "kind", kind)
        if self.index is not None and (self.kind != "cuda" or self.index < 0):
            raise ValueError(f"only cuda devices take a non-negative index, got {self.kind}:{self.index}")

    @classmethod
    def parse(cls, device: Any) -> "Device":
        """Accept a ``Device``, a string (``'CPU'``, ``'gpu'``, ``'cuda:1'``) or a framework device object."""
        if isinstance(device, Device):
            return device
        if device is None:
            return cls.CPU
        return cls(*_parse_text(str(device), device))

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def _parse_text(text: str, original: Any = None) -> tuple[str, int | None]:
    """``'GPU'`` -> ``('cuda', None)``, ``'cuda:1'`` -> ``('cuda', 1)``; ``ValueError`` for anything else."""
    original = text if original is None else original
    name, sep, index = text.strip().lower().partition(":")
    kind = _ALIASES.get(name)
    if kind is None or (sep and not index.isdigit()):
        raise ValueError(f"unknown device {original!r}; use 'cpu', 'gpu' or 'cuda', 'cuda:N' or 'meta'")
    if sep and kind != "cuda":
        raise ValueError(f"unknown device {original!r}: only cuda devices take an index, as in 'cuda:1'")
    return kind, int(index) if sep else None


Device.CPU = Device("cpu")
Device.CUDA = Device.GPU = Device("cuda")
Device.META = Device("meta")


def unavailable(device: Any, available: list[str], argument: str = "device", framework: str = "this framework",
                why: str = "") -> ValueError:
    """The error for a device that parses but is not present: names ``argument=`` and what is available."""
    listing = ", ".join(repr(d) for d in available) or "none"
    reason = f" ({why})" if why else ""
    return ValueError(f"{argument}={str(device)!r}: {framework} sees no such device here{reason}. Available: {listing}. "
                      f"Pass {argument}={available[0] if available else 'cpu'!r}, or leave {argument} out to run where "
                      "the model is")
