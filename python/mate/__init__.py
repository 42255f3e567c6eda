"""MATE for Python: API logging (mate.api_logging), the guarded allocator (mate.memory_debug),
replay of dumped calls (python -m mate replay) and the `mate` program (python -m mate ...).

All of it is MATE's C++ core (libmate.so) through the extension mate._mate: one registry, one
log sink, one dump writer and one guard per process, shared with C++ kernel libraries.
"""

import json as _json
from dataclasses import dataclass as _dataclass
from typing import Optional as _Optional

from . import _mate
from ._version import __version__


@_dataclass(frozen=True)
class Variable:
    """One MATE_* (or external) variable as the registry sees it: `mate env --json`."""

    name: str
    value: _Optional[str]  # the text in effect; None when unset and without a default
    source: str  # "environment", "default", ...
    valid: bool
    error: _Optional[str]
    type: str
    default: str
    accepts: str
    doc: str


def env(all: bool = True) -> "dict[str, Variable]":
    """The registry: every variable (all=True) or those set, by name. Unknown MATE_* variables
    set in the environment are left out (`mate env` lists them, with a suggestion)."""
    report = _json.loads(_mate.env_json(all))
    out = {}
    for v in report.get("variables", []):
        out[v["name"]] = Variable(
            name=v["name"], value=v.get("value"), source=v["source"], valid=v["valid"], error=v.get("error"),
            type=v["type"], default=v["default"], accepts=v["accepts"], doc=v["doc"])
    return out


__all__ = ["env", "Variable", "__version__"]
