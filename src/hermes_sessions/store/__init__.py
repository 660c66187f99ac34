"""The session lifecycle on top of any backend: :class:`SessionStore` and what it returns.

``SessionStore`` lives in ``_session_store``; each of its concerns in a private module named for
it: ``_rotations`` (rotation plans, the reset policy, the compression lease), ``_lineage``
(lineage, the compression tip, the branch marker), ``_targets`` (resume targets), ``_titles``,
``_edits`` (rewinds, recalls and edits), ``_views`` (listings, grouped search, context),
``_retention`` (the retention engine), ``_incognito`` (lanes kept in memory only), ``_ledger``
(the turn ledger's rules), ``_migration`` (key migration) and ``_housekeeping`` (prune, erase,
rebuilding routing). This package re-exports the public names; those of the modules a turn
does not need (``_retention``, ``_housekeeping``, ``_migration``) load on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.store._incognito import IncognitoPolicy, IncognitoRouter
from hermes_sessions.store._ledger import DEFAULT_CLAIM_TTL, Acceptance, Answer, Ledger
from hermes_sessions.store._lineage import Lineage, LineageLink
from hermes_sessions.store._rotations import EndingSession, RotateEvent, SessionLookup
from hermes_sessions.store._session_store import SessionStore, StoreOptions
from hermes_sessions.store._views import AnchoredView

if TYPE_CHECKING:
    from hermes_sessions.store._housekeeping import EraseReport, MemoryEraser, PruneReport
    from hermes_sessions.store._migration import (
        KEY_MERGED,
        Collisions,
        KeyMerge,
        KeyMigrationReport,
        KeyMove,
        KeySkip,
        SkipReason,
    )
    from hermes_sessions.store._retention import (
        RetentionPolicy,
        RetentionRemoval,
        RetentionReport,
    )

__all__ = [
    "DEFAULT_CLAIM_TTL",
    "KEY_MERGED",
    "Acceptance",
    "AnchoredView",
    "Answer",
    "Collisions",
    "EndingSession",
    "EraseReport",
    "IncognitoPolicy",
    "IncognitoRouter",
    "KeyMerge",
    "KeyMigrationReport",
    "KeyMove",
    "KeySkip",
    "Ledger",
    "Lineage",
    "LineageLink",
    "MemoryEraser",
    "PruneReport",
    "RetentionPolicy",
    "RetentionRemoval",
    "RetentionReport",
    "RotateEvent",
    "SessionLookup",
    "SessionStore",
    "SkipReason",
    "StoreOptions",
]

# Modules a turn does not need, loaded when one of their names is first asked for.
_LAZY: Final[dict[str, str]] = {
    **dict.fromkeys(("EraseReport", "MemoryEraser", "PruneReport"), "_housekeeping"),
    **dict.fromkeys(
        ("KEY_MERGED", "Collisions", "KeyMerge", "KeyMigrationReport", "KeyMove", "KeySkip"),
        "_migration",
    ),
    "SkipReason": "_migration",
    **dict.fromkeys(("RetentionPolicy", "RetentionRemoval", "RetentionReport"), "_retention"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_sessions.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hermes_sessions.store.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
