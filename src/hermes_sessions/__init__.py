"""hermes-sessions: everything about chat sessions that a bot or agent host needs.

Session keys from where a message came from, reset policies, pluggable storage, CJK-aware search,
bounded memory files and LLM tools. This module only re-exports; see ``docs/api/``.

Names are loaded on first use (``import hermes_sessions`` stays cheap and does no I/O) from the
module ``_MODULES`` names for them. Type checkers see the same names through the grouped
``TYPE_CHECKING`` imports, re-exported because ``__all__`` (a literal, so that mypy and ruff can
read it) lists them; ``tests/test_public_api.py`` checks that the three agree.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions._version import __version__

if TYPE_CHECKING:
    from hermes_sessions.aio import AsyncSessionStore
    from hermes_sessions.clock import FrozenClock, SystemClock
    from hermes_sessions.exceptions import (
        AdapterPayloadError,
        AmbiguousMemoryMatchError,
        AmbiguousSessionError,
        BackendClosedError,
        ConflictError,
        CorruptRecordError,
        DecryptionError,
        EncryptionKeyError,
        EncryptionMismatchError,
        HermesSessionsError,
        IncognitoLaneError,
        IncognitoMemoryError,
        IncompatibleStoreError,
        InvalidArgumentError,
        InvalidCursorError,
        InvalidIdError,
        InvalidKeyError,
        InvalidMemoryContentError,
        InvalidSourceError,
        InvalidTitleError,
        InvalidValueError,
        LeaseHeldError,
        LockTimeoutError,
        MemoryContentBlockedError,
        MemoryDriftError,
        MemoryEntryNotFoundError,
        MemoryLimitError,
        MemoryRefusedError,
        MemoryScopeError,
        MessageTooLargeError,
        MissingDependencyError,
        NaiveDatetimeError,
        SessionInUseError,
        SessionNotFoundError,
        StateTooLargeError,
        StorageError,
        TitleConflictError,
        UnknownMemoryTargetError,
    )
    from hermes_sessions.ids import new_session_id, validate_session_id
    from hermes_sessions.keys import (
        KeyPolicy,
        ParsedSessionKey,
        WhatsAppIdentity,
        build_session_key,
        is_private_lane,
        parse_session_key,
        session_key_parts,
    )
    from hermes_sessions.legacy_keys import read_session_key
    from hermes_sessions.memory import (
        MemoryContext,
        MemoryResult,
        MemoryScope,
        MemorySnapshot,
        MemoryStore,
        ScopedMemory,
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
    from hermes_sessions.results import AppendResult
    from hermes_sessions.state import DELETE, SessionState, StateScope
    from hermes_sessions.store import (
        AnchoredView,
        EraseReport,
        IncognitoPolicy,
        KeyMigrationReport,
        Lineage,
        LineageLink,
        PruneReport,
        RetentionPolicy,
        RetentionRemoval,
        RetentionReport,
        RotateEvent,
        SessionLookup,
        SessionStore,
    )
    from hermes_sessions.threats import ThreatScanner
    from hermes_sessions.titles import next_title_in_lineage, sanitize_title, title_key
    from hermes_sessions.tools import (
        MEMORY_RESULT_SCHEMA,
        MEMORY_TOOL_SCHEMA,
        SESSION_SEARCH_RESULT_SCHEMA,
        SESSION_SEARCH_TOOL_SCHEMA,
        SearchToolContext,
        handle_memory,
        handle_session_search,
    )
    from hermes_sessions.usage import Usage

_MODULES: Final[dict[str, tuple[str, ...]]] = {
    "hermes_sessions.aio": ("AsyncSessionStore",),
    "hermes_sessions.clock": ("FrozenClock", "SystemClock"),
    "hermes_sessions.exceptions": (
        "AdapterPayloadError",
        "AmbiguousMemoryMatchError",
        "AmbiguousSessionError",
        "BackendClosedError",
        "ConflictError",
        "CorruptRecordError",
        "DecryptionError",
        "EncryptionKeyError",
        "EncryptionMismatchError",
        "HermesSessionsError",
        "IncognitoLaneError",
        "IncognitoMemoryError",
        "IncognitoPolicy",
        "IncompatibleStoreError",
        "InvalidArgumentError",
        "InvalidCursorError",
        "InvalidIdError",
        "InvalidKeyError",
        "InvalidMemoryContentError",
        "InvalidSourceError",
        "InvalidTitleError",
        "InvalidValueError",
        "LeaseHeldError",
        "LockTimeoutError",
        "MemoryContentBlockedError",
        "MemoryDriftError",
        "MemoryEntryNotFoundError",
        "MemoryLimitError",
        "MemoryRefusedError",
        "MemoryScopeError",
        "MessageTooLargeError",
        "MissingDependencyError",
        "NaiveDatetimeError",
        "SessionInUseError",
        "SessionNotFoundError",
        "StateTooLargeError",
        "StorageError",
        "TitleConflictError",
        "UnknownMemoryTargetError",
    ),
    "hermes_sessions.ids": ("new_session_id", "validate_session_id"),
    "hermes_sessions.keys": (
        "KeyPolicy",
        "ParsedSessionKey",
        "WhatsAppIdentity",
        "build_session_key",
        "is_private_lane",
        "parse_session_key",
        "session_key_parts",
    ),
    "hermes_sessions.legacy_keys": ("read_session_key",),
    "hermes_sessions.memory": (
        "MemoryContext",
        "MemoryResult",
        "MemoryScope",
        "MemorySnapshot",
        "MemoryStore",
        "ScopedMemory",
    ),
    "hermes_sessions.results": ("AppendResult",),
    "hermes_sessions.models": (
        "Message",
        "ResetDecision",
        "SessionEntry",
        "SessionRecord",
        "SessionSource",
    ),
    "hermes_sessions.paths": ("default_home",),
    "hermes_sessions.policy": (
        "ResetPolicies",
        "ResetPolicy",
        "evaluate_reset",
        "host_timezone",
        "next_reset_at",
    ),
    "hermes_sessions.queries": (
        "SearchHit",
        "SearchQuery",
        "SessionPage",
        "SessionQuery",
        "SessionSummary",
        "Visibility",
    ),
    "hermes_sessions.store": (
        "AnchoredView",
        "EraseReport",
        "IncognitoPolicy",
        "KeyMigrationReport",
        "Lineage",
        "LineageLink",
        "PruneReport",
        "RetentionPolicy",
        "RetentionRemoval",
        "RetentionReport",
        "RotateEvent",
        "SessionLookup",
        "SessionStore",
    ),
    "hermes_sessions.state": ("DELETE", "SessionState", "StateScope"),
    "hermes_sessions.threats": ("ThreatScanner",),
    "hermes_sessions.titles": ("next_title_in_lineage", "sanitize_title", "title_key"),
    "hermes_sessions.tools": (
        "MEMORY_RESULT_SCHEMA",
        "MEMORY_TOOL_SCHEMA",
        "SESSION_SEARCH_RESULT_SCHEMA",
        "SESSION_SEARCH_TOOL_SCHEMA",
        "SearchToolContext",
        "handle_memory",
        "handle_session_search",
    ),
    "hermes_sessions.usage": ("Usage",),
}
"""Every public name, by the module it is loaded from."""

_EXPORTS: Final = {name: module for module, names in _MODULES.items() for name in names}
"""Every public name → its module (what ``__getattr__`` looks up)."""

__all__ = [
    "DELETE",
    "MEMORY_RESULT_SCHEMA",
    "MEMORY_TOOL_SCHEMA",
    "SESSION_SEARCH_RESULT_SCHEMA",
    "SESSION_SEARCH_TOOL_SCHEMA",
    "AdapterPayloadError",
    "AmbiguousMemoryMatchError",
    "AmbiguousSessionError",
    "AnchoredView",
    "AppendResult",
    "AsyncSessionStore",
    "BackendClosedError",
    "ConflictError",
    "CorruptRecordError",
    "DecryptionError",
    "EncryptionKeyError",
    "EncryptionMismatchError",
    "EraseReport",
    "FrozenClock",
    "HermesSessionsError",
    "IncognitoLaneError",
    "IncognitoMemoryError",
    "IncognitoPolicy",
    "IncompatibleStoreError",
    "InvalidArgumentError",
    "InvalidCursorError",
    "InvalidIdError",
    "InvalidKeyError",
    "InvalidMemoryContentError",
    "InvalidSourceError",
    "InvalidTitleError",
    "InvalidValueError",
    "KeyMigrationReport",
    "KeyPolicy",
    "LeaseHeldError",
    "Lineage",
    "LineageLink",
    "LockTimeoutError",
    "MemoryContentBlockedError",
    "MemoryContext",
    "MemoryDriftError",
    "MemoryEntryNotFoundError",
    "MemoryLimitError",
    "MemoryRefusedError",
    "MemoryResult",
    "MemoryScope",
    "MemoryScopeError",
    "MemorySnapshot",
    "MemoryStore",
    "Message",
    "MessageTooLargeError",
    "MissingDependencyError",
    "NaiveDatetimeError",
    "ParsedSessionKey",
    "PruneReport",
    "ResetDecision",
    "ResetPolicies",
    "ResetPolicy",
    "RetentionPolicy",
    "RetentionRemoval",
    "RetentionReport",
    "RotateEvent",
    "ScopedMemory",
    "SearchHit",
    "SearchQuery",
    "SearchToolContext",
    "SessionEntry",
    "SessionInUseError",
    "SessionLookup",
    "SessionNotFoundError",
    "SessionPage",
    "SessionQuery",
    "SessionRecord",
    "SessionSource",
    "SessionState",
    "SessionStore",
    "SessionSummary",
    "StateScope",
    "StateTooLargeError",
    "StorageError",
    "SystemClock",
    "ThreatScanner",
    "TitleConflictError",
    "UnknownMemoryTargetError",
    "Usage",
    "Visibility",
    "WhatsAppIdentity",
    "__version__",
    "build_session_key",
    "default_home",
    "evaluate_reset",
    "handle_memory",
    "handle_session_search",
    "host_timezone",
    "is_private_lane",
    "new_session_id",
    "next_reset_at",
    "next_title_in_lineage",
    "parse_session_key",
    "read_session_key",
    "sanitize_title",
    "session_key_parts",
    "title_key",
    "validate_session_id",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_sessions' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
