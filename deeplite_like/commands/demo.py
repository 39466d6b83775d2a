"""``deeplite-like demo``: profile and compare the bundled example models, no arguments needed.

The demo is a list of groups of MODEL specs (``demo_groups``): a group of one is profiled, a
group of two or more is compared, the first spec being the reference. Groups whose framework
is not installed are skipped with a note saying which extra to install.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from typing import IO

from deeplite_like.commands.compare import compare_results
from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.commands.inputs import resolve_inputs
from deeplite_like.cli.loading import load_model
from deeplite_like.commands.options import (add_common_options, add_measure_options, layer_options_given, layer_view,
                                             run_options)
from deeplite_like.commands.output import (Rendered, json_rendered, layer_title, require_writable_output,
                                          resolve_format, render_text, select_layers, write)
from deeplite_like.commands.progress import Progress
from deeplite_like.commands.run import ModelResult, check_device, execute, prepare
from deeplite_like.reports import Report


@dataclass(frozen=True)
class DemoGroup:
    """Models shown together: one is profiled; several are compared, the first the reference."""

    title: str
    specs: tuple[str, ...]
    framework: str


def demo_groups() -> list[DemoGroup]:
    """The demo's groups, in the order shown."""
    from deeplite_like.zoo import ZOO

    groups = []
    for name, entry in ZOO.items():
        if entry.framework != "torch" or entry.teacher:
            continue
        if entry.student:
            groups.append(DemoGroup(f"{name} vs {entry.student}", (f"zoo:{name}", f"zoo:{entry.student}"), "torch"))
        else:
            groups.append(DemoGroup(name, (f"zoo:{name}",), "torch"))
    # Keras models on their own, then the same architecture in both frameworks side by side.
    # A group is skipped with a note when its framework is not installed.
    for name, entry in ZOO.items():
        if entry.framework == "keras":
            groups.append(DemoGroup(name, (f"zoo:{name}",), "keras"))
            twin = name.removesuffix("_keras")
            if twin != name and twin in ZOO:
                groups.append(DemoGroup(f"{twin}: torch vs keras", (f"zoo:{twin}", f"zoo:{name}"), "keras"))
    return groups


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("demo", help="profile and compare the bundled example models",
                                 description="Profile and compare the bundled example models (the zoo): each "
                                 "teacher against its student, and the models without one on their own.")
    parser.add_argument("--list", action="store_true", help="list the bundled models and exit")
    add_measure_options(parser, model_options=False)
    parser.set_defaults(batch_size=1)
    add_common_options(parser)
    parser.set_defaults(run=run)


def list_models(stdout: IO[str]) -> int:
    from deeplite_like.zoo import ZOO

    width = max(len(name) for name in ZOO)
    for name, entry in ZOO.items():
        stdout.write(f"zoo:{name:<{width}}  {entry.framework:<6} {entry.summary}\n")
    return 0


def run(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if args.list:
        return list_models(stdout)
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    fmt = resolve_format(args.format, args.output)
    if fmt == "csv":
        raise UsageError("the demo shows several tables, which one CSV file cannot hold",
                         "use --format json, markdown, html or table")
    check_device(args.device)
    groups, skipped = [], []
    for group in demo_groups():
        if importlib.util.find_spec(group.framework) is None:
            skipped.append(f"skipped {group.title}: needs {group.framework}; install it with: "
                           f"pip install 'deeplite-like[{group.framework}]'")
        else:
            groups.append(group)
    if not groups:
        raise UsageError("the demo's models need a framework that is not installed here",
                         "install one with: pip install 'deeplite-like[torch]'")
    options = run_options(args)
    prepared = []
    for group in groups:
        loaded = [load_model(spec) for spec in group.specs]
        prepared.append([prepare(model, resolve_inputs(model, None, None), options) for model in loaded])
    total = sum(p.steps for runs in prepared for p in runs)
    with Progress(total, stream=stderr, enabled=False if args.no_progress else None) as progress:
        results = [[execute(p, progress) for p in runs] for runs in prepared]
    rendered = _render(list(zip(groups, results)), fmt, args, skipped, stdout)
    write(rendered, args.output, stdout, stderr)
    return 0


def _main_report(results: list[ModelResult]) -> Report:
    return results[0].status_report() if len(results) == 1 else compare_results(results)


def _render(shown: list[tuple[DemoGroup, list[ModelResult]]], fmt: str, args: argparse.Namespace,
            skipped: list[str], stdout: IO[str] | None = None) -> Rendered:
    view = layer_view(args, stdout)
    with_layers = layer_options_given(args)
    if fmt == "json":
        return json_rendered("demo", {"groups": [
            {"title": group.title, "main": _main_report(results).to_dict(),
             "layers": {r.name: select_layers(r.layers, view).to_dict() for r in results if r.layers is not None}}
            for group, results in shown], "notes": skipped})
    if fmt == "html":
        from deeplite_like.reports.html import document, notes_html, report_section

        sections, nav = [], []
        for index, (group, results) in enumerate(shown):
            anchor = f"group-{index + 1}"
            nav.append((anchor, group.title))
            sections.append(report_section(_main_report(results), anchor))
            for result in results:
                if result.layers is not None:
                    sections.append(report_section(select_layers(result.layers, view, layer_title(result)),
                                                   collapse_table=True))
        if skipped:
            sections.append(notes_html(skipped))
        return Rendered(document("deeplite-like demo: the bundled models", sections,
                                 subtitle="each teacher against its student", nav=nav))
    parts = []
    for group, results in shown:
        reports = [_main_report(results)]
        if with_layers:
            reports += [select_layers(r.layers, view, layer_title(r)) for r in results if r.layers is not None]
        for report in reports:
            parts.append(render_text(report, fmt, view) + ("" if fmt == "markdown" else "\n"))
    parts += [f"- {note}\n" if fmt == "markdown" else f"note: {note}\n" for note in skipped]
    return Rendered("\n".join(parts))
