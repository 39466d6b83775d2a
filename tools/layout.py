"""Measure the package's layout: modules, import circles, repeated file names, header share.

    python tools/layout.py            # the figures, one per line
    python tools/layout.py --json     # the same, for a script

What it counts (static: the source is parsed, never imported):

* ``modules``: ``.py`` files under ``deeplite_like/``; ``small_modules``: those with under 45
  lines of code (not blank, not comment, not docstring).
* ``circles``: strongly connected groups of modules in the import graph, deferred imports
  (inside functions) included: a circle is a circle whether Python meets it at import time or
  later. ``from a import b`` is an edge to ``a`` (a package importing its own submodules, which
  import from it, is a circle too), and to ``a.b`` as well when that is a module;
  imports under ``if TYPE_CHECKING:`` count too (a type-only import still ties two modules); left
  out are a submodule's implicit imports of
  its parent packages.
* ``repeated_names``: file names used by more than one module, leaving out ``__init__.py``, the
  formula families (``*/formulas/*``) and parallel backend modules (the same path under
  ``backends/<framework>/``: ``backends/torch/memory.py`` and ``backends/keras/memory.py`` do the
  same job for two frameworks, as Keras' own ``backend/jax/nn.py`` and ``backend/torch/nn.py``),
  whose parallel names are the point.
* ``header_share``: the share of all lines that are module headers, the lines before a
  module's first statement that is not its docstring, an import or ``__all__``.
* ``deferred_imports``: import statements inside function bodies.
"""
from __future__ import annotations

import ast
import collections
import json
import sys
from pathlib import Path

PACKAGE = "deeplite_like"
ROOT = Path(__file__).resolve().parent.parent


def module_names(root: Path = ROOT) -> dict[str, Path]:
    names = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module):
    """(node, deferred) for each import statement (``if TYPE_CHECKING:`` blocks included)."""
    def walk(node, deferred):
        for child in ast.iter_child_nodes(node):
            yield from walk_one(child, deferred)

    def walk_one(node, deferred):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, deferred
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from walk(node, inner)

    yield from walk(tree, False)


def _targets(node, module: str, is_package: bool, known: set[str]):
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == PACKAGE:
                yield alias.name
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    if source.split(".")[0] != PACKAGE:
        return
    yield source  # `from pkg import sub` runs and reads pkg itself: an edge to pkg too
    for alias in node.names:
        candidate = f"{source}.{alias.name}"
        if candidate in known:
            yield candidate


def import_graph(names: dict[str, Path]):
    known = set(names)
    edges = collections.defaultdict(set)
    deferred = 0
    for module, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, is_deferred in _imports(tree):
            deferred += is_deferred
            for target in _targets(node, module, path.name == "__init__.py", known):
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in known and target != module:
                    edges[module].add(target)
    return edges, deferred


def circles(edges) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    nodes = set(edges) | {t for ts in edges.values() for t in ts}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _code_lines(source: str, tree: ast.Module) -> int:
    docstring_lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and number not in docstring_lines)


def _header_lines(source: str, tree: ast.Module) -> int:
    for position, node in enumerate(tree.body):
        is_docstring = position == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        is_all = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        is_guard = isinstance(node, ast.If) and _is_type_checking(node.test)
        if not (is_docstring or is_all or is_guard or isinstance(node, (ast.Import, ast.ImportFrom))):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            return first - 1
    return len(source.splitlines())


def _role(module: str) -> str:
    """A module's name with the framework left out of backend paths: parallel backend modules share it."""
    parts = module.split(".")
    if parts[1:2] == ["backends"] and len(parts) > 3:
        return ".".join(parts[:2] + ["<framework>"] + parts[3:])
    return module


def measure(root: Path = ROOT) -> dict:
    names = module_names(root)
    edges, deferred = import_graph(names)
    total = header = 0
    small = []
    for module, path in names.items():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        total += len(source.splitlines())
        header += _header_lines(source, tree)
        if path.name != "__init__.py" and _code_lines(source, tree) < 45:
            small.append(module)
    by_name = collections.defaultdict(set)
    for module, path in names.items():
        if path.name != "__init__.py" and "formulas" not in path.parts:
            by_name[path.name].add(_role(module))
    return {
        "modules": len(names),
        "lines": total,
        "small_modules": len(small),
        "circles": circles(edges),
        "repeated_names": {name: sorted(mods) for name, mods in sorted(by_name.items()) if len(mods) > 1},
        "header_share": round(header / total, 4),
        "deferred_imports": deferred,
    }


def main(argv=None) -> int:
    figures = measure()
    if "--json" in (argv if argv is not None else sys.argv[1:]):
        print(json.dumps(figures, indent=2))
        return 0
    print(f"modules            {figures['modules']} ({figures['small_modules']} under 45 lines of code)")
    print(f"lines              {figures['lines']}")
    print(f"header share       {figures['header_share']:.2%}")
    print(f"deferred imports   {figures['deferred_imports']}")
    print(f"import circles     {len(figures['circles'])}")
    for circle in figures["circles"]:
        print("    " + " <-> ".join(circle))
    print(f"repeated names     {len(figures['repeated_names'])}")
    for name, modules in figures["repeated_names"].items():
        print(f"    {name}: {', '.join(modules)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
