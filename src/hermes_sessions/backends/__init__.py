"""Storage backends, one module each, imported on first use.

``from hermes_sessions.backends import InMemoryBackend`` works, but importing this package does
not import any backend module (nor its driver, such as ``sqlite3`` or ``psycopg``): each is loaded
when its name is first looked up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hermes_sessions.backends.inmemory import InMemoryBackend
    from hermes_sessions.backends.jsonl import JSONLBackend

__all__ = ["InMemoryBackend", "JSONLBackend"]

_MODULES = {
    "InMemoryBackend": "hermes_sessions.backends.inmemory",
    "JSONLBackend": "hermes_sessions.backends.jsonl",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
