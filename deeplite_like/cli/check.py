"""``deeplite-like check MODEL``: a CI gate. Exit 1 when the model grew past a limit or a baseline.

Limits (``--max-macs 2G --max-params 25M --max-size 100MiB --max-memory 64MiB --max-latency
5ms``) are upper bounds; ``--baseline report.json`` (a ``profile --format json`` report) fails
every metric worse than the baseline's by more than ``--tolerance`` (``2%``; default 0%), in
the metric's own direction (lower is better for MACs and time, higher for throughput). Only the
metrics the checks need are computed. The result is a short table (on failure: what regressed)
or JSON (``--format json``) for CI logs.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from typing import IO, Any

from deeplite_like.cli.exit_codes import EXIT_FAILURE, UsageError
from deeplite_like.cli.flags import (add_measure_options, non_negative_int, parse_bytes, parse_count, parse_percent,
                                     parse_seconds, positive, run_options, text_width)
from deeplite_like.cli.loading import FORMS_HINT, load_model, parse_model_args
from deeplite_like.cli.model_inputs import parse_shape, resolve_inputs
from deeplite_like.cli.output import (SCHEMA_VERSION, Rendered, require_writable_output, resolve_format, schema_major,
                                      stamped, write)
from deeplite_like.cli.progress import Progress
from deeplite_like.cli.runner import check_device, execute, prepare
from deeplite_like.reports import TableReport
from deeplite_like.reports.base import fit_report, format_quantity, strict_json

#: ``--max-...`` option -> (status key, parser, what it bounds).
LIMITS = {
    "max_macs": ("macs", positive(lambda t: parse_count(t, "MACs"), "a MACs limit"), "2G", "COUNT"),
    "max_flops": ("flops", positive(lambda t: parse_count(t, "FLOPs"), "a FLOPs limit"), "4G", "COUNT"),
    "max_params": ("total_params", positive(parse_count, "a parameter limit"), "25M", "COUNT"),
    "max_size": ("model_size", positive(parse_bytes, "a size limit"), "100MiB", "SIZE"),
    "max_memory": ("peak_activation_memory", positive(parse_bytes, "a memory limit"), "64MiB", "SIZE"),
    "max_latency": ("execution_time", positive(parse_seconds, "a latency limit"), "5ms", "TIME"),
}
LOWER = ("lower is better", "difference, lower is better")
HIGHER = ("higher is better", "difference")


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("check", help="fail (exit 1) when a model exceeds limits or regresses from a "
                                 "baseline (a CI gate)",
                                 description="Check a model against limits and/or a baseline report; exit 1 with "
                                 "a table of what regressed, 0 when every check passes.", epilog=FORMS_HINT)
    parser.add_argument("model", metavar="MODEL", help="what to check (see below)")
    gate = parser.add_argument_group("checks")
    gate.add_argument("--baseline", metavar="FILE", default=None,
                      help="a JSON report from 'deeplite-like profile MODEL --format json'")
    gate.add_argument("--tolerance", type=tolerance, metavar="PCT", default=0.0,
                      help="how much worse than the baseline a metric may be, e.g. 2%% (default 0%%)")
    for option, (key, parse, example, metavar) in LIMITS.items():
        gate.add_argument("--" + option.replace("_", "-"), dest=option, type=parse, metavar=metavar, default=None,
                          help=f"upper bound on {key}, e.g. {example}")
    add_measure_options(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=("table", "json"), default=None, help="table (default) or json")
    out.add_argument("--output", "-o", metavar="FILE", default=None, help="write the result to FILE")
    out.add_argument("--width", type=non_negative_int, metavar="N", default=None,
                     help="the table fits N characters per line (0: no limit)")
    out.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    out.add_argument("--verbose", "-v", action="store_true", help="on an error, show the full traceback")
    parser.set_defaults(run=run)


def tolerance(text: str) -> float:
    """An argparse type: a percentage from 0% to 1000% (``MAX_TOLERANCE``) as a fraction."""
    value = parse_percent(text)
    if not 0 <= value <= MAX_TOLERANCE:
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is at most {MAX_TOLERANCE:.0%}")
    return value


@dataclass
class Check:
    """One check: a metric against a limit or a baseline, and whether it passed.

    ``value``, ``allowed`` and ``baseline`` are raw, in the metric's base unit (``unit``).
    """

    key: str
    name: str
    kind: str  # "limit" or "baseline"
    value: float | None
    allowed: float
    baseline: float | None
    unit: str
    passed: bool
    text: str


#: The largest baseline file read (a profile report of a model with 100,000 layers is a few MiB).
MAX_BASELINE_BYTES = 64 * 2**20
#: The largest value a baseline metric may hold: 10**21 (a zetta) is beyond any real count of MACs,
#: FLOPs, parameters or bytes, seconds or samples per second. A bigger one would let every run pass.
MAX_BASELINE_VALUE = 10**21
#: The largest ``--tolerance``: 1000 %.
MAX_TOLERANCE = 10.0

_WRITE_BASELINE = "write the baseline again with: deeplite-like profile MODEL --format json -o baseline.json"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"the bare token {name} is not JSON (RFC 8259)")


def baseline_value(where: str, key: str, value: Any) -> float:
    """A baseline metric's value as a float, or a ``UsageError``: a gate must not be passable by its input.

    Refused: anything but a JSON number (``"Infinity"`` and ``"NaN"``, our strict JSON's spelling of
    non-finite floats, included), a negative number, and one above ``MAX_BASELINE_VALUE``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where}: the value of {key!r} is {value!r}, not a finite number; a check against it "
                         "would mean nothing", _WRITE_BASELINE)
    if isinstance(value, int) and abs(value) > MAX_BASELINE_VALUE:
        shown = f"an integer of {len(str(abs(value)))} digits"
    elif not math.isfinite(value):
        shown = repr(value)
    else:
        shown = ""
    if shown or not 0 <= value <= MAX_BASELINE_VALUE:
        raise UsageError(f"{where}: the value of {key!r} is {shown or repr(value)}, outside 0 .. "
                         f"{MAX_BASELINE_VALUE:.0e}; a check against it would mean nothing", _WRITE_BASELINE)
    return float(value)


def load_baseline(path: str) -> dict[str, dict[str, Any]]:
    """The metrics of a ``profile --format json`` report, by key (each its ``value``, ``comparative``, ...).

    The file is untrusted input: it is read only up to ``MAX_BASELINE_BYTES``, strictly (no bare
    ``NaN`` / ``Infinity``), a nesting too deep to parse is a usage error, and every value the
    checks use must be a finite number in range (``baseline_value``).
    """
    where = f"--baseline {path!r}"
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BASELINE_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file", "write one with: deeplite-like profile MODEL --format json "
                         "-o baseline.json") from None
    except OSError as exc:
        raise UsageError(f"{where} cannot be read: {exc.strerror or exc}", _WRITE_BASELINE) from None
    if len(raw) > MAX_BASELINE_BYTES:
        raise UsageError(f"{where} is larger than {MAX_BASELINE_BYTES // 2**20} MiB: not a profile report",
                         _WRITE_BASELINE)
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        raise UsageError(f"{where} nests its JSON too deeply to read: not a profile report", _WRITE_BASELINE) from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, a bare NaN, an int of > 4300 digits
        raise UsageError(f"{where} cannot be read as JSON: {exc}", "pass the JSON report written by "
                         "'deeplite-like profile MODEL --format json'") from None
    if not isinstance(data, dict) or data.get("report") != "profile":
        kind = data.get("report") if isinstance(data, dict) else type(data).__name__
        raise UsageError(f"{where} is not a profile report (its report is {kind!r})",
                         "write the baseline with: deeplite-like profile MODEL --format json -o baseline.json")
    major = schema_major(data.get("schema_version"))
    if major is not None and major != schema_major(SCHEMA_VERSION):
        raise UsageError(f"{where} has schema_version {data['schema_version']}; this deeplite-like reads "
                         f"{SCHEMA_VERSION}", "write the baseline again with this version")
    try:
        metrics = {m["key"]: m for m in data["status"]["metrics"]}
    except (KeyError, TypeError):
        raise UsageError(f"{where}: its 'status' has no 'metrics' list", _WRITE_BASELINE) from None
    for key, metric in metrics.items():
        if not isinstance(metric, dict):
            raise UsageError(f"{where}: the metric {key!r} is not an object", _WRITE_BASELINE)
        if metric.get("value") is not None and metric.get("comparative") in LOWER + HIGHER:
            baseline_value(where, str(key), metric["value"])
    return metrics


def _show(value: float | None, kind: str, unit: str, word: bool = False) -> str:
    return "not computed" if value is None else format_quantity(value, kind, unit, unit_is_word=word)


def _same_conditions(key: str, before: dict[str, Any], status: Any) -> None:
    """Refuse a baseline measured at another batch size, or with(out) the backward pass."""
    details = before.get("details") or {}
    now = getattr(status, "details", None) or {}
    for field, option in (("batch_size", "--batch-size"), ("backward", "--backward")):
        if field in details and field in now and details[field] != now[field]:
            raise UsageError(f"--baseline: {key} was measured with {field} {details[field]!r}, this run with "
                             f"{now[field]!r}; values measured differently are not compared",
                             f"run the check with the baseline's {option}")


def evaluate(statuses: dict[str, Any], limits: dict[str, float], baseline: dict[str, dict] | None,
             tolerance: float) -> list[Check]:
    """Every check of ``statuses`` (the computed metrics) against ``limits`` (key -> bound) and ``baseline``."""
    checks = []
    for key, bound in limits.items():
        metric = statuses.get(key)
        value = getattr(metric, "value", None)
        kind, unit = getattr(metric, "UNIT_KIND", "plain"), getattr(metric, "BASE_UNIT", "")
        word = getattr(metric, "UNIT_IS_WORD", False)
        name = metric.friendly_name() if metric is not None else key
        passed = value is not None and value <= bound
        text = (f"{_show(value, kind, unit, word)} <= {_show(bound, kind, unit, word)}" if passed else
                f"{_show(value, kind, unit, word)} > {_show(bound, kind, unit, word)} (over by "
                f"{100 * (value / bound - 1):.3g} %)" if value is not None else "not computed")
        checks.append(Check(key, name, "limit", value, bound, None, unit, passed, text))
    for key, before in (baseline or {}).items():
        metric = statuses.get(key)
        if metric is None or before.get("value") is None or before.get("comparative") not in LOWER + HIGHER:
            continue
        _same_conditions(key, before, metric)
        value, reference = metric.value, baseline_value("--baseline", key, before["value"])
        kind, unit, word = metric.UNIT_KIND, metric.BASE_UNIT, getattr(metric, "UNIT_IS_WORD", False)
        lower = before["comparative"] in LOWER
        allowed = reference * (1 + tolerance) if lower else reference * (1 - tolerance)
        passed = value is not None and (value <= allowed if lower else value >= allowed)
        change = "" if value is None or reference == 0 else f"{100 * (value / reference - 1):+.3g} %"
        text = (f"{_show(value, kind, unit, word)} vs {_show(reference, kind, unit, word)} ({change or 'n/a'}; allowed "
                f"{'up to' if lower else 'down to'} {_show(allowed, kind, unit, word)})")
        checks.append(Check(key, metric.friendly_name(), "baseline", value, allowed, reference, unit, passed, text))
    return checks


def render_checks(model: str, checks: list[Check], fmt: str, width: int | None) -> str:
    """The checks as JSON, or as a table: every check when all pass, only the failed ones otherwise."""
    failed = [c for c in checks if not c.passed]
    if fmt == "json":
        data = stamped("check", {"model": model, "passed": not failed, "failed": len(failed),
                                 "checks": [asdict(c) for c in checks]})
        return strict_json(data) + "\n"
    shown = failed or checks
    rows = [{"check": f"{c.name} ({c.kind})", "result": c.text, "verdict": "ok" if c.passed else "REGRESSED"}
            for c in shown]
    title = f"check {model}: " + (f"{len(failed)} of {len(checks)} checks failed" if failed else
                                  f"all {len(checks)} checks passed")
    notes = [f"{len(checks) - len(failed)} other checks passed"] if failed and len(checks) > len(failed) else []
    table = TableReport(title, ["check", "result", "verdict"], rows,
                        headers={"check": "Check", "result": "Result", "verdict": "Verdict"}, notes=notes)
    return fit_report(table, width).text + "\n"


def run(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    limits = {LIMITS[option][0]: getattr(args, option) for option in LIMITS if getattr(args, option) is not None}
    if args.baseline is None and not limits:
        raise UsageError("check needs a baseline or a limit: nothing to check",
                         "add --baseline report.json (and --tolerance 2%) and/or limits such as --max-macs 2G "
                         "--max-params 25M --max-latency 5ms")
    require_writable_output(args.output)
    fmt = resolve_format(args.format, args.output)
    if fmt not in ("table", "json"):
        raise UsageError(f"check writes a table or JSON, not {fmt}", "use --format json, or an --output ending "
                         "in .json or .txt")
    baseline = load_baseline(args.baseline) if args.baseline is not None else None
    check_device(args.device, [args.model])
    if args.metrics is None:  # only what the checks need
        needed = list(limits) + [k for k, m in (baseline or {}).items() if m.get("comparative") in LOWER + HIGHER
                                 and k not in limits]
        if args.device == "meta":
            needed = [k for k in needed if k not in ("execution_time", "throughput") or k in limits]
        args.metrics = tuple(dict.fromkeys(needed))
    shapes = [parse_shape(text) for text in args.input_shape or []]
    loaded = load_model(args.model, parse_model_args(args.model_args), args.weights, args.seq_len)
    prepared = prepare(loaded, resolve_inputs(loaded, shapes, args.inputs), run_options(args))
    with Progress(prepared.steps, stream=stderr, enabled=False if args.no_progress else None) as progress:
        result = execute(prepared, progress)
    checks = evaluate(result.statuses, limits, baseline, args.tolerance)
    if not checks:
        raise UsageError(f"--baseline {args.baseline!r} and this run share no metric to compare",
                         "write the baseline with the same --metrics, or add a limit")
    text = render_checks(result.name, checks, fmt, text_width(args, stdout))
    write(Rendered(text), args.output, stdout, stderr)
    return EXIT_FAILURE if any(not c.passed for c in checks) else 0
