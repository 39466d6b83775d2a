"""The command line's subcommands, one module each, and what they share.

``profile``, ``compare`` and ``demo`` (the subcommands); ``loading`` (MODEL specs, with
``torch_files`` and ``keras_files`` for the framework forms), ``inputs`` (``--input-shape``,
``--inputs``), ``run`` (profiling a loaded model), ``output`` (formats and ``--output``),
``progress`` (the terminal progress bar), ``options`` (shared flags), ``errors`` (exit codes).
The entry point is ``deeplite_like.cli:main``.
"""
