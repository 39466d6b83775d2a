"""Model profiles of Keras 3 models: one call (``build_model_profile``) and a training step (``KerasFlopsProfiler``).

One concept per module:

    session.py        what is attached while a profile runs: the layer recorder, the operator
                      counter, the phase hooks; taken off at stop
    phases.py         which phase runs (forward, backward, optimizer, other), from class-level
                      hooks shared safely by threads and overlapping profiles
    shared.py         a process-wide change made by the first profile and undone by the last
    counters.py       the operators outside the layers, per phase (TensorFlow op callback,
                      torch dispatch mode); priced by ``counting/formulas/tf_ops.py``
    assemble.py       a session -> ``ModelProfile`` (module tree, phases, operator tables)
    flops_profiler.py ``KerasFlopsProfiler``
    model_profile.py  ``build_model_profile``

``deeplite_like.backends.keras.profile`` re-exports the names the framework-free core imports.
"""
