"""The command line's subcommands, one module each, and what they share.

``profile``, ``compare``, ``check`` and ``demo`` (the subcommands; ``sweep`` holds profile's
``--batch-sizes`` / ``--seq-lens``, ``quantities`` the strict parsing of check's ``2G``,
``5ms``, ``100MiB``, ``2%``); ``loading`` (MODEL specs, with ``torch_files`` and
``keras_files`` for the framework forms, ``export_archive`` checking a ``.pt2`` archive before
torch reads it, ``file_kinds`` telling what a file holds, and ``factory_guard`` refusing specs
that name no model factory), ``inputs`` (``--input-shape``, ``--inputs``; ``input_memory``
refuses inputs too large for this machine), ``run`` (profiling a loaded model; ``precision``
casts a copy for ``--dtype``, ``labels`` names ``--backward`` counts), ``output`` (formats and
``--output``; ``schema`` stamps JSON reports), ``progress`` (the terminal progress bar),
``options`` (shared flags), ``errors`` (exit codes).
The entry point is ``deeplite_like.cli:main``.
"""
