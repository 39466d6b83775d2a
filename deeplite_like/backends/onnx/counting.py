"""``count_ops`` for ONNX files: every node priced by the formula table, per op type and per module.

One pass over the inferred graph in its stored (topological) order: each node's key
(``formulas.op_key``) finds its formula, or marks it free, or untracked (counted 0, listed in
``OpCount.untracked`` and warned about once, by name and count). Subgraphs (``If``, ``Loop``,
``Scan``) are not entered in this slice: those ops are untracked, so a model using them says so.

Modules come from the node-name scopes exporters write: ``torch.onnx.export`` names a node
``/layer1/layer1.0/conv1/Conv`` (each scope is the module's name in its parent, a ``Sequential``'s
child spelled with its parent's name), which is the module ``layer1.0.conv1``; tf2onnx writes
``model/conv1/Conv2D``, the module ``model.conv1``. The dynamo exporter (``torch.onnx.export(...,
dynamo=True)``) names nodes ``node_Conv_0`` and writes the scopes into the node's metadata instead
(``pkg.torch.onnx.name_scopes``: ``['', 'features', 'features.0', 'conv2d']``), which is read first.
A node with no scope belongs to the root ``""``.
``by_module`` is nested like the torch backend's: a module's figures include its children's; its
``calls`` is the number of nodes directly inside it (a file records no module calls).
"""
from __future__ import annotations

import ast
import warnings
from typing import Any, Mapping

from deeplite_like.backends.onnx.formulas import FORMULAS, FREE, op_key
from deeplite_like.backends.onnx.graph import GraphInfo, NodeView, prepare
from deeplite_like.results import Cost, OpCount, OpStats

__all__ = ["UntrackedOnnxOpWarning", "count_graph", "count_ops", "module_of", "node_module"]


class UntrackedOnnxOpWarning(UserWarning):
    """Nodes ran with no formula and are not known to be free: they were counted as 0."""


def module_of(node_name: str) -> str:
    """The module a node belongs to, from its name's scopes (``/layer1/layer1.0/conv1/Conv`` -> ``layer1.0.conv1``)."""
    parts = [p for p in node_name.replace("\\", "/").split("/") if p]
    if len(parts) < 2:
        return ""
    module = ""
    for scope in parts[:-1]:  # the last part is the node's own name (``Conv``, ``Conv_1``)
        if module and scope.startswith(module + "."):
            module = scope  # torch spells a Sequential's child with its full name: features/features.0
        elif module and module.endswith("." + scope.split(".")[0]) and "." in scope:
            module = module.rpartition(".")[0] + "." + scope
        else:
            module = f"{module}.{scope}" if module else scope
    return module


_TORCH_SCOPES = "pkg.torch.onnx.name_scopes"


def node_module(node: Any) -> str:
    """The module of a node: the dynamo exporter's metadata scopes if present, else its name's (``module_of``)."""
    for prop in node.metadata_props:
        if prop.key == _TORCH_SCOPES:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                break  # not the exporter's list: fall back to the name
            if isinstance(scopes, list) and len(scopes) >= 2 and all(isinstance(x, str) for x in scopes):
                return scopes[-2]  # qualified module names, outermost first; the last is the op itself
            break
    return module_of(node.name)


def _ancestors(module: str) -> list[str]:
    """``a.b.c`` -> ``["", "a", "a.b", "a.b.c"]``."""
    names = [""]
    parts = module.split(".") if module else []
    for i in range(len(parts)):
        names.append(".".join(parts[:i + 1]))
    return names


def count_graph(info: GraphInfo) -> OpCount:
    """The ``OpCount`` of an inferred graph (``graph.prepare``); see the module docstring."""
    result = OpCount()
    by_module: dict[str, OpStats] = {}
    for node in info.model.graph.node:
        key = op_key(node.domain, node.op_type)
        view = NodeView(node, info)
        function = FORMULAS.get(key)
        if function is not None:
            try:
                cost = function(view)
            except (KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
                raise ValueError(f"cannot price {view.label}: {type(exc).__name__}: {exc}") from exc
        elif key in FREE:
            cost = Cost()
        else:
            result.untracked[key] = result.untracked.get(key, 0) + 1
            cost = Cost()
        result.by_operator.setdefault(key, OpStats()).add(cost.macs, cost.flops)
        module = node_module(node)
        result.module_ops.setdefault(module, {}).setdefault(key, OpStats()).add(cost.macs, cost.flops)
        for name in _ancestors(module):
            by_module.setdefault(name, OpStats()).add(cost.macs, cost.flops, 1 if name == module else 0)
        result.macs += cost.macs
        result.flops += cost.flops
    result.by_module = by_module
    batches = {shape[0] for shape in info.input_shapes.values() if shape}
    result.batch_size = batches.pop() if len(batches) == 1 else None
    return result


def untracked_message(untracked: Mapping[str, int]) -> str:
    listing = ", ".join(f"{name} ({calls} node{'s' if calls != 1 else ''})"
                        for name, calls in sorted(untracked.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"{len(untracked)} ONNX op type(s) have no FLOP formula and were counted as 0: {listing}. "
            "Add a formula to deeplite_like.backends.onnx.formulas (formula decorator) or list the op in FREE.")


def count_ops(model: Any, inputs_or_shapes: Any = None, warn_untracked: bool = True, **dims: int) -> OpCount:
    """MACs and FLOPs of one run of an ONNX model, per op type and per module.

    Args:
        model: a path to a ``.onnx`` file, its bytes, or an ``onnx.ModelProto`` (never modified).
        inputs_or_shapes: the inputs' shapes: ``None`` (the model's fixed shapes), one array or
            shape for a one-input model, a sequence in graph-input order, or a dict by input name.
        warn_untracked: warn once (``UntrackedOnnxOpWarning``) about ops with no formula.
        **dims: symbolic dimensions bound by name (``batch=8, sequence=128``).

    Returns an ``OpCount`` whose ``batch_size`` is the inputs' common first dimension (if any).
    """
    result = count_graph(prepare(model, inputs_or_shapes, dims))
    if warn_untracked and result.untracked:
        warnings.warn(untracked_message(result.untracked), UntrackedOnnxOpWarning, stacklevel=2)
    return result
