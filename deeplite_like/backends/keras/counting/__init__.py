"""Layer-level MAC/FLOP counting for Keras 3 models (TensorFlow, torch or JAX backend).

``count_ops`` runs the model once with every layer's ``call`` recorded (``recorder.py``) and
prices each call with a layer formula (``registry.py``, filled by ``formulas/``), using the
torch backend's conventions, so the same architecture counts the same in both backends.
``count_ops(..., method='graph')`` cross-checks with TensorFlow's profiler (``tf_ops.py``).
``register_layer_formula`` and ``register_free_layer`` extend the table.

Importing this package imports neither Keras nor TensorFlow; ``count_ops`` imports Keras on
first use, with TensorFlow's native start-up output silenced (``.._tf``).
"""
from deeplite_like.errors import CountingError, FormulaError, ForwardError, UntrackedLayerWarning

from .engine import count_ops
from .registry import (
    Cost,
    CountOptions,
    LayerCall,
    TensorSpec,
    register_free_layer,
    register_layer_formula,
    unregister_layer_formula,
)

__all__ = [
    "Cost", "CountOptions", "CountingError", "FormulaError", "ForwardError", "LayerCall", "TensorSpec",
    "UntrackedLayerWarning", "count_ops", "register_free_layer", "register_layer_formula",
    "unregister_layer_formula",
]
