"""Session ids: making new ones and checking that an id is safe to use as a file name.

New ids look like Hermes's (``YYYYMMDD_HHMMSS_`` + 8 hex digits) but use UTC. Ids are opaque:
order sessions by ``started_at``, never by id (imported Hermes ids use local time).
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from hermes_sessions.clock import require_aware
from hermes_sessions.exceptions import InvalidIdError

__all__ = ["MAX_ID_LENGTH", "new_session_id", "validate_session_id"]

MAX_ID_LENGTH = 128
"""The longest session id :func:`validate_session_id` accepts, in characters.

.. versionadded:: 0.1.0
"""
_ID_CHARS = re.compile(r"[A-Za-z0-9_.-]+")


def new_session_id(now: datetime) -> str:
    """Return a fresh session id for a session started at ``now`` (an aware datetime).

    >>> new_session_id(datetime(2026, 5, 1, 2, 49, 22, tzinfo=UTC))[:16]
    '20260501_024922_'

    .. versionadded:: 0.1.0
    """
    require_aware(now, "new_session_id(now)")
    return f"{now.astimezone(UTC):%Y%m%d_%H%M%S}_{secrets.token_hex(4)}"


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` unchanged if it is a safe id, else raise :class:`InvalidIdError`.

    Safe means: a string of 1-128 characters from ``A-Z a-z 0-9 _ . -``, containing no ``..`` and
    not starting with ``.``. Such an id can never name a path outside the directory it is joined
    to, nor a hidden file.

    .. versionadded:: 0.1.0
    """
    if not isinstance(session_id, str):
        raise InvalidIdError(session_id, f"expected a string, got {type(session_id).__name__}")
    if not session_id:
        raise InvalidIdError(session_id, "it is empty")
    if len(session_id) > MAX_ID_LENGTH:
        raise InvalidIdError(session_id, f"it is longer than {MAX_ID_LENGTH} characters")
    if _ID_CHARS.fullmatch(session_id) is None:
        raise InvalidIdError(session_id, "it contains characters outside the allowed set")
    if ".." in session_id:
        raise InvalidIdError(session_id, "it contains '..'")
    if session_id.startswith("."):
        raise InvalidIdError(session_id, "it starts with '.'")
    return session_id
