"""The session lifecycle on top of any backend: :class:`SessionStore` and what it returns.

``SessionStore`` lives in ``_session_store``; each of its concerns in a private module named for
it: ``_rotations`` (rotation plans, the reset policy, the compression lease), ``_lineage``
(lineage, the compression tip, the branch marker), ``_targets`` (resume targets), ``_titles``,
``_edits`` (rewinds, recalls and edits), ``_views`` (listings, grouped search, context),
``_retention`` (the retention engine), ``_incognito`` (lanes kept in memory only), ``_ledger``
(the turn ledger's rules), ``_migration`` (key migration) and ``_housekeeping`` (prune, erase,
rebuilding routing). This package re-exports the public names.
"""

from __future__ import annotations

from hermes_sessions.store._housekeeping import EraseReport, MemoryEraser, PruneReport
from hermes_sessions.store._incognito import IncognitoPolicy, IncognitoRouter
from hermes_sessions.store._ledger import DEFAULT_CLAIM_TTL, Acceptance, Answer, Ledger
from hermes_sessions.store._lineage import Lineage, LineageLink
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
from hermes_sessions.store._rotations import RotateEvent, SessionLookup
from hermes_sessions.store._session_store import SessionStore, StoreOptions
from hermes_sessions.store._views import AnchoredView

__all__ = [
    "DEFAULT_CLAIM_TTL",
    "KEY_MERGED",
    "Acceptance",
    "AnchoredView",
    "Answer",
    "Collisions",
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
