"""Helpers for hosts: the context window, the agent cache, the context prompt, reset notices.

Everything a gateway writes around a session besides storing it; see ``docs/host-helpers.md``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from hermes_sessions.host._cache import CacheClosedError, SessionCache
from hermes_sessions.host._notices import (
    NOTICES_EN,
    NoticeTemplates,
    ResetNotice,
    format_duration,
    reset_notice,
)
from hermes_sessions.host._prompt import (
    CONTEXT_PROMPT_EN,
    ContextPromptTemplates,
    is_shared_session,
    prefix_sender,
    session_context_prompt,
)
from hermes_sessions.host._zh import CONTEXT_PROMPT_ZH, NOTICES_ZH
from hermes_sessions.window import (
    ContextWindow,
    context_window,
    estimate_tokens,
    reactions_of,
    with_reactions,
)

__all__ = [
    "CONTEXT_PROMPT_EN",
    "CONTEXT_PROMPT_ZH",
    "NOTICES_EN",
    "NOTICES_ZH",
    "CacheClosedError",
    "ContextPromptTemplates",
    "ContextWindow",
    "NoticeTemplates",
    "ResetNotice",
    "SessionCache",
    "context_window",
    "estimate_tokens",
    "format_duration",
    "is_shared_session",
    "prefix_sender",
    "reactions_of",
    "reset_notice",
    "session_context_prompt",
    "with_reactions",
]
