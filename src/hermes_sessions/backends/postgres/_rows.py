"""Rows of the PostgreSQL backend and the models they hold, and the SQL of session listings.

Scalar fields the database filters or orders on are columns; the rest of a message or routing
entry is one JSON ``body`` made by the library's converter, stored as ``text`` (not ``jsonb``,
which cannot hold U+0000 and reorders keys), so unknown message fields round-trip losslessly.

PostgreSQL ``text`` cannot hold U+0000 either. JSON bodies escape it (JSON's own escape); free-text
columns go through :func:`enc` / :func:`dec`, a reversible escape (a backslash is doubled,
U+0000 becomes a backslash and ``0``) that leaves ordinary strings unchanged.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, overload

from hermes_sessions.backends.rules import DECODING_ERRORS, decodes, row_key
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import Message, SessionEntry, SessionRecord, entry_from_storage
from hermes_sessions.queries import decode_cursor, make_preview
from hermes_sessions.serde import (
    entry_body_values,
    message_dict,
    stored_message,
    stored_messages,
    unstructure,
)
from hermes_sessions.titles import lineage_key, title_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hermes_sessions.queries import SessionQuery, Visibility

__all__ = [
    "ENTRY_COLUMNS",
    "MESSAGE_COLUMNS",
    "SESSION_COLUMNS",
    "SESSION_WIDTH",
    "dec",
    "dumps",
    "enc",
    "entry_body",
    "entry_from_row",
    "listing",
    "message_body",
    "message_from_row",
    "messages_from_rows",
    "preview_of",
    "record_from_row",
    "record_values",
    "visibility_sql",
]

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON; control characters (U+0000 included) are escaped by the encoder."""
    return _ENCODER.encode(value)


@overload
def enc(value: str) -> str: ...
@overload
def enc(value: None) -> None: ...
@overload
def enc(value: str | None) -> str | None: ...
def enc(value: str | None) -> str | None:
    """A string as a ``text`` column holds it (U+0000 escaped, reversibly)."""
    if value is None or ("\\" not in value and "\x00" not in value):
        return value
    return value.replace("\\", "\\\\").replace("\x00", "\\0")


def _unescape(value: str) -> str:
    out: list[str] = []
    chars = iter(value)
    for char in chars:
        if char == "\\":
            following = next(chars, "")
            out.append("\x00" if following == "0" else following)
        else:
            out.append(char)
    return "".join(out)


def dec(value: str | None) -> str | None:
    """The string a ``text`` column written by :func:`enc` holds."""
    if value is None or "\\" not in value:
        return value
    return _unescape(value)


def utc(moment: datetime) -> datetime:
    """A ``timestamptz`` value in UTC (psycopg returns the server session's zone)."""
    return moment.astimezone(UTC)


# -- session records -------------------------------------------------------------------------------

SESSION_COLUMNS: Final = (
    "s.id, s.source, s.session_key, s.user_id, s.title, s.parent_session_id, s.started_at, "
    "s.ended_at, s.end_reason, s.last_active_at, s.message_count, s.tool_call_count, "
    "s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, "
    "s.reasoning_tokens, s.estimated_cost_usd, s.model, s.model_config, s.system_prompt, "
    "s.archived, s.metadata, s.revision"
)
"""The columns :func:`record_from_row` reads, from ``sessions AS s``."""
SESSION_WIDTH: Final = SESSION_COLUMNS.count(",") + 1

_RECORD_COLUMNS: Final = (
    "id",
    "source",
    "session_key",
    "user_id",
    "title",
    "title_key",
    "lineage_key",
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


@decodes("sessions", row_key)
def record_from_row(row: Sequence[Any]) -> SessionRecord:
    """Build a record from the :data:`SESSION_COLUMNS` of a row."""
    ended_at = row[7]
    return SessionRecord(
        id=row[0],
        source=row[1],
        session_key=dec(row[2]),
        user_id=dec(row[3]),
        title=dec(row[4]),
        parent_session_id=row[5],
        started_at=utc(row[6]),
        ended_at=None if ended_at is None else utc(ended_at),
        end_reason=dec(row[8]),
        last_active_at=utc(row[9]),
        message_count=row[10],
        tool_call_count=row[11],
        input_tokens=row[12],
        output_tokens=row[13],
        cache_read_tokens=row[14],
        cache_write_tokens=row[15],
        reasoning_tokens=row[16],
        estimated_cost_usd=row[17],
        model=dec(row[18]),
        model_config=json.loads(row[19]),
        system_prompt=dec(row[20]),
        archived=row[21],
        metadata=json.loads(row[22]),
        revision=row[23],
    )


def record_values(record: SessionRecord) -> dict[str, Any]:
    """The column values of a record (``sessions`` minus ``seq`` and ``next_message_id``)."""
    return {
        "id": record.id,
        "source": record.source,
        "session_key": enc(record.session_key),
        "user_id": enc(record.user_id),
        "title": enc(record.title),
        "title_key": None if record.title is None else enc(title_key(record.title)),
        "lineage_key": None if record.title is None else enc(lineage_key(record.title)),
        "parent_session_id": record.parent_session_id,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "end_reason": enc(record.end_reason),
        "last_active_at": record.last_active,
        "message_count": record.message_count,
        "tool_call_count": record.tool_call_count,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cache_read_tokens": record.cache_read_tokens,
        "cache_write_tokens": record.cache_write_tokens,
        "reasoning_tokens": record.reasoning_tokens,
        "estimated_cost_usd": record.estimated_cost_usd,
        "model": enc(record.model),
        "model_config": dumps(record.model_config),
        "system_prompt": enc(record.system_prompt),
        "archived": record.archived,
        "metadata": dumps(record.metadata),
        "revision": record.revision,
    }


INSERT_SESSION: Final = (
    "INSERT INTO {s}.sessions ("
    + ", ".join(_RECORD_COLUMNS)
    + ") VALUES ("
    + ", ".join(f"%({name})s" for name in _RECORD_COLUMNS)
    + ") ON CONFLICT (id) DO NOTHING"
)
"""Insert a record from :func:`record_values` (an existing id is left as it is)."""


# -- messages --------------------------------------------------------------------------------------

MESSAGE_COLUMNS: Final = "m.id, m.active, m.body"
"""The columns :func:`message_from_row` reads, from ``messages AS m``."""

_COLUMN_FIELDS: Final = frozenset({"id", "session_id", "active"})


def message_body(message: Message) -> str:
    """The JSON body of a message: every field except those kept in columns."""
    return dumps(message_dict(message, skip=_COLUMN_FIELDS))


@decodes("messages", row_key)
def message_from_row(row: Sequence[Any], session_id: str) -> Message:
    """Build a message from the :data:`MESSAGE_COLUMNS` of a row."""
    return stored_message(json.loads(row[2]), row[0], session_id, bool(row[1]))


def messages_from_rows(rows: Sequence[Sequence[Any]], session_id: str) -> list[Message]:
    """Build the messages of rows of :data:`MESSAGE_COLUMNS` (a window read), in order.

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

ENTRY_COLUMNS: Final = (
    "session_key, session_id, revision, created_at, updated_at, last_prompt_tokens, body"
)
_ENTRY_FIELDS: Final = (
    "session_key",
    "session_id",
    "revision",
    "created_at",
    "updated_at",
    "last_prompt_tokens",
)
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


def entry_body(entry: SessionEntry) -> str:
    """The JSON body of an entry: every field except those kept in columns."""
    data = unstructure(entry)
    for name in _ENTRY_FIELDS:
        data.pop(name, None)
    return dumps(data)


@functools.lru_cache(maxsize=4096)
def _entry_fields(body: str) -> tuple[tuple[str, Any], ...]:
    """The fields an entry's JSON body holds, validated once per distinct body."""
    probe = entry_body_values(json.loads(body))
    return tuple((name, getattr(probe, name)) for name in _BODY_FIELDS)


@decodes("entries", row_key)
def entry_from_row(row: Sequence[Any]) -> SessionEntry:
    """Build an entry from the :data:`ENTRY_COLUMNS` of a row (columns checked, body once)."""
    key, session_id, revision, created, updated, prompt_tokens, body = row
    if not (
        isinstance(key, str)
        and isinstance(session_id, str)
        and isinstance(revision, int)
        and isinstance(created, datetime)
        and isinstance(updated, datetime)
        and (prompt_tokens is None or isinstance(prompt_tokens, int))
        and isinstance(body, str)
    ):
        raise CorruptRecordError(f"routing entry {key!r} has a malformed row")
    validate_session_id(session_id)
    return entry_from_storage(
        session_key=dec(key),
        session_id=session_id,
        revision=revision,
        created_at=utc(created),
        updated_at=utc(updated),
        last_prompt_tokens=prompt_tokens,
        **dict(_entry_fields(body)),
    )


def entry_values(entry: SessionEntry, revision: int) -> tuple[Any, ...]:
    """The :data:`ENTRY_COLUMNS` values of ``entry`` stored with ``revision``."""
    return (
        enc(entry.session_key),
        entry.session_id,
        revision,
        entry.created_at,
        entry.updated_at,
        entry.last_prompt_tokens,
        entry_body(entry),
    )


# -- listings --------------------------------------------------------------------------------------


def visibility_sql(rule: Visibility, params: list[Any]) -> str:
    """The SQL condition of :meth:`Visibility.allows` on ``sessions AS s``."""
    options = []
    if rule.session_key is not None:
        options.append("s.session_key = %s")
        params.append(enc(rule.session_key))
    if rule.user_id is not None:
        options.append("(s.user_id = %s AND s.source = %s)")
        params += [enc(rule.user_id), rule.platform]
    return "(" + " OR ".join(options) + ")" if options else "false"


def in_list(column: str, values: Sequence[Any], params: list[Any], *, negate: bool = False) -> str:
    """``column = ANY(%s)`` (or its negation) with the values bound as one array."""
    params.append([enc(value) if isinstance(value, str) else value for value in values])
    return f"NOT ({column} = ANY(%s))" if negate else f"{column} = ANY(%s)"


def _listing_filters(query: SessionQuery, params: list[Any]) -> list[str]:  # noqa: C901, PLR0912  # one per filter
    where = []
    if query.sources is not None:
        where.append(in_list("s.source", query.sources, params))
    if query.exclude_sources:
        where.append(in_list("s.source", query.exclude_sources, params, negate=True))
    for column, value in (
        ("s.session_key", query.session_key),
        ("s.user_id", query.user_id),
        ("s.parent_session_id", query.parent_session_id),
    ):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(enc(value))
    if query.archived is not None:
        where.append("s.archived = %s")
        params.append(query.archived)
    if query.ended is not None:
        where.append("s.end_reason IS NOT NULL" if query.ended else "s.end_reason IS NULL")
    if query.exclude_end_reasons:
        excluded = in_list("s.end_reason", query.exclude_end_reasons, params, negate=True)
        where.append(f"(s.end_reason IS NULL OR {excluded})")
    if query.min_messages:
        where.append("s.message_count >= %s")
        params.append(query.min_messages)
    for column, after, before in (
        ("s.started_at", query.started_after, query.started_before),
        ("s.last_active_at", query.active_after, query.active_before),
    ):
        if after is not None:
            where.append(f"{column} >= %s")
            params.append(after)
        if before is not None:
            where.append(f"{column} < %s")
            params.append(before)
    if query.id_prefix is not None:
        where.append("left(s.id, length(%s)) = %s")
        params += [query.id_prefix, query.id_prefix]
    if query.title is not None:
        where.append("s.title_key = %s")
        params.append(enc(title_key(query.title)))
    if query.title_lineage is not None:
        where.append("s.lineage_key = %s")
        params.append(enc(lineage_key(query.title_lineage)))
    if query.visible_to is not None:
        where.append(visibility_sql(query.visible_to, params))
    return where


def listing(query: SessionQuery) -> tuple[str, list[Any]]:
    """The SQL (with ``{s}``) of one page of ``list_sessions`` and its parameters.

    It selects :data:`SESSION_COLUMNS`, then the body of the first active user message (the
    preview), at most ``limit + 1`` rows (the extra one says whether a next page exists).
    """
    params: list[Any] = []
    where = _listing_filters(query, params)
    column = "s.started_at" if query.order == "started" else "s.last_active_at"
    direction = "DESC" if query.descending else "ASC"
    if query.cursor is not None:
        position, session_id = decode_cursor(query.cursor)
        where.append(f"({column}, s.id) {'<' if query.descending else '>'} (%s, %s)")
        params += [position, session_id]
    sql = (
        f"SELECT {SESSION_COLUMNS}, (SELECT m.body FROM {{s}}.messages AS m "
        "WHERE m.session_seq = s.seq AND m.active AND m.role = 'user' "
        "ORDER BY m.id LIMIT 1) FROM {s}.sessions AS s"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {column} {direction}, s.id {direction}"
    if query.limit is not None:
        sql += " LIMIT %s"
        params.append(query.limit + 1)
    return sql, params
