"""The session lifecycle on top of any backend: :class:`SessionStore` and what it returns.

``SessionStore`` lives in ``_session_store``; each of its concerns (rotations and plans, lineage,
views, housekeeping) in a private module named for it. This package re-exports the public names.
"""

from __future__ import annotations

from hermes_sessions.store._session_store import RotateEvent, SessionLookup, SessionStore
from hermes_sessions.store._views import (
    AnchoredView,
    EraseReport,
    Lineage,
    LineageLink,
    PruneReport,
)

__all__ = [
    "AnchoredView",
    "EraseReport",
    "Lineage",
    "LineageLink",
    "PruneReport",
    "RotateEvent",
    "SessionLookup",
    "SessionStore",
]
