"""TableReport: a generic table of raw rows, rendered to the same formats."""
from __future__ import annotations

import csv
import io
import json

import pytest

from deeplite_like.reports import TableReport
from deeplite_like.units import format_bytes

ROWS = [
    {"layer": "conv1", "type": "Conv2d", "params": 1728, "macs": 1_769_472, "bytes": 6912, "shape": (1, 64, 32, 32)},
    {"layer": "fc", "type": "Linear", "params": 650, "macs": 640, "bytes": 2600, "shape": (1, 10), "extra": "ignored"},
    {"layer": "relu", "type": "ReLU", "params": 0, "macs": 0, "bytes": None},  # no shape recorded
]
COLUMNS = ["layer", "type", "params", "macs", "bytes", "shape"]


def report(**kwargs) -> TableReport:
    return TableReport("Layers of <net>", COLUMNS, ROWS, **kwargs)


def test_default_cells_and_alignment():
    table = report().to_table()
    assert [list(row) for row in table.rows] == [
        # 1,769,472 has 7 digits: format_number writes ints >= 10,000 with separators
        ["conv1", "Conv2d", "1728", "1,769,472", "6912", "(1, 64, 32, 32)"],
        ["fc", "Linear", "650", "640", "2600", "(1, 10)"],
        ["relu", "ReLU", "0", "0", "", ""],
    ]
    # numeric columns right-aligned, text and tuples left-aligned
    assert [table.align[name] for name in COLUMNS] == ["l", "l", "r", "r", "r", "l"]


def test_formatters_and_headers():
    table = report(formatters={"bytes": lambda b: "" if b is None else format_bytes(b)},
                   headers={"macs": "MACs", "bytes": "Size"}).to_table()
    assert table.field_names == ["layer", "type", "params", "MACs", "Size", "shape"]
    # 6912 B / 1024 = 6.75 KiB -> "6.750 KiB"; 2600 / 1024 = 2.539 KiB
    assert [row[4] for row in table.rows] == ["6.750 KiB", "2.539 KiB", ""]


def test_dict_json_and_csv_keep_raw_values():
    data = report(notes=["totals: 2378 params"]).to_dict()
    assert data["columns"] == COLUMNS and data["notes"] == ["totals: 2378 params"]
    assert data["rows"][1] == {"layer": "fc", "type": "Linear", "params": 650, "macs": 640, "bytes": 2600,
                               "shape": [1, 10]}  # columns only; tuples become lists
    assert json.loads(report().to_json()) == report().to_dict()
    rows = list(csv.DictReader(io.StringIO(report().to_csv())))
    assert rows[0] == {"layer": "conv1", "type": "Conv2d", "params": "1728", "macs": "1769472", "bytes": "6912",
                       "shape": "[1,64,32,32]"}
    assert rows[2]["bytes"] == "" and rows[2]["shape"] == ""


def test_text_markdown_html():
    r = report(notes=["a * note"])
    assert str(r).splitlines()[-1] == "- a * note"
    md = r.to_markdown().splitlines()
    assert md[0] == r"**Layers of \<net\>**"
    assert md[-1] == r"- a \* note"
    assert all(line.count("|") == 7 for line in md[2:2 + 2 + len(ROWS)])  # 6 columns
    html = r._repr_html_()
    assert "<net>" not in html and "Layers of &lt;net&gt;" in html and "<li>a * note</li>" in html


def test_invalid_columns_are_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        TableReport("t", ["a", "b", "a"], [])
    with pytest.raises(ValueError, match=r"formatters name unknown columns \['nope'\]"):
        TableReport("t", ["a"], [], formatters={"nope": str})
    with pytest.raises(ValueError, match=r"headers name unknown columns \['x'\]"):
        TableReport("t", ["a"], [], headers={"x": "X"})
