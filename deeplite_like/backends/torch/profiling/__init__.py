"""Model profiles of PyTorch models: one call (``build_model_profile``) and a training step (``TorchFlopsProfiler``).

One concept per module:

    phases.py         ``PhaseCountingMode``: the counting engine's ``CountingMode`` filing every
                      operator under its phase (forward, backward, optimizer, other), per module
    timers.py         forward time per module and optimizer-step time, by hooks
    devices.py        which devices hold the model; synchronising around timed intervals
    assemble.py       a counted run -> the parts of a ``ModelProfile`` (module records, phases)
    entry_point.py    calling ``forward`` or another entry point (``func_name``) as the model's call
    inputs.py         a one-call profile's inputs, given or built from ``input_shape``
    run.py            one call (and its backward) on the real model or on meta copies
    flops_profiler.py ``TorchFlopsProfiler``
    model_profile.py  ``build_model_profile``

Nothing stays attached: module wrappers, hooks, optimizer hooks and the dispatch mode are
removed when a profile stops; no attribute is ever set on the model or its modules.
``deeplite_like.backends.torch.profile`` re-exports the names the framework-free core imports.
"""
