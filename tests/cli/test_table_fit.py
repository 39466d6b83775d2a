"""Tables that fit the terminal (``--width``, ``COLUMNS``), ``--columns``, ``--tree``, ``--sort`` and ``--top``.

Hand-derived costs used below: ``mlp(hidden=5, depth=2)`` on a batch of 2 is
``0`` Linear(4, 5): 25 params, 2*4*5 = 40 MACs, 2*40 + 10 bias adds = 90 FLOPs;
``2`` Linear(5, 5): 30 params, 50 MACs, 110 FLOPs; ``4`` Linear(5, 2): 12 params, 20 MACs,
44 FLOPs; ``1`` and ``3`` ReLU on 2x5: 0 params, 0 MACs, at most a few FLOPs per element.
"""
from __future__ import annotations

import json
import re

import pytest

from deeplite_like import metrics as M
from deeplite_like.reports import CompareReport, TableReport
from deeplite_like.reports.base import fit_report
from deeplite_like.reports.table import as_tree, tree_labels

MLP = "tests.cli.fixture_models:mlp"
FAST = ("--min-run-time", "0.01", "--no-progress")
MLP2 = ("profile", MLP, "--model-args", '{"depth": 2}', "--input-shape", "2,4", "--metrics", "macs,flops,params,layers",
        *FAST)


def _longest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def _header_cells(text: str, first: str) -> list[str]:
    """The cells of the first table line starting with ``| first``."""
    line = next(line for line in text.splitlines() if re.match(rf"\|\s*{re.escape(first)}\s*\|", line))
    return [cell.strip() for cell in line.strip("|").split("|")]


def layer_table() -> TableReport:
    rows = [{"module": "", "type": "Net", "input_shapes": "1x3x224x224", "params": 1000, "macs": 50000},
            {"module": "features.block1.conv", "type": "Conv2d", "input_shapes": "1x3x224x224", "params": 1000,
             "macs": 50000}]
    return TableReport("Per-layer summary: Net", ["module", "type", "input_shapes", "params", "macs"], rows,
                       headers={"module": "Module", "type": "Type", "input_shapes": "Input shapes", "params": "Params",
                                "macs": "MACs"}, notes=["batch size 1"])


# ------------------------------------------------------------------------------ fit_report
def test_a_table_that_fits_is_drawn_as_it_is():
    report = layer_table()
    # widths 20 + 6 + 12 + 6 + 6 = 50, plus 3 per column and 1: 66 characters.
    assert _longest(report.to_text()) == 66
    for width in (66, 80, 200):
        fitted = fit_report(report, width)
        assert fitted.text == report.to_text() and fitted.dropped == [] and not fitted.folded


def test_input_shapes_go_first_then_cells_fold():
    report = layer_table()
    # without Input shapes: 20 + 6 + 6 + 6 + 3*4 + 1 = 51 characters.
    fitted = fit_report(report, 60)
    assert fitted.dropped == ["Input shapes"] and not fitted.folded
    assert _header_cells(fitted.text, "Module") == ["Module", "Type", "Params", "MACs"]
    assert _longest(fitted.text.split("\n- ")[0]) == 51
    assert "- left out to fit 60 columns: Input shapes" in fitted.text
    # at 40, Type goes too (20 + 6 + 6 + 3*3 + 1 = 42, still too wide), then Params (20 + 6 + 2*3 + 1 = 33).
    fitted = fit_report(report, 40)
    assert fitted.dropped == ["Input shapes", "Type", "Params"] and _longest(fitted.text) == 40  # the note is wrapped
    assert _header_cells(fitted.text, "Module") == ["Module", "MACs"]


@pytest.mark.parametrize("width", [40, 50, 66, 80, 120, 200])
def test_no_line_is_longer_than_the_width(width):
    assert _longest(fit_report(layer_table(), width).text) <= width


def test_chosen_columns_are_kept_in_the_order_named():
    fitted = fit_report(layer_table(), 200, columns=["macs", "Module", "input shapes"])
    assert _header_cells(fitted.text, "MACs") == ["MACs", "Module", "Input shapes"]


def compare_report(names=("resnet_small", "resnet_small_student", "resnet_small_pruned")) -> CompareReport:
    macs = [12_500_000, 3_236_000, 6_000_000]
    return CompareReport([(name, "torch", {"macs": M.Macs(m), "total_params": M.TotalParams(m // 160)})
                          for name, m in zip(names, macs)])


# 64: the narrowest a 3-model compare can be drawn without breaking a unit ("params") inside a cell:
# 7 columns of at least 6 characters, plus 3 per column for borders and padding, plus 1: 7*6 + 7*3 + 1 = 64
@pytest.mark.parametrize("width", [64, 80, 100, 200])
def test_a_three_model_compare_fits(width):
    report = compare_report()
    fitted = fit_report(report, width)
    assert _longest(fitted.text) <= width
    if _longest(report.to_text()) <= width:
        assert fitted.text == report.to_text()
    else:  # models are numbered, the change columns say against which, and a note names them
        header = _header_cells(fitted.text, "Metric")[2:]
        # below 71 characters even "#2 vs #1" is cut: 13 (Computational) + 5 + 3*5 + 2*8 + 7*3 + 1 = 71
        if width >= 71:
            assert header == ["#1", "#2", "#2 vs #1", "#3", "#3 vs #1"]
        else:  # cut to the column's width, marked with an ellipsis
            assert [h.replace(" ", "") for h in header] == ["#1", "#2", "#2vs\u2026", "#3", "#3vs\u2026"]
        assert "#1: resnet_small (the reference); #2: resnet_small_student; #3: resnet_small_pruned" in \
            " ".join(line.strip(" -") for line in fitted.text.splitlines())


def test_wide_compare_keeps_its_headers():
    fitted = fit_report(compare_report(("a", "b", "c")), 200)
    assert _header_cells(fitted.text, "Metric") == ["Metric", "Unit", "a", "b", "b vs a", "c", "c vs a"]


# ------------------------------------------------------------------------------ the tree
def test_tree_labels_indent_children_under_their_parents():
    names = ["", "stem", "stem.0", "stem.1", "layers", "layers.0", "layers.0.conv", "fc"]
    assert tree_labels(names) == ["(model)", "├─ stem", "│  ├─ 0", "│  └─ 1", "├─ layers", "│  └─ 0",
                                  "│     └─ conv", "└─ fc"]


def test_a_module_whose_parent_is_not_shown_hangs_under_the_closest_shown_ancestor():
    # --top keeps leaves only: "a.b.c" and "d.e" hang under the model.
    assert tree_labels(["", "a.b.c", "d.e"]) == ["(model)", "├─ a.b.c", "└─ d.e"]


def test_as_tree_keeps_every_raw_value():
    tree = as_tree(layer_table())
    assert [row["module"] for row in tree.rows] == ["(model)", "└─ features.block1.conv"]
    assert [row["macs"] for row in tree.rows] == [50000, 50000] and tree.columns == layer_table().columns


# ------------------------------------------------------------------------------ the command line
@pytest.mark.parametrize("width", [80, 120, 200])
def test_profile_fits_the_width(cli, width):
    code, out, err = cli("profile", "zoo:resnet_small", "--width", str(width), "--min-run-time", "0.01",
                         "--no-progress")
    assert code == 0, err
    assert _longest(out) <= width
    header = _header_cells(out, "Module")
    if width == 200:  # the full per-layer table is 155 characters wide: nothing is left out
        assert header == ["Module", "Type", "Input shapes", "Output shapes", "Params", "MACs", "FLOPs",
                          "Output bytes", "MACs %", "Calls", "Time (hooked)"]
        assert "left out to fit" not in out
    else:
        assert header[0] == "Module" and "MACs" in header and "Input shapes" not in header
        assert f"left out to fit {width} columns: Input shapes" in out


@pytest.mark.parametrize("width", ["80", "200"])
def test_compare_follows_COLUMNS(cli, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", width)
    code, out, err = cli("compare", "zoo:resnet_small", "zoo:resnet_small_student", "zoo:resnet_small_student",
                         *FAST)
    assert code == 0, err
    assert _longest(out) <= int(width)
    header = _header_cells(out, "Metric")
    if width == "80":
        assert header == ["Metric", "Unit", "#1", "#2", "#2 vs #1", "#3", "#3 vs #1"]
    else:
        assert header[2:4] == ["resnet_small", "resnet_small_student"]


def test_width_0_and_files_get_every_column(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli(*MLP2, "--width", "0")
    assert code == 0 and "Input shapes" in _header_cells(out, "Module")
    target = tmp_path / "report.txt"
    code, _, _ = cli(*MLP2, "-o", str(target))
    assert code == 0 and "Input shapes" in _header_cells(target.read_text(), "Module")


def test_columns_option(cli):
    code, out, _ = cli(*MLP2, "--columns", "macs,Params,type")
    # the module column is always kept, first
    assert code == 0 and _header_cells(out, "Module") == ["Module", "MACs", "Params", "Type"]
    code, out, _ = cli(*MLP2, "--columns", "macs,params", "--format", "json")
    assert json.loads(out)["layers"]["columns"] == ["module", "macs", "params"]
    code, _, err = cli(*MLP2, "--columns", "mcas")
    assert code == 2 and "--columns: no column 'mcas'" in err and "did you mean 'macs'" in err


def test_tree_option(cli):
    code, out, _ = cli(*MLP2, "--tree", "--columns", "type,macs")
    rows = [_header_cells(out, name) for name in ("(model)", "├─ 0", "├─ 2", "└─ 4")]
    assert code == 0 and rows == [["(model)", "Sequential", "110"], ["├─ 0", "Linear", "40"], ["├─ 2", "Linear", "50"],
                                  ["└─ 4", "Linear", "20"]]
    code, _, err = cli(*MLP2, "--tree", "--sort", "macs")
    assert code == 2 and "--tree keeps the model's order" in err


# ------------------------------------------------------------------------------ --sort and --top
def _json_rows(cli, *argv):
    code, out, err = cli(*MLP2, "--format", "json", *argv)
    assert code == 0, err
    data = json.loads(out)["layers"]
    return [row["module"] for row in data["rows"]], data["notes"]


def test_sort_by_any_column(cli):
    # params: 2 (30), 0 (25), 4 (12), then the ReLUs (0) in the model's order; the model first.
    modules, notes = _json_rows(cli, "--sort", "params")
    assert modules == ["", "2", "0", "4", "1", "3"] and "sorted by Params, largest first" in notes
    modules, _ = _json_rows(cli, "--sort", "MACs")  # a header names a column too
    assert modules == ["", "2", "0", "4", "1", "3"]
    modules, notes = _json_rows(cli, "--sort", "type")  # text: A to Z, ties in the model's order
    assert modules == ["", "0", "2", "4", "1", "3"] and "sorted by Type" in notes


def test_top_by_any_metric(cli):
    modules, notes = _json_rows(cli, "--top", "2", "--sort", "flops")
    assert modules == ["", "2", "0"] and "the 2 of 5 leaf modules with the most FLOPs" in notes
    modules, notes = _json_rows(cli, "--top", "1", "--sort", "params")
    assert modules == ["", "2"]
    modules, _ = _json_rows(cli, "--top", "2")  # MACs by default
    assert modules == ["", "2", "0"]


def test_unknown_sort_column_is_a_usage_error(cli):
    code, _, err = cli(*MLP2, "--sort", "flop")
    assert code == 2 and "--sort: no column 'flop'" in err and "did you mean 'flops'" in err


def test_the_docs_80_column_captures_fit():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.rst").read_text(encoding="utf-8")
    blocks = re.findall(r"\.\. fit: 80\n\n\.\. code-block:: console\n\n((?:    .*\n|\n)+)", text)
    commands = [block.splitlines()[0] for block in blocks]
    assert "    $ COLUMNS=80 deeplite-like profile zoo:resnet_small" in commands
    assert "    $ COLUMNS=80 deeplite-like compare zoo:resnet_small zoo:resnet_small_student" in commands
    for block in blocks:
        output = [line[4:] for line in block.splitlines() if line.startswith("    ") and not
                  re.match(r"    (\$ |      )", line)]
        assert output and max(len(line) for line in output) <= 80
        assert any(line.startswith("+---") for line in output)  # a real table, captured
