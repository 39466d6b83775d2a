"""The per-layer table as an indented tree (``--tree``), as torchinfo and DeepSpeed print it.

A new ``TableReport`` whose first column holds each module's own name indented under its
parent (``├─ conv1``, ``│  └─ 0``) in the model's order; every other column and every raw
value is unchanged, so the tree is fitted, sorted out and exported like the flat table.
"""
from __future__ import annotations

from deeplite_like.reports.table import TableReport

TREE_COLUMN = "module"


def _parent(name: str) -> str | None:
    if name == "":
        return None
    return name.rsplit(".", 1)[0] if "." in name else ""


def tree_labels(names: list[str]) -> list[str]:
    """Indented labels of qualified module names (the model ``''`` first, then in the given order).

    A name's parent is the longest shown name it extends (``layers.0`` under ``layers``); a
    module whose parent is not shown hangs under the closest shown ancestor.
    """
    shown = set(names)

    def parent(name: str) -> str | None:
        up = _parent(name)
        while up is not None and up not in shown:
            up = _parent(up)
        return up

    parents = {name: parent(name) for name in names}
    children: dict[str | None, list[str]] = {}
    for name in names:
        children.setdefault(parents[name], []).append(name)
    labels: dict[str, str] = {}

    def visit(name: str, prefix: str, last: bool, root: bool) -> None:
        up = parents[name]
        local = name if not up else name[len(up) + 1:]
        labels[name] = "(model)" if name == "" else (local if root else prefix + ("└─ " if last else "├─ ") + local)
        below = prefix if root else prefix + ("   " if last else "│  ")
        kids = children.get(name, [])
        for index, kid in enumerate(kids):
            visit(kid, below, index == len(kids) - 1, False)

    tops = children.get(None, [])
    for index, top in enumerate(tops):
        visit(top, "", index == len(tops) - 1, True)
    return [labels[name] for name in names]


def as_tree(table: TableReport) -> TableReport:
    """``table`` (a per-layer table with a ``module`` column) with its modules drawn as a tree."""
    from deeplite_like.reports.html import qualified_names

    if TREE_COLUMN not in table.columns:
        raise ValueError(f"{table.title!r} has no {TREE_COLUMN!r} column to draw as a tree; columns: {table.columns}")
    labels = tree_labels(qualified_names(table.rows))
    rows = [{**row, TREE_COLUMN: label} for row, label in zip(table.rows, labels)]
    return TableReport(table.title, table.columns, rows, formatters=table.formatters, headers=table.headers,
                       notes=table.notes)
