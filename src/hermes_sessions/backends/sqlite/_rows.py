"""Rows of the SQLite backend and the models they hold: conversions both ways, and no SQL.

Scalar fields the database filters or orders on are columns; the rest of a message or routing
entry is one JSON ``body`` made by the library's converter (so unknown message fields in
``extra`` round-trip losslessly). Times are integer microseconds since the epoch.

Each ``*_FIELDS`` tuple is the order of the values a ``*_from_row`` function reads; the statement
modules select those columns in that order.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from hermes_sessions.backends.rules import DECODING_ERRORS, decodes, row_key
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import Message, SessionEntry, SessionRecord, entry_from_storage
from hermes_sessions.queries import make_preview
from hermes_sessions.serde import (
    compact_json,
    entry_body_values,
    message_dict,
    stored_message,
    stored_messages,
    unstructure,
)
from hermes_sessions.titles import lineage_key, title_key

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ENTRY_FIELDS",
    "MESSAGE_FIELDS",
    "SESSION_FIELDS",
    "entry_body",
    "entry_from_row",
    "from_us",
    "message_body",
    "message_from_row",
    "messages_from_rows",
    "preview_of",
    "record_from_row",
    "record_row",
    "to_us",
]

# -- times -----------------------------------------------------------------------------------------

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def to_us(moment: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch."""
    return (moment - EPOCH) // _MICROSECOND


def from_us(value: int) -> datetime:
    """Integer microseconds since the epoch as an aware UTC datetime."""
    return EPOCH + timedelta(microseconds=value)


# -- session records -------------------------------------------------------------------------------

SESSION_FIELDS: Final = (
    "id",
    "source",
    "session_key",
    "user_id",
    "title",
    "parent_session_id",
    "started_at",
    "ended_at",
    "end_reason",
    "last_active_at",
    "message_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "estimated_cost_usd",
    "model",
    "model_config",
    "system_prompt",
    "archived",
    "metadata",
    "revision",
)
"""The ``sessions`` columns :func:`record_from_row` reads, in order."""


@decodes("sessions", row_key)
def record_from_row(row: Sequence[Any]) -> SessionRecord:
    """Build a record from the :data:`SESSION_FIELDS` of a row."""
    ended_at = row[7]
    return SessionRecord(
        id=row[0],
        source=row[1],
        session_key=row[2],
        user_id=row[3],
        title=row[4],
        parent_session_id=row[5],
        started_at=from_us(row[6]),
        ended_at=None if ended_at is None else from_us(ended_at),
        end_reason=row[8],
        last_active_at=from_us(row[9]),
        message_count=row[10],
        tool_call_count=row[11],
        input_tokens=row[12],
        output_tokens=row[13],
        cache_read_tokens=row[14],
        cache_write_tokens=row[15],
        reasoning_tokens=row[16],
        estimated_cost_usd=row[17],
        model=row[18],
        model_config=json.loads(row[19]),
        system_prompt=row[20],
        archived=bool(row[21]),
        metadata=json.loads(row[22]),
        revision=row[23],
    )


def record_row(record: SessionRecord) -> dict[str, Any]:
    """The column values of a record (``sessions`` minus ``seq``)."""
    return {
        "id": record.id,
        "source": record.source,
        "session_key": record.session_key,
        "user_id": record.user_id,
        "title": record.title,
        "title_key": None if record.title is None else title_key(record.title),
        "lineage_key": None if record.title is None else lineage_key(record.title),
        "parent_session_id": record.parent_session_id,
        "started_at": to_us(record.started_at),
        "ended_at": None if record.ended_at is None else to_us(record.ended_at),
        "end_reason": record.end_reason,
        "last_active_at": to_us(record.last_active),
        "message_count": record.message_count,
        "tool_call_count": record.tool_call_count,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cache_read_tokens": record.cache_read_tokens,
        "cache_write_tokens": record.cache_write_tokens,
        "reasoning_tokens": record.reasoning_tokens,
        "estimated_cost_usd": record.estimated_cost_usd,
        "model": record.model,
        "model_config": compact_json(record.model_config),
        "system_prompt": record.system_prompt,
        "archived": int(record.archived),
        "metadata": compact_json(record.metadata),
        "revision": record.revision,
    }


# -- messages --------------------------------------------------------------------------------------

MESSAGE_FIELDS: Final = ("id", "active", "body")
"""The ``messages`` columns :func:`message_from_row` reads, in order."""

_COLUMN_FIELDS: Final = frozenset({"id", "session_id", "active"})


def message_body(message: Message) -> str:
    """The JSON body of a message: every field except those kept in columns."""
    return compact_json(message_dict(message, skip=_COLUMN_FIELDS))


@decodes("messages", row_key)
def message_from_row(row: Sequence[Any], session_id: str) -> Message:
    """Build a message from the :data:`MESSAGE_FIELDS` of a row."""
    return stored_message(json.loads(row[2]), row[0], session_id, bool(row[1]))


def messages_from_rows(rows: Sequence[Sequence[Any]], session_id: str) -> list[Message]:
    """Build the messages of rows of :data:`MESSAGE_FIELDS` (a window read), in order.

    Rows the library wrote are decoded without re-validating each field
    (:func:`~hermes_sessions.serde.stored_messages`); if one is damaged, the rows are decoded one
    by one so that the ``CorruptRecordError`` names it.
    """
    try:
        return stored_messages(rows, session_id)
    except DECODING_ERRORS:
        return [message_from_row(row, session_id) for row in rows]


@decodes("messages")
def preview_of(body: str | None) -> str | None:
    """The listing preview of a message body (``None`` when there is no message)."""
    if body is None:
        return None
    return make_preview(json.loads(body).get("content"))


# -- routing entries -------------------------------------------------------------------------------

ENTRY_FIELDS: Final = (
    "session_key",
    "session_id",
    "revision",
    "created_at",
    "updated_at",
    "last_prompt_tokens",
    "body",
)
"""The ``entries`` columns :func:`entry_from_row` reads (and a write stores), in order."""


def entry_body(entry: SessionEntry) -> str:
    """The JSON body of an entry: every field except those kept in columns."""
    data = unstructure(entry)
    for name in ENTRY_FIELDS[:-1]:
        data.pop(name, None)
    return compact_json(data)


_BODY_FIELDS: Final = (
    "origin",
    "display_name",
    "platform",
    "chat_type",
    "suspended",
    "resume_pending",
    "resume_reason",
    "previous_session_id",
    "pending_reset",
)


@functools.lru_cache(maxsize=4096)
def _entry_fields(body: str) -> tuple[tuple[str, Any], ...]:
    """The fields an entry's JSON body holds, validated once per distinct body.

    Bodies repeat (a key's origin and flags rarely change), and reading an entry is on the path
    of every message, so the JSON is parsed and checked by the models only once per body.
    """
    probe = entry_body_values(json.loads(body))
    return tuple((name, getattr(probe, name)) for name in _BODY_FIELDS)


@decodes("entries", row_key)
def entry_from_row(row: Sequence[Any]) -> SessionEntry:
    """Build an entry from the :data:`ENTRY_FIELDS` of a row.

    The typed columns are checked here and the JSON body by the converter (once per distinct
    body), so the entry itself is built without running its validators again.
    """
    key, session_id, revision, created, updated, prompt_tokens, body = row
    if not (
        isinstance(key, str)
        and isinstance(session_id, str)
        and isinstance(revision, int)
        and isinstance(created, int)
        and isinstance(updated, int)
        and (prompt_tokens is None or isinstance(prompt_tokens, int))
        and isinstance(body, str)
    ):
        raise CorruptRecordError(f"routing entry {key!r} has a malformed row")
    validate_session_id(session_id)
    return entry_from_storage(
        session_key=key,
        session_id=session_id,
        revision=revision,
        created_at=from_us(created),
        updated_at=from_us(updated),
        last_prompt_tokens=prompt_tokens,
        **dict(_entry_fields(body)),
    )
