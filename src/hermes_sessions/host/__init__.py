"""Helpers for hosts: the context window, the agent cache, the context prompt, reset notices.

Everything a gateway writes around a session besides storing it; see ``docs/host-helpers.md``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from hermes_sessions.host._cache import CacheClosedError, SessionCache
from hermes_sessions.host._window import ContextWindow, context_window, estimate_tokens

__all__ = [
    "CacheClosedError",
    "ContextWindow",
    "SessionCache",
    "context_window",
    "estimate_tokens",
]
