"""hermes-sessions: everything about chat sessions that a bot or agent host needs.

Session keys from where a message came from, reset policies, pluggable storage, CJK-aware search,
bounded memory files and LLM tools. This module only re-exports; see ``docs/api.md``.

Names are loaded on first use (``import hermes_sessions`` stays cheap and does no I/O); type
checkers see them through the ``TYPE_CHECKING`` imports below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hermes_sessions._version import __version__

if TYPE_CHECKING:
    from hermes_sessions.aio import (
        AsyncSessionStore as AsyncSessionStore,
    )
    from hermes_sessions.clock import (
        FrozenClock as FrozenClock,
    )
    from hermes_sessions.clock import (
        SystemClock as SystemClock,
    )
    from hermes_sessions.exceptions import (
        AmbiguousMemoryMatchError as AmbiguousMemoryMatchError,
    )
    from hermes_sessions.exceptions import (
        AmbiguousSessionError as AmbiguousSessionError,
    )
    from hermes_sessions.exceptions import (
        BackendClosedError as BackendClosedError,
    )
    from hermes_sessions.exceptions import (
        ConflictError as ConflictError,
    )
    from hermes_sessions.exceptions import (
        CorruptRecordError as CorruptRecordError,
    )
    from hermes_sessions.exceptions import (
        HermesSessionsError as HermesSessionsError,
    )
    from hermes_sessions.exceptions import (
        IncompatibleStoreError as IncompatibleStoreError,
    )
    from hermes_sessions.exceptions import (
        InvalidCursorError as InvalidCursorError,
    )
    from hermes_sessions.exceptions import (
        InvalidIdError as InvalidIdError,
    )
    from hermes_sessions.exceptions import (
        InvalidKeyError as InvalidKeyError,
    )
    from hermes_sessions.exceptions import (
        InvalidMemoryContentError as InvalidMemoryContentError,
    )
    from hermes_sessions.exceptions import (
        InvalidTitleError as InvalidTitleError,
    )
    from hermes_sessions.exceptions import (
        LeaseHeldError as LeaseHeldError,
    )
    from hermes_sessions.exceptions import (
        LockTimeoutError as LockTimeoutError,
    )
    from hermes_sessions.exceptions import (
        MemoryContentBlockedError as MemoryContentBlockedError,
    )
    from hermes_sessions.exceptions import (
        MemoryDriftError as MemoryDriftError,
    )
    from hermes_sessions.exceptions import (
        MemoryEntryNotFoundError as MemoryEntryNotFoundError,
    )
    from hermes_sessions.exceptions import (
        MemoryLimitError as MemoryLimitError,
    )
    from hermes_sessions.exceptions import (
        MemoryRefusedError as MemoryRefusedError,
    )
    from hermes_sessions.exceptions import (
        SessionNotFoundError as SessionNotFoundError,
    )
    from hermes_sessions.exceptions import (
        StorageError as StorageError,
    )
    from hermes_sessions.exceptions import (
        TitleConflictError as TitleConflictError,
    )
    from hermes_sessions.exceptions import (
        UnknownMemoryTargetError as UnknownMemoryTargetError,
    )
    from hermes_sessions.ids import (
        new_session_id as new_session_id,
    )
    from hermes_sessions.ids import (
        validate_session_id as validate_session_id,
    )
    from hermes_sessions.keys import (
        KeyPolicy as KeyPolicy,
    )
    from hermes_sessions.keys import (
        ParsedSessionKey as ParsedSessionKey,
    )
    from hermes_sessions.keys import (
        WhatsAppIdentity as WhatsAppIdentity,
    )
    from hermes_sessions.keys import (
        build_session_key as build_session_key,
    )
    from hermes_sessions.keys import (
        parse_session_key as parse_session_key,
    )
    from hermes_sessions.keys import (
        session_key_parts as session_key_parts,
    )
    from hermes_sessions.memory import (
        MemoryResult as MemoryResult,
    )
    from hermes_sessions.memory import (
        MemorySnapshot as MemorySnapshot,
    )
    from hermes_sessions.memory import (
        MemoryStore as MemoryStore,
    )
    from hermes_sessions.models import (
        Message as Message,
    )
    from hermes_sessions.models import (
        ResetDecision as ResetDecision,
    )
    from hermes_sessions.models import (
        SessionEntry as SessionEntry,
    )
    from hermes_sessions.models import (
        SessionRecord as SessionRecord,
    )
    from hermes_sessions.models import (
        SessionSource as SessionSource,
    )
    from hermes_sessions.paths import (
        default_home as default_home,
    )
    from hermes_sessions.policy import (
        ResetPolicies as ResetPolicies,
    )
    from hermes_sessions.policy import (
        ResetPolicy as ResetPolicy,
    )
    from hermes_sessions.policy import (
        evaluate_reset as evaluate_reset,
    )
    from hermes_sessions.policy import (
        host_timezone as host_timezone,
    )
    from hermes_sessions.policy import (
        next_reset_at as next_reset_at,
    )
    from hermes_sessions.queries import (
        SearchHit as SearchHit,
    )
    from hermes_sessions.queries import (
        SearchQuery as SearchQuery,
    )
    from hermes_sessions.queries import (
        SessionPage as SessionPage,
    )
    from hermes_sessions.queries import (
        SessionQuery as SessionQuery,
    )
    from hermes_sessions.queries import (
        SessionSummary as SessionSummary,
    )
    from hermes_sessions.queries import (
        Visibility as Visibility,
    )
    from hermes_sessions.store import (
        AnchoredView as AnchoredView,
    )
    from hermes_sessions.store import (
        EraseReport as EraseReport,
    )
    from hermes_sessions.store import (
        Lineage as Lineage,
    )
    from hermes_sessions.store import (
        LineageLink as LineageLink,
    )
    from hermes_sessions.store import (
        PruneReport as PruneReport,
    )
    from hermes_sessions.store import (
        RotateEvent as RotateEvent,
    )
    from hermes_sessions.store import (
        SessionLookup as SessionLookup,
    )
    from hermes_sessions.store import (
        SessionStore as SessionStore,
    )
    from hermes_sessions.threats import (
        ThreatScanner as ThreatScanner,
    )
    from hermes_sessions.titles import (
        next_title_in_lineage as next_title_in_lineage,
    )
    from hermes_sessions.titles import (
        sanitize_title as sanitize_title,
    )
    from hermes_sessions.titles import (
        title_key as title_key,
    )
    from hermes_sessions.tools import (
        MEMORY_TOOL_SCHEMA as MEMORY_TOOL_SCHEMA,
    )
    from hermes_sessions.tools import (
        SESSION_SEARCH_TOOL_SCHEMA as SESSION_SEARCH_TOOL_SCHEMA,
    )
    from hermes_sessions.tools import (
        SearchToolContext as SearchToolContext,
    )
    from hermes_sessions.tools import (
        handle_memory as handle_memory,
    )
    from hermes_sessions.tools import (
        handle_session_search as handle_session_search,
    )

_EXPORTS: dict[str, str] = {
    "AnchoredView": "hermes_sessions.store",
    "EraseReport": "hermes_sessions.store",
    "Lineage": "hermes_sessions.store",
    "LineageLink": "hermes_sessions.store",
    "PruneReport": "hermes_sessions.store",
    "AsyncSessionStore": "hermes_sessions.aio",
    "FrozenClock": "hermes_sessions.clock",
    "SystemClock": "hermes_sessions.clock",
    "AmbiguousMemoryMatchError": "hermes_sessions.exceptions",
    "AmbiguousSessionError": "hermes_sessions.exceptions",
    "BackendClosedError": "hermes_sessions.exceptions",
    "ConflictError": "hermes_sessions.exceptions",
    "CorruptRecordError": "hermes_sessions.exceptions",
    "HermesSessionsError": "hermes_sessions.exceptions",
    "IncompatibleStoreError": "hermes_sessions.exceptions",
    "InvalidCursorError": "hermes_sessions.exceptions",
    "InvalidIdError": "hermes_sessions.exceptions",
    "InvalidKeyError": "hermes_sessions.exceptions",
    "InvalidMemoryContentError": "hermes_sessions.exceptions",
    "InvalidTitleError": "hermes_sessions.exceptions",
    "LeaseHeldError": "hermes_sessions.exceptions",
    "LockTimeoutError": "hermes_sessions.exceptions",
    "MemoryContentBlockedError": "hermes_sessions.exceptions",
    "MemoryDriftError": "hermes_sessions.exceptions",
    "MemoryEntryNotFoundError": "hermes_sessions.exceptions",
    "MemoryLimitError": "hermes_sessions.exceptions",
    "MemoryRefusedError": "hermes_sessions.exceptions",
    "SessionNotFoundError": "hermes_sessions.exceptions",
    "StorageError": "hermes_sessions.exceptions",
    "TitleConflictError": "hermes_sessions.exceptions",
    "UnknownMemoryTargetError": "hermes_sessions.exceptions",
    "new_session_id": "hermes_sessions.ids",
    "validate_session_id": "hermes_sessions.ids",
    "KeyPolicy": "hermes_sessions.keys",
    "ParsedSessionKey": "hermes_sessions.keys",
    "WhatsAppIdentity": "hermes_sessions.keys",
    "build_session_key": "hermes_sessions.keys",
    "parse_session_key": "hermes_sessions.keys",
    "session_key_parts": "hermes_sessions.keys",
    "MemoryResult": "hermes_sessions.memory",
    "MemorySnapshot": "hermes_sessions.memory",
    "MemoryStore": "hermes_sessions.memory",
    "Message": "hermes_sessions.models",
    "ResetDecision": "hermes_sessions.models",
    "SessionEntry": "hermes_sessions.models",
    "SessionRecord": "hermes_sessions.models",
    "SessionSource": "hermes_sessions.models",
    "default_home": "hermes_sessions.paths",
    "ResetPolicies": "hermes_sessions.policy",
    "ResetPolicy": "hermes_sessions.policy",
    "evaluate_reset": "hermes_sessions.policy",
    "host_timezone": "hermes_sessions.policy",
    "next_reset_at": "hermes_sessions.policy",
    "SearchHit": "hermes_sessions.queries",
    "SearchQuery": "hermes_sessions.queries",
    "SessionPage": "hermes_sessions.queries",
    "SessionQuery": "hermes_sessions.queries",
    "SessionSummary": "hermes_sessions.queries",
    "Visibility": "hermes_sessions.queries",
    "RotateEvent": "hermes_sessions.store",
    "SessionLookup": "hermes_sessions.store",
    "SessionStore": "hermes_sessions.store",
    "ThreatScanner": "hermes_sessions.threats",
    "next_title_in_lineage": "hermes_sessions.titles",
    "sanitize_title": "hermes_sessions.titles",
    "title_key": "hermes_sessions.titles",
    "MEMORY_TOOL_SCHEMA": "hermes_sessions.tools",
    "SESSION_SEARCH_TOOL_SCHEMA": "hermes_sessions.tools",
    "SearchToolContext": "hermes_sessions.tools",
    "handle_memory": "hermes_sessions.tools",
    "handle_session_search": "hermes_sessions.tools",
}

__all__ = [
    "MEMORY_TOOL_SCHEMA",
    "SESSION_SEARCH_TOOL_SCHEMA",
    "AmbiguousMemoryMatchError",
    "AmbiguousSessionError",
    "AnchoredView",
    "AsyncSessionStore",
    "BackendClosedError",
    "ConflictError",
    "CorruptRecordError",
    "EraseReport",
    "FrozenClock",
    "HermesSessionsError",
    "IncompatibleStoreError",
    "InvalidCursorError",
    "InvalidIdError",
    "InvalidKeyError",
    "InvalidMemoryContentError",
    "InvalidTitleError",
    "KeyPolicy",
    "LeaseHeldError",
    "Lineage",
    "LineageLink",
    "LockTimeoutError",
    "MemoryContentBlockedError",
    "MemoryDriftError",
    "MemoryEntryNotFoundError",
    "MemoryLimitError",
    "MemoryRefusedError",
    "MemoryResult",
    "MemorySnapshot",
    "MemoryStore",
    "Message",
    "ParsedSessionKey",
    "PruneReport",
    "ResetDecision",
    "ResetPolicies",
    "ResetPolicy",
    "RotateEvent",
    "SearchHit",
    "SearchQuery",
    "SearchToolContext",
    "SessionEntry",
    "SessionLookup",
    "SessionNotFoundError",
    "SessionPage",
    "SessionQuery",
    "SessionRecord",
    "SessionSource",
    "SessionStore",
    "SessionSummary",
    "StorageError",
    "SystemClock",
    "ThreatScanner",
    "TitleConflictError",
    "UnknownMemoryTargetError",
    "Visibility",
    "WhatsAppIdentity",
    "__version__",
    "build_session_key",
    "default_home",
    "evaluate_reset",
    "handle_memory",
    "handle_session_search",
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes_sessions' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
