"""The version of the command line's JSON reports, written into every one of them.

``schema_version`` is ``"MAJOR.MINOR"``: MINOR grows when fields are added (old readers keep
working), MAJOR when a field is renamed, removed or changes meaning. docs/cli.rst documents
the fields; ``tests/cli/test_json_schema.py`` checks every report against that description.
"""
from __future__ import annotations

from typing import Any

SCHEMA_VERSION = "1.0"
TOOL = "deeplite-like"


def stamped(report: str, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``schema_version``, ``report`` (its kind) and the tool's name and version first."""
    from deeplite_like._version import __version__

    return {"schema_version": SCHEMA_VERSION, "report": report, "tool": TOOL, "tool_version": __version__, **data}


def schema_major(version: object) -> int | None:
    """The MAJOR of a ``schema_version`` (``None`` when it is missing or not ``"MAJOR.MINOR"``)."""
    if not isinstance(version, str):
        return None
    major, _, minor = version.partition(".")
    return int(major) if major.isdigit() and minor.isdigit() else None
