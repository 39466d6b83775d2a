"""``Profiler``: maps status keys to the functions that compute them, caches and reports them; and
``compare``, which computes two or more profilers alike and reports them side by side (the first is
the reference)."""
from __future__ import annotations

import contextlib
import difflib
import inspect
import logging
import threading
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from deeplite_like.data.forward_pass import ForwardPassSplits
from deeplite_like.data.loaders import getLogger
from deeplite_like.errors import called_as
from deeplite_like.functions import (ProfilerFunction, bounded_keys, call_signature, positional_bindings,
                                     shared_observations)
from deeplite_like.metrics.status_keys import Detailed, StatusKey, measured_with


logger = getLogger()  # (deeplite's holder: setLogger swaps the logger behind it)

_UNSET = object()
_LOCKS_LOCK = threading.Lock()  # (makes each profiler's own lock once)


@dataclass
class _Registration:
    function: ProfilerFunction
    override: bool
    signature: inspect.Signature
    keys: dict[str, StatusKey]  # NAME -> not-computed prototype of the key
    last_kwargs: Any = field(default=_UNSET)  # what the owned keys were last computed with
    positional: dict[str, str] = field(default_factory=dict)  # parameter -> context name bound by position
    default: bool = False  # registered by the profiler itself (a backend's built-in function)

    @property
    def named_parameters(self) -> set[str]:
        """Parameters filled by name (from the caller's kwargs or the profiler's context)."""
        return set(self.signature.parameters) - set(self.positional)


#: deeplite-profiler's view of one registration: ``profiler._profiling_functions_register[NAME]``.
FunctionRegister = namedtuple("FunctionRegister", ("function", "overriding", "status"))


class _StatusKeyNames(tuple):
    """The names of a profiler's keys: a tuple, and callable as deeplite's ``status_keys()`` method."""

    def __call__(self) -> "_StatusKeyNames":
        return self


class Profiler:
    """A registry of profiler functions bound to one model and its data splits.

    Registration rules (per status key):

    * a newer non-override registration replaces an older non-override one, with a logged warning;
    * an override wins over non-overrides registered before or after it;
    * two overrides for one key raise ``RuntimeError`` naming both functions and the key;
    * registration is atomic: if one key fails, no key of that function changes;
    * replacing one of the profiler's own default functions with another of the same class
      (``register_profiler_function(ComputeComplexity())``, as deeplite-profiler's examples do)
      is silent;
    * a weak key (``StatusKey.WEAK``, e.g. the ``eval_metric`` alias of a named evaluation
      metric) yields silently to any other claim, and takes a key only when it is free or held
      by another weak key it overrides.

    Values are cached per key. They are recomputed when asked (``recompute=True``) or when a
    call passes arguments for their function that differ from those of the last computation;
    a call passing none returns the cached value.
    """

    backend_name = "generic"

    def __init__(self, model: Any, data_splits: Mapping[str, Any] | None = None, name: str = "model") -> None:
        check_data_splits(data_splits, type(self).__name__)
        self.model = model
        self.data_splits = {} if data_splits is None else data_splits
        self.name = name
        self._registrations: list[_Registration] = []  # in registration order
        self._owner: dict[str, _Registration] = {}  # key NAME -> registration computing it
        self._status: dict[str, StatusKey] = {}
        #: status key NAME -> why this model cannot have it (such keys are not registered)
        self.limits: dict[str, str] = {}
        #: deeplite-profiler's display filter: ``fn({NAME: StatusKey}) -> {NAME: StatusKey}`` choosing and
        #: ordering the keys reports show; ``None`` shows every key in the built-in order.
        self.display_status_filter_func = None

    @property
    def backend(self) -> str:
        """The backend's name shown in reports (deeplite-profiler's attribute; assignable, as there)."""
        return self.backend_name

    @backend.setter
    def backend(self, name: str) -> None:
        self.backend_name = str(name)

    @classmethod
    def enable_forward_pass_data_splits(cls, data_splits: Mapping[str, Any], forward_pass: Any = None):
        """deeplite-profiler's way to attach a ``ForwardPass`` to data splits; returns the splits to pass.

        The splits are returned unchanged, in a dict that carries ``forward_pass`` to the
        profiler built on them (a backend profiler uses it unless given ``forward_pass=``).
        ``forward_pass`` is a ``ForwardPass``, ``None`` (the default: the inputs are the first
        element of an ``(x, y)`` batch), or deeplite's dict split -> ``ForwardPass`` / ``None``
        naming one forward pass.
        """
        return ForwardPassSplits(data_splits, forward_pass)

    # ------------------------------------------------------------------ context
    def context(self) -> dict[str, Any]:
        """Arguments the profiler supplies itself, by parameter name; backends add to them."""
        return {"model": self.model, "data_splits": self.data_splits}

    # ------------------------------------------------------------- registration
    def register_profiler_function(self, function: ProfilerFunction, override: bool = False) -> None:
        """Register ``function`` for every status key it declares (see the class docstring)."""
        self._register(function, override)

    def register_default_function(self, function: ProfilerFunction) -> None:
        """Register one of the profiler's built-in functions; a user's function of the same class replaces it
        silently (deeplite-profiler's examples register ``ComputeComplexity()`` on a profiler that has it)."""
        self._register(function, False, default=True)

    def _register(self, function: ProfilerFunction, override: bool, default: bool = False) -> None:
        if not isinstance(function, ProfilerFunction):
            raise TypeError(f"expected a ProfilerFunction, got {function!r}; wrap a plain function in "
                            "ExternalProfilerFunction(func, keys)")
        signature = call_signature(function)
        keys = {key.NAME: key for key in bounded_keys(function)}
        existing = next((r for r in self._registrations if r.function is function), None)
        registration = _Registration(function, override, signature, keys,
                                     positional=positional_bindings(signature, self.context()), default=default)
        plan = self._plan(registration, existing)
        if existing is not None:
            self._registrations.remove(existing)
        self._apply(registration, plan)
        attach = getattr(function, "_attach", None)
        if attach is not None:
            attach(self)

    def _plan(self, new: _Registration, existing: _Registration | None) -> dict[str, StatusKey]:
        """Keys ``new`` takes, after checking every rule; raises before anything changes."""
        plan: dict[str, StatusKey] = {}
        for name, key in new.keys.items():
            current = self._owner.get(name)
            if current is None or current is existing:
                plan[name] = key
                continue
            current_weak = current.keys[name].WEAK
            if key.WEAK or current_weak:
                if not key.WEAK or (current_weak and new.override and not current.override):
                    plan[name] = key  # a weak key yields silently
                else:
                    logger.debug("weak status key %r stays with %r; %r does not compute it",
                                 name, current.function, new.function)
            elif new.override and current.override:
                raise RuntimeError(
                    f"status key {name!r} is claimed with override=True by both {current.function!r} and "
                    f"{new.function!r}; the priority is ambiguous. Register one of them without override.")
            elif new.override:
                logger.info("%r overrides %r for status key %r", new.function, current.function, name)
                plan[name] = key
            elif current.override:
                logger.info("status key %r stays with %r (registered with override=True); %r does not "
                            "compute it", name, current.function, new.function)
            else:
                # re-registering a default of the same class is a deliberate replacement: no warning
                log = logger.debug if current.default and type(new.function) is type(current.function) \
                    else logger.warning
                log("%r replaces %r for status key %r", new.function, current.function, name)
                plan[name] = key
        return plan

    def _apply(self, registration: _Registration, plan: dict[str, StatusKey]) -> None:
        for name, key in plan.items():
            self._owner[name] = registration
            self._status[name] = key.fresh()
        # keys the function declares but lost, and keys it no longer declares, leave it
        for name, owner in list(self._owner.items()):
            if owner.function is registration.function and name not in plan:
                del self._owner[name]
                del self._status[name]
        self._registrations.append(registration)
        self._registrations = [r for r in self._registrations if any(o is r for o in self._owner.values())]

    def _refresh_function_keys(self, function: ProfilerFunction) -> None:
        """Re-read the keys of an already registered function whose key set changed."""
        registration = next((r for r in self._registrations if r.function is function), None)
        if registration is not None:
            self._register(function, registration.override, registration.default)

    def unregister_profiler_function(self, function: ProfilerFunction) -> None:
        """Remove ``function`` and the keys it computes."""
        for name, owner in list(self._owner.items()):
            if owner.function is function:
                del self._owner[name]
                del self._status[name]
        self._registrations = [r for r in self._registrations if r.function is not function]

    def add_secondary_eval_metric(self, key: str, unit_name: str | None = None, description: str | None = None,
                                  comparative: Any = None) -> None:
        """Also report ``key`` of the evaluation function's dict result (deeplite-profiler's method).

        Adds it to the function computing ``eval_metric`` (a ``ComputeEvalMetric``); see
        ``ComputeEvalMetric.add_secondary_metric``.
        """
        owner = self._owner.get("eval_metric")
        add = getattr(owner.function, "add_secondary_metric", None) if owner is not None else None
        if add is None:
            raise ValueError(f"profiler {self.name!r} has no evaluation function computing 'eval_metric' to add "
                             f"{key!r} to; register ComputeEvalMetric(func, ...) first")
        add(key, unit_name, description, comparative)

    # -------------------------------------------------------------------- status
    @property
    def status_keys(self) -> tuple[str, ...]:
        """Names of the keys this profiler can compute (also callable: deeplite's ``status_keys()``)."""
        return _StatusKeyNames(self._status)

    def status_get(self, key: Any) -> Any:
        """The raw value of ``key`` (``None`` if not computed); deeplite-profiler's name."""
        return self.get_status(key).value

    def status_contains(self, key: Any) -> bool:
        """Whether this profiler has the key ``key`` (a NAME or a ``StatusKey``)."""
        name = key if isinstance(key, str) else getattr(key, "NAME", None)
        return name in self._status

    def status_values(self, to_value: bool = True) -> list[Any]:
        """Raw values of every key in key order (``to_value=False``: copies of the ``StatusKey`` objects)."""
        return [value for _, value in self.status_items(to_value)]

    def status_items(self, to_value: bool = True) -> list[tuple[str, Any]]:
        """``(NAME, raw value)`` of every key (``to_value=False``: copies of the ``StatusKey`` objects)."""
        return list(self.status_to_dict(to_value=to_value).items())

    @property
    def _profiling_functions_register(self) -> dict[str, FunctionRegister]:
        """deeplite-profiler's register, read-only: NAME -> ``(function, overriding, status)``."""
        return {name: FunctionRegister(owner.function, owner.override, self._status[name])
                for name, owner in self._owner.items()}

    @property
    def functions(self) -> tuple[ProfilerFunction, ...]:
        return tuple(r.function for r in self._registrations)

    def get_status(self, key: Any) -> StatusKey:
        """The ``StatusKey`` instance (value, details) stored for ``key`` (computed or not)."""
        return self._status[self._key_name(key)]

    def _key_name(self, key: Any) -> str:
        name = key if isinstance(key, str) else getattr(key, "NAME", None)
        if name not in self._status and name in self.limits:
            raise ValueError(f"status key {name!r} is not available for profiler {self.name!r}: {self.limits[name]}")
        if name not in self._status:
            known = ", ".join(sorted(self._status)) or "none: register a ProfilerFunction first"
            hint = difflib.get_close_matches(str(name), self._status, n=1)
            did_you_mean = f" Did you mean {hint[0]!r}?" if hint else ""
            raise ValueError(f"unknown status key {name!r} for profiler {self.name!r}.{did_you_mean} "
                             f"Known keys: {known}")
        return name

    def compute_status(self, key: Any, recompute: bool = False, **kwargs: Any) -> Any:
        """Compute (or return the cached) value of ``key``; ``kwargs`` are piped by name.

        Threads sharing one profiler take turns (``_exclusive``): each gets the value computed
        for its own arguments.
        """
        name = self._key_name(key)
        self._check_kwargs(kwargs)
        registration = self._owner[name]
        with self._exclusive(), called_as("compute_status"):
            if recompute or self._stale(registration, kwargs):
                self._check_options(self._piped(registration, kwargs))
                self._run(registration, kwargs)
            return self._status[name].value

    def _exclusive(self) -> threading.RLock:
        """This profiler's lock: a computation and the values it returns belong to one thread at a time."""
        lock = self.__dict__.get("_lock")
        if lock is None:
            with _LOCKS_LOCK:
                lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)  # (a lock cannot be copied or pickled; a copy gets its own)
        return state

    def compute_network_status(self, recompute: bool = False, print_mode: Any = None, short_print: bool = True,
                               **kwargs: Any):
        """Compute every registered key; return the report (also logged at ``print_mode``).

        ``print_mode`` names a logging level (``'info'``, ``'debug'``, ...) of the
        ``deeplite_like`` logger, or ``'print'`` for standard output; ``None`` logs nothing. With
        no logging configured at all, a level prints to standard output (as deeplite-profiler's
        examples show their tables).
        """
        level = _print_level(print_mode)
        self._check_kwargs(kwargs)
        self._check_options(kwargs)
        with self._exclusive():  # (threads sharing the profiler take turns: each gets its own report)
            self._compute_all(kwargs, recompute)
            report = self.report(short_print=short_print)
        _emit(report, level)
        return report

    def _compute_all(self, kwargs: Mapping[str, Any], recompute: bool = False, strict: bool = False) -> None:
        """Compute every registered key that is missing or stale for ``kwargs`` (``_stale``)."""
        with called_as("compute_network_status"), self.measuring():
            for registration in list(self._registrations):
                if recompute or self._stale(registration, kwargs, strict):
                    self._run(registration, kwargs)

    def measuring(self) -> contextlib.AbstractContextManager:
        """The scope of one computation of several keys, in which the functions share their observations
        (``functions.shared_observations``: one instrumented forward feeds MACs, memory and the layer table)."""
        return shared_observations()

    def report(self, short_print: bool = True):
        """The status report of what is computed now (nothing is computed by this call).

        It is also a read-only mapping of every key's raw value (``report['macs']``).
        """
        from deeplite_like.reports import StatusReport

        return StatusReport(self.name, self.backend_name, self._displayed_status(), short_print=short_print,
                            values=self.status_to_dict())

    def _displayed_status(self) -> dict[str, StatusKey]:
        statuses = dict(self._status)
        if self.display_status_filter_func is not None:
            statuses = dict(self.display_status_filter_func(statuses))
        return statuses

    def display_status(self, other: "Profiler | None" = None, print_mode: Any = "debug", short_print: bool = True):
        """Show what is computed now, compared with ``other`` when given (deeplite-profiler's method).

        Nothing is computed. The report (a ``StatusReport``, or a ``CompareReport`` with this
        profiler as the reference) is logged at ``print_mode`` and returned.
        """
        from deeplite_like.reports import CompareReport

        level = _print_level(print_mode)
        if other is None:
            report = self.report(short_print=short_print)
        else:
            if not isinstance(other, Profiler):
                raise TypeError(f"display_status(other=...) takes another Profiler, got {type(other).__name__}")
            report = CompareReport([(p.name, p.backend_name, p._displayed_status()) for p in (self, other)],
                                   short_print=short_print)
        _emit(report, level)
        return report

    def _piped(self, registration: _Registration, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        parameters = registration.named_parameters
        return {k: v for k, v in kwargs.items() if k in parameters}

    def _stale(self, registration: _Registration, kwargs: Mapping[str, Any], strict: bool = False) -> bool:
        """Whether the keys ``registration`` owns must be computed (again) for the options ``kwargs`` ask.

        Options are compared with the function's defaults filled in: a value computed at
        ``batch_size=8`` is stale for a call asking ``batch_size=1``. A call that passes none of
        the function's options returns what is cached (deeplite-profiler's behaviour), and the
        value still says what it was measured with (``StatusKey.options``, stated by every
        report); ``strict`` (``compare``) treats passing nothing as asking for the defaults, so
        models are never compared on values measured differently.
        """
        owned = [n for n, r in self._owner.items() if r is registration]
        if any(self._status[n].value is None for n in owned) or registration.last_kwargs is _UNSET:
            return True
        if registration.last_kwargs is None:  # loaded with load_from_dict: its options are unknown
            return False
        if not strict and not self._piped(registration, kwargs):
            return False
        return not _same_kwargs(registration.last_kwargs, self._effective(registration, kwargs))

    def _effective(self, registration: _Registration, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments ``registration``'s function runs with for ``kwargs``: those piped, then its defaults."""
        piped = self._piped(registration, kwargs)
        context = self.context()
        effective: dict[str, Any] = {}
        for parameter in registration.signature.parameters.values():
            name = parameter.name
            if name in registration.positional or name in context or parameter.kind in (
                    inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                continue
            if name in piped:
                effective[name] = piped[name]
            elif parameter.default is not inspect.Parameter.empty:
                effective[name] = parameter.default
        for name, value in piped.items():  # taken by a **kwargs parameter
            effective.setdefault(name, value)
        return effective

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        """Validate option values (a device, a thread count) before anything runs; backends override.

        Raises ``ValueError``/``TypeError`` naming the option. The base profiler knows no option.
        """

    def _check_kwargs(self, kwargs: Mapping[str, Any]) -> None:
        context = self.context()
        clash = sorted(set(kwargs) & set(context))
        if clash:
            raise TypeError(f"{clash} are supplied by the profiler itself (its model and data); "
                            "do not pass them to compute_*")
        accepted = {p for r in self._registrations for p in r.named_parameters}
        unknown = sorted(set(kwargs) - accepted)
        if unknown:
            hints = {u: difflib.get_close_matches(u, accepted, n=1) for u in unknown}
            text = ", ".join(f"{u!r}" + (f" (did you mean {h[0]!r}?)" if h else "") for u, h in hints.items())
            raise TypeError(f"no registered function of profiler {self.name!r} accepts the argument(s) {text}. "
                            f"Accepted arguments: {', '.join(sorted(accepted - set(context))) or 'none'}")

    def _run(self, registration: _Registration, kwargs: Mapping[str, Any]) -> None:
        function = registration.function
        piped = self._piped(registration, kwargs)
        call_kwargs = dict(piped)
        context = self.context()
        for parameter, context_name in registration.positional.items():
            call_kwargs[parameter] = context[context_name]
        for parameter in registration.signature.parameters.values():
            if parameter.name in context and parameter.name not in call_kwargs:
                call_kwargs[parameter.name] = context[parameter.name]
        missing = [p.name for p in registration.signature.parameters.values()
                   if p.default is inspect.Parameter.empty and p.name not in call_kwargs]
        if missing:
            raise TypeError(f"{function!r} needs the argument(s) {missing}; pass them to compute_network_status "
                            f"or compute_status")
        result = function(**call_kwargs)
        values = self._unpack(registration, result)
        owned = [n for n, r in self._owner.items() if r is registration]
        effective = self._effective(registration, kwargs)
        for name in owned:
            status = self._status[name]
            value = values.get(name)
            status.value, status.details = (value.value, dict(value.details)) if isinstance(value, Detailed) \
                else (value, {})
            measured = status.value is not None or (status.details or {}).get("not_measured")
            status.options = measured_with(effective, status.details) if measured else {}
        registration.last_kwargs = effective

    def _unpack(self, registration: _Registration, result: Any) -> dict[str, Any]:
        declared = registration.keys
        if isinstance(result, Mapping) and result and all(isinstance(k, str) for k in result) \
                and (len(declared) > 1 or set(result) <= set(declared)):
            undeclared = sorted(set(result) - set(declared))
            if undeclared:
                raise ValueError(f"{registration.function!r} returned values for {undeclared}, which it does not "
                                 f"declare in get_bounded_status_keys ({sorted(declared)}); a function may only "
                                 "write its own keys")
            return dict(result)
        if len(declared) > 1:
            raise TypeError(f"{registration.function!r} computes {sorted(declared)} and must return a dict "
                            f"{{NAME: value}}; it returned {type(result).__name__}")
        return {next(iter(declared)): result}

    # ------------------------------------------------------------ persistence
    def status_to_dict(self, include_details: bool = False, to_value: bool = True) -> dict[str, Any]:
        """``{NAME: raw value}`` of every key (``None`` where not computed).

        ``to_value=False`` (deeplite-profiler's option) gives copies of the ``StatusKey`` objects.
        """
        if not to_value:
            return {n: _copy_status(s) for n, s in self._status.items()}
        if include_details:
            return {n: {"value": s.value, "details": dict(s.details), "options": dict(getattr(s, "options", {}))}
                    for n, s in self._status.items()}
        return {n: s.value for n, s in self._status.items()}

    def load_from_dict(self, status: Mapping[str, Any], to_value: bool = True) -> None:
        """Fill keys from ``status_to_dict()`` output; loaded values count as computed.

        ``to_value=False`` (deeplite-profiler's option) reads ``StatusKey`` objects, as
        ``status_to_dict(to_value=False)`` gives them.
        """
        for name in status:
            self._key_name(name)
        for name, value in status.items():
            options: dict = {}
            if not to_value:
                if not isinstance(value, StatusKey):
                    raise TypeError(f"load_from_dict(to_value=False) reads StatusKey objects; {name!r} is "
                                    f"{type(value).__name__}")
                options = dict(getattr(value, "options", {}))
                value = Detailed(value.value, dict(value.details))
            elif isinstance(value, Mapping) and set(value) in ({"value", "details"}, {"value", "details", "options"}):
                options = dict(value.get("options") or {})
                value = Detailed(value["value"], dict(value["details"]))
            key = self._status[name]
            key.value, key.details = (value.value, dict(value.details)) if isinstance(value, Detailed) else (value, {})
            key.options = options
            self._owner[name].last_kwargs = None

    def reset_status(self) -> None:
        """Forget every computed value."""
        for name, key in list(self._status.items()):
            self._status[name] = key.fresh()
        for registration in self._registrations:
            registration.last_kwargs = _UNSET

    def clone(self, model: Any = None, data_splits: Mapping[str, Any] | None = None, name: str | None = None,
              retain_status: bool = False) -> "Profiler":
        """A profiler of the same class and functions for another model (default: the same one).

        The clone keeps this profiler's name unless ``name`` is given.
        """
        other = self.__class__.__new__(self.__class__)
        other.__dict__.update(self.__getstate__())  # (not this profiler's lock: the clone makes its own)
        other.model = self.model if model is None else model
        other.data_splits = self.data_splits if data_splits is None else data_splits
        other.name = self.name if name is None else name
        mapping = {id(r): _Registration(r.function, r.override, r.signature, dict(r.keys),
                                        r.last_kwargs if retain_status else _UNSET, dict(r.positional), r.default)
                   for r in self._registrations}
        other._registrations = [mapping[id(r)] for r in self._registrations]
        other._owner = {n: mapping[id(r)] for n, r in self._owner.items()}
        other._status = {n: _copy_status(key) if retain_status else key.fresh() for n, key in self._status.items()}
        for registration in other._registrations:
            attach = getattr(registration.function, "_attach", None)
            if attach is not None:
                attach(other)
        other._post_clone(self)
        return other

    def _post_clone(self, original: "Profiler") -> None:
        """Hook for backends holding per-model state."""

    def compare(self, other: "Profiler | Iterable[Profiler]", print_mode: Any = None, short_print: bool = True,
                recompute: bool = False, **kwargs: Any):
        """Compute both profilers with the same ``kwargs`` and report them side by side.

        This profiler is the reference (e.g. the teacher); returns a ``CompareReport``.
        """
        others = [other] if isinstance(other, Profiler) else _profilers(other, self)
        return compare([self, *others], print_mode=print_mode, short_print=short_print, recompute=recompute,
                       **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, keys={list(self._status)})"


def _profilers(other: Any, reference: Profiler) -> list[Profiler]:
    """``other`` as a list of profilers, or a ``TypeError`` saying how to make one of a model."""
    items = list(other) if isinstance(other, (list, tuple)) else [other]
    for item in items:
        if not isinstance(item, Profiler):
            kind = type(reference).__name__
            raise TypeError(f"compare() takes a profiler (or a list of profilers) to compare with {reference.name!r}, "
                            f"got {type(item).__module__}.{type(item).__qualname__}; wrap a model in a profiler "
                            f"first, e.g. teacher.compare({kind}(student_model, data_splits, name='student'))")
    return items


def check_data_splits(data_splits: Any, owner: str) -> None:
    """``data_splits`` must be ``None`` or a mapping split name -> batches; else ``TypeError`` showing the fix."""
    if data_splits is None or isinstance(data_splits, Mapping):
        return
    shown = type(data_splits).__name__
    raise TypeError(f"{owner}(model, data_splits): data_splits must be a dict of split name -> batches, e.g. "
                    f"{{'test': test_loader}}; got a {shown}. Name the split: {owner}(model, {{'test': batches}}) "
                    f"with your {shown} of batches as batches")


def _copy_status(key: StatusKey) -> StatusKey:
    copied = key.fresh()
    copied.value, copied.details = key.value, dict(key.details)
    copied.options = dict(getattr(key, "options", {}))
    return copied


def _same_kwargs(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if x is y:
            continue
        try:
            equal = x == y
            if not isinstance(equal, bool):
                return False
        except Exception:  # objects whose == raises or is ambiguous (arrays): treat as different
            return False
        if not equal:
            return False
    return True


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL}


def _print_level(print_mode: Any) -> int | str | None:
    if print_mode is None or print_mode == "print":
        return print_mode
    if isinstance(print_mode, int) and not isinstance(print_mode, bool):
        return print_mode
    if isinstance(print_mode, str) and print_mode.lower() in _LEVELS:
        return _LEVELS[print_mode.lower()]
    raise ValueError(f"print_mode {print_mode!r} is not a logging level; use None, 'print', "
                     f"{', '.join(repr(k) for k in _LEVELS)} or an int level")


def _emit(report: Any, level: int | str | None) -> None:
    if level is None:
        return
    # deeplite-profiler's examples pass print_mode='debug' and show the table: with no logging set
    # up anywhere (no handler on our logger or its ancestors), the report is printed instead of
    # going to Python's last-resort handler, which drops everything below WARNING.
    if level == "print" or not logger.hasHandlers():
        print(report)
    else:
        logger.log(level, "\n%s", report)


def compare(profilers: Sequence[Profiler], print_mode: Any = None, short_print: bool = True,
            recompute: bool = False, **kwargs: Any):
    """Compute every profiler with the same ``kwargs`` and return a ``CompareReport``.

    The first profiler is the reference (e.g. the teacher): every other column says, in words,
    how that model differs from it (``4.80x smaller``, ``2.10x faster``, ``-0.70 pts``).
    Profilers of different backends may be mixed; each receives the arguments one of its
    functions accepts, and an argument no profiler accepts is an error.
    """
    from deeplite_like.reports import CompareReport

    if isinstance(profilers, Profiler):
        raise TypeError("compare takes a list of profilers, the reference first: compare([teacher, student])"
                        + (f", got {type(print_mode).__name__} {print_mode!r} as print_mode too"
                           if isinstance(print_mode, Profiler) else ""))
    profilers = list(profilers)
    if len(profilers) < 2:
        raise ValueError(f"compare needs at least two profilers, got {len(profilers)}")
    for position, profiler in enumerate(profilers):
        if not isinstance(profiler, Profiler):
            raise TypeError(f"compare: item {position} is {type(profiler).__name__}, not a Profiler")
    level = _print_level(print_mode)
    accepted_by = [_accepted(p) for p in profilers]
    unknown = sorted(set(kwargs) - set().union(*accepted_by))
    if unknown:
        profilers[0]._check_kwargs({k: kwargs[k] for k in unknown})  # raises with hints
    with called_as("compare"):
        for profiler, accepted in zip(profilers, accepted_by):  # every option checked before any model runs
            profiler._check_options({k: v for k, v in kwargs.items() if k in accepted})
        for profiler, accepted in zip(profilers, accepted_by):
            # strict: a value cached with other options (another batch size, ...) is measured again
            profiler._compute_all({k: v for k, v in kwargs.items() if k in accepted}, recompute, strict=True)
    report = CompareReport([(p.name, p.backend_name, p._displayed_status()) for p in profilers],
                           short_print=short_print)
    _emit(report, level)
    return report


def _accepted(profiler: Profiler) -> set[str]:
    return {name for r in profiler._registrations for name in r.named_parameters} - set(profiler.context())
