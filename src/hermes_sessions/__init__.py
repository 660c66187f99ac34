"""hermes-sessions: everything about chat sessions that a bot or agent host needs.

Session keys from where a message came from, reset policies, pluggable storage, CJK-aware search,
bounded memory files and LLM tools. This module only re-exports; see ``docs/api.md``.
"""

from hermes_sessions._version import __version__
from hermes_sessions.exceptions import (
    AmbiguousSessionError,
    BackendClosedError,
    ConflictError,
    CorruptRecordError,
    HermesSessionsError,
    IncompatibleStoreError,
    InvalidCursorError,
    InvalidIdError,
    InvalidKeyError,
    InvalidTitleError,
    LockTimeoutError,
    SessionNotFoundError,
    StorageError,
    TitleConflictError,
)
from hermes_sessions.ids import new_session_id, validate_session_id
from hermes_sessions.keys import (
    KeyPolicy,
    ParsedSessionKey,
    WhatsAppIdentity,
    build_session_key,
    parse_session_key,
    session_key_parts,
)
from hermes_sessions.models import (
    Message,
    ResetDecision,
    SessionEntry,
    SessionRecord,
    SessionSource,
)
from hermes_sessions.paths import default_home
from hermes_sessions.policy import (
    ResetPolicies,
    ResetPolicy,
    evaluate_reset,
    host_timezone,
    next_reset_at,
)
from hermes_sessions.queries import (
    SearchHit,
    SearchQuery,
    SessionPage,
    SessionQuery,
    SessionSummary,
    Visibility,
)
from hermes_sessions.titles import next_title_in_lineage, sanitize_title, title_key

__all__ = [
    "AmbiguousSessionError",
    "BackendClosedError",
    "ConflictError",
    "CorruptRecordError",
    "HermesSessionsError",
    "IncompatibleStoreError",
    "InvalidCursorError",
    "InvalidIdError",
    "InvalidKeyError",
    "InvalidTitleError",
    "KeyPolicy",
    "LockTimeoutError",
    "Message",
    "ParsedSessionKey",
    "ResetDecision",
    "ResetPolicies",
    "ResetPolicy",
    "SearchHit",
    "SearchQuery",
    "SessionEntry",
    "SessionNotFoundError",
    "SessionPage",
    "SessionQuery",
    "SessionRecord",
    "SessionSource",
    "SessionSummary",
    "StorageError",
    "TitleConflictError",
    "Visibility",
    "WhatsAppIdentity",
    "__version__",
    "build_session_key",
    "default_home",
    "evaluate_reset",
    "host_timezone",
    "new_session_id",
    "next_reset_at",
    "next_title_in_lineage",
    "parse_session_key",
    "sanitize_title",
    "session_key_parts",
    "title_key",
    "validate_session_id",
]
