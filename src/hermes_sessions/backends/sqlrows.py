"""What the SQL backends share, written once: rows and their models, filters and listings.

SQLite and PostgreSQL keep the same tables with the same columns: scalar fields the database
filters or orders on are columns; the rest of a message or routing entry is one JSON ``body``
made by the library's converter (so unknown message fields in ``extra`` round-trip losslessly).
They differ in a few ways only, which a :class:`SQLDialect` names: how a time is stored
(SQLite: integer microseconds since the epoch; PostgreSQL: ``timestamptz``), how free text is
stored (PostgreSQL's ``text`` cannot hold U+0000, so it is escaped), how a flag and an ``IN``
list are written, and the parameter mark. Everything else — which columns a record or entry has
and in which order, decoding a damaged row into a
:class:`~hermes_sessions.exceptions.CorruptRecordError`, the session filters of listings and
searches, the listing with its preview and cursor — is here (and the search scan in
:mod:`~hermes_sessions.backends.sqlscan`).

Each backend binds one dialect (``backends/sqlite/_rows.py``, ``backends/postgres/_rows.py``)
and writes only its own statements: the schema, locking, full-text search and the transactions.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol, overload

import attrs

from hermes_sessions.backends.rules import (
    DECODING_ERRORS,
    decodes,
    row_key,
    tool_call_count,
)
from hermes_sessions.exceptions import (
    CorruptRecordError,
    InvalidArgumentError,
    SessionNotFoundError,
)
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import Message, SessionEntry, SessionRecord, entry_from_storage
from hermes_sessions.queries import (
    SessionPage,
    SessionSummary,
    decode_cursor,
    encode_cursor,
    make_preview,
)
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
    from hermes_sessions.queries import SearchQuery, SessionQuery, Visibility

__all__ = [
    "ENTRY_FIELDS",
    "MESSAGE_FIELDS",
    "RECORD_COLUMNS",
    "SESSION_FIELDS",
    "SQLDialect",
    "TextCodec",
    "entry_body",
    "message_body",
    "message_from_row",
    "messages_from_rows",
    "preview_of",
    "same_text",
    "session_columns",
]


class TextCodec(Protocol):
    """How a dialect stores free text (and reads it back): ``None`` stays ``None``."""

    @overload
    def __call__(self, value: str) -> str: ...
    @overload
    def __call__(self, value: None) -> None: ...
    @overload
    def __call__(self, value: str | None) -> str | None: ...


@overload
def same_text(value: str) -> str: ...
@overload
def same_text(value: None) -> None: ...
@overload
def same_text(value: str | None) -> str | None: ...
def same_text(value: str | None) -> str | None:
    """Text stored as it is (a dialect whose text columns hold every character)."""
    return value


def _row_key(_dialect: object, row: Sequence[Any], *_: object) -> object:
    """The first column of a row (its id), or ``None`` when the row has none."""
    try:
        return row[0]
    except (IndexError, KeyError, TypeError):
        return None


# -- the columns -----------------------------------------------------------------------------------

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
"""The ``sessions`` columns :meth:`SQLDialect.record_from_row` reads, in order."""

RECORD_COLUMNS: Final = (*SESSION_FIELDS[:5], "title_key", "lineage_key", *SESSION_FIELDS[5:])
"""The ``sessions`` columns :meth:`SQLDialect.record_values` writes (the read ones and the
title's two lookup keys)."""


def session_columns(alias: str = "s") -> str:
    """The :data:`SESSION_FIELDS` as a select list on ``sessions AS <alias>``."""
    return ", ".join(f"{alias}.{name}" for name in SESSION_FIELDS)


MESSAGE_FIELDS: Final = ("id", "active", "body")
"""The ``messages`` columns :func:`message_from_row` reads, in order."""

ENTRY_FIELDS: Final = (
    "session_key",
    "session_id",
    "revision",
    "created_at",
    "updated_at",
    "last_prompt_tokens",
    "body",
)
"""The ``entries`` columns :meth:`SQLDialect.entry_from_row` reads (and a write stores)."""

_MESSAGE_COLUMN_FIELDS: Final = frozenset({"id", "session_id", "active"})
_ENTRY_BODY_FIELDS: Final = (
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


# -- messages and entries: the same in every dialect -----------------------------------------------


def message_body(message: Message) -> str:
    """The JSON body of a message: every field except those kept in columns.

    JSON escapes U+0000, so a body fits any ``text`` column.
    """
    return compact_json(message_dict(message, skip=_MESSAGE_COLUMN_FIELDS))


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


def entry_body(entry: SessionEntry) -> str:
    """The JSON body of an entry: every field except those kept in columns."""
    data = unstructure(entry)
    for name in ENTRY_FIELDS[:-1]:
        data.pop(name, None)
    return compact_json(data)


@functools.lru_cache(maxsize=4096)
def _entry_fields(body: str) -> tuple[tuple[str, Any], ...]:
    """The fields an entry's JSON body holds, validated once per distinct body.

    Bodies repeat (a key's origin and flags rarely change), and reading an entry is on the path
    of every message, so the JSON is parsed and checked by the converter only once per body.
    """
    probe = entry_body_values(json.loads(body))
    return tuple((name, getattr(probe, name)) for name in _ENTRY_BODY_FIELDS)


# -- what differs, and everything written with it --------------------------------------------------


@attrs.frozen(kw_only=True)
class SQLDialect:
    """One SQL database's way of storing the shared rows, and the shared SQL written in it.

    .. versionadded:: 0.1.0
    """

    mark: str
    """The parameter mark: ``?`` or ``%s``."""
    tables: str
    """What goes before a table name: ``""``, or ``{s}.`` (a schema filled in later)."""
    active: str
    """The condition of an active message on ``messages AS m``."""
    join: str
    """How a scan joins each message to its session (SQLite's ``CROSS JOIN`` keeps the order)."""
    never: str
    """A condition that holds for no row."""
    starts_with: str
    """The condition ``s.id`` starts with a value bound twice."""
    time_type: type
    """The type a time column holds when read."""
    to_time: Callable[[datetime], Any]
    """A time as its column holds it."""
    from_time: Callable[[Any], datetime]
    """A time column's value as an aware datetime."""
    to_text: TextCodec
    """Free text as a ``text`` column holds it."""
    from_text: TextCodec
    """A ``text`` column's value as the text written."""
    to_flag: Callable[[bool], Any]
    """A flag as its column holds it."""
    in_list: Callable[..., str]
    """``in_list(column, values, params, *, negate=False)``: ``column IN (values)`` (or, with
    ``negate``, ``NOT IN``), with the values appended to ``params``."""

    # -- session records ---------------------------------------------------------------------------

    @decodes("sessions", _row_key)
    def record_from_row(self, row: Sequence[Any]) -> SessionRecord:
        """Build a record from the :data:`SESSION_FIELDS` of a row."""
        ended_at, text = row[7], self.from_text
        return SessionRecord(
            id=row[0],
            source=row[1],
            session_key=text(row[2]),
            user_id=text(row[3]),
            title=text(row[4]),
            parent_session_id=row[5],
            started_at=self.from_time(row[6]),
            ended_at=None if ended_at is None else self.from_time(ended_at),
            end_reason=text(row[8]),
            last_active_at=self.from_time(row[9]),
            message_count=row[10],
            tool_call_count=row[11],
            input_tokens=row[12],
            output_tokens=row[13],
            cache_read_tokens=row[14],
            cache_write_tokens=row[15],
            reasoning_tokens=row[16],
            estimated_cost_usd=row[17],
            model=text(row[18]),
            model_config=json.loads(row[19]),
            system_prompt=text(row[20]),
            archived=bool(row[21]),
            metadata=json.loads(row[22]),
            revision=row[23],
        )

    def record_values(self, record: SessionRecord) -> dict[str, Any]:
        """The :data:`RECORD_COLUMNS` values of a record."""
        text, title = self.to_text, record.title
        return {
            "id": record.id,
            "source": record.source,
            "session_key": text(record.session_key),
            "user_id": text(record.user_id),
            "title": text(title),
            "title_key": None if title is None else text(title_key(title)),
            "lineage_key": None if title is None else text(lineage_key(title)),
            "parent_session_id": record.parent_session_id,
            "started_at": self.to_time(record.started_at),
            "ended_at": None if record.ended_at is None else self.to_time(record.ended_at),
            "end_reason": text(record.end_reason),
            "last_active_at": self.to_time(record.last_active),
            "message_count": record.message_count,
            "tool_call_count": record.tool_call_count,
            "input_tokens": record.input_tokens,
            "output_tokens": record.output_tokens,
            "cache_read_tokens": record.cache_read_tokens,
            "cache_write_tokens": record.cache_write_tokens,
            "reasoning_tokens": record.reasoning_tokens,
            "estimated_cost_usd": record.estimated_cost_usd,
            "model": text(record.model),
            "model_config": compact_json(record.model_config),
            "system_prompt": text(record.system_prompt),
            "archived": self.to_flag(record.archived),
            "metadata": compact_json(record.metadata),
            "revision": record.revision,
        }

    # -- routing entries ---------------------------------------------------------------------------

    @decodes("entries", _row_key)
    def entry_from_row(self, row: Sequence[Any]) -> SessionEntry:
        """Build an entry from the :data:`ENTRY_FIELDS` of a row.

        The typed columns are checked here and the JSON body by the converter (once per
        distinct body), so the entry itself is built without running its validators again.
        """
        key, session_id, revision, created, updated, prompt_tokens, body = row
        if not (
            isinstance(key, str)
            and isinstance(session_id, str)
            and isinstance(revision, int)
            and isinstance(created, self.time_type)
            and isinstance(updated, self.time_type)
            and (prompt_tokens is None or isinstance(prompt_tokens, int))
            and isinstance(body, str)
        ):
            raise CorruptRecordError(f"routing entry {key!r} has a malformed row")
        validate_session_id(session_id)
        return entry_from_storage(
            session_key=self.from_text(key),
            session_id=session_id,
            revision=revision,
            created_at=self.from_time(created),
            updated_at=self.from_time(updated),
            last_prompt_tokens=prompt_tokens,
            **dict(_entry_fields(body)),
        )

    def entry_values(self, entry: SessionEntry, revision: int) -> tuple[Any, ...]:
        """The :data:`ENTRY_FIELDS` values of ``entry`` stored with ``revision``."""
        return (
            self.to_text(entry.session_key),
            entry.session_id,
            revision,
            self.to_time(entry.created_at),
            self.to_time(entry.updated_at),
            entry.last_prompt_tokens,
            entry_body(entry),
        )

    # -- conditions --------------------------------------------------------------------------------

    def visibility(self, rule: Visibility, params: list[Any]) -> str:
        """The SQL condition of :meth:`Visibility.allows` on ``sessions AS s``."""
        options = []
        if rule.session_key is not None:
            options.append(f"s.session_key = {self.mark}")
            params.append(self.to_text(rule.session_key))
        if rule.user_id is not None:
            options.append(f"(s.user_id = {self.mark} AND s.source = {self.mark})")
            params += [self.to_text(rule.user_id), rule.platform]
        return "(" + " OR ".join(options) + ")" if options else self.never

    def _equal(self, column: str, value: Any, where: list[str], params: list[Any]) -> None:
        if value is not None:
            where.append(f"{column} = {self.mark}")
            params.append(self.to_text(value) if isinstance(value, str) else value)

    def session_filters(self, query: SessionQuery | SearchQuery, params: list[Any]) -> list[str]:
        """The conditions on ``sessions AS s`` that listings and searches share.

        The session filters both query types have (sources, key, user, archived, visibility),
        with their values appended to ``params`` in order.
        """
        where = []
        if query.sources is not None:
            where.append(self.in_list("s.source", query.sources, params))
        if query.exclude_sources:
            where.append(self.in_list("s.source", query.exclude_sources, params, negate=True))
        self._equal("s.session_key", query.session_key, where, params)
        self._equal("s.user_id", query.user_id, where, params)
        if query.archived is not None:
            self._equal("s.archived", self.to_flag(query.archived), where, params)
        if query.visible_to is not None:
            where.append(self.visibility(query.visible_to, params))
        return where

    def listing_filters(self, query: SessionQuery, params: list[Any]) -> list[str]:
        """SQL conditions on ``sessions AS s`` for every filter of a session listing."""
        where = self.session_filters(query, params)
        self._equal("s.parent_session_id", query.parent_session_id, where, params)
        if query.ended is not None:
            where.append("s.end_reason IS NOT NULL" if query.ended else "s.end_reason IS NULL")
        if query.exclude_end_reasons:
            reasons = query.exclude_end_reasons
            excluded = self.in_list("s.end_reason", reasons, params, negate=True)
            where.append(f"(s.end_reason IS NULL OR {excluded})")
        if query.min_messages:
            where.append(f"s.message_count >= {self.mark}")
            params.append(query.min_messages)
        for column, bound, value in (
            ("s.started_at", ">=", query.started_after),
            ("s.started_at", "<", query.started_before),
            ("s.last_active_at", ">=", query.active_after),
            ("s.last_active_at", "<", query.active_before),
        ):
            if value is not None:
                where.append(f"{column} {bound} {self.mark}")
                params.append(self.to_time(value))
        if query.id_prefix is not None:
            where.append(self.starts_with)
            params += [query.id_prefix, query.id_prefix]
        if query.title is not None:
            self._equal("s.title_key", title_key(query.title), where, params)
        if query.title_lineage is not None:
            self._equal("s.lineage_key", lineage_key(query.title_lineage), where, params)
        return where

    def listing(self, query: SessionQuery) -> tuple[str, list[Any]]:
        """The SQL of one page of ``list_sessions`` and its parameters.

        It selects :data:`SESSION_FIELDS`, then the body of the first active user message (the
        preview: :func:`preview_of`), at most ``limit + 1`` rows (the extra one says whether a
        next page exists).
        """
        params: list[Any] = []
        where = self.listing_filters(query, params)
        column = "s.started_at" if query.order == "started" else "s.last_active_at"
        direction = "DESC" if query.descending else "ASC"
        if query.cursor is not None:
            position, session_id = decode_cursor(query.cursor)
            comparison = "<" if query.descending else ">"
            where.append(f"({column}, s.id) {comparison} ({self.mark}, {self.mark})")
            params += [self.to_time(position), session_id]
        sql = (
            f"SELECT {session_columns()}, (SELECT m.body FROM {self.tables}messages AS m "  # noqa: S608
            f"WHERE m.session_seq = s.seq AND {self.active} AND m.role = 'user' "
            f"ORDER BY m.id LIMIT 1) FROM {self.tables}sessions AS s"
        )
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {column} {direction}, s.id {direction}"
        if query.limit is not None:
            sql += f" LIMIT {self.mark}"
            params.append(query.limit + 1)
        return sql, params

    def page(self, query: SessionQuery, rows: Sequence[Sequence[Any]]) -> SessionPage:
        """The page of ``list_sessions`` from the rows :meth:`listing` selected."""
        more = query.limit is not None and len(rows) > query.limit
        rows = rows[: query.limit] if more else rows
        width = len(SESSION_FIELDS)
        items = [
            SessionSummary(record=self.record_from_row(row), preview=preview_of(row[width]))
            for row in rows
        ]
        cursor = None
        if more:
            last = items[-1].record
            cursor = encode_cursor(query.sort_value(last), last.id)
        return SessionPage(items=items, next_cursor=cursor)

    def window(  # the get_messages window, as the protocol names it
        self,
        params: list[Any],
        *,
        after_id: int | None,
        before_id: int | None,
        limit: int | None,
        include_inactive: bool,
        from_end: bool,
    ) -> str:
        """The conditions, order and limit of a ``get_messages`` window on ``messages AS m``.

        It follows a ``WHERE`` that selects the session's messages; its values are appended to
        ``params``. With ``from_end`` the rows come newest first: the caller reverses them.
        """
        sql = ""
        for bound, value in ((">", after_id), ("<", before_id)):
            if value is not None:
                sql += f" AND m.id {bound} {self.mark}"
                params.append(value)
        if not include_inactive:
            sql += f" AND {self.active}"
        sql += " ORDER BY m.id DESC" if from_end else " ORDER BY m.id"
        if limit is not None:
            sql += f" LIMIT {self.mark}"
            params.append(limit)
        return sql

    def edit(
        self,
        fetch: Callable[[str, tuple[Any, ...]], Sequence[Any] | None],
        seq: int,
        message_id: int,
        message: Message,
    ) -> tuple[Message, int, int]:
        """Check an edit of message ``message_id`` of session row ``seq``, changing nothing.

        ``fetch(sql, params)`` runs one query in the edit's transaction and returns its first
        row. Returns the message as stored (its id and session set) and how much the session's
        message and tool-call counters move. An unknown message raises
        ``SessionNotFoundError``; a platform id another message of the session holds,
        ``InvalidArgumentError``.
        """
        session_id = message.session_id or ""
        new = attrs.evolve(message, id=message_id)
        mark, messages = self.mark, f"{self.tables}messages"
        old = fetch(
            f"SELECT active, tool_calls FROM {messages} WHERE session_seq = {mark} AND id = {mark}",  # noqa: S608
            (seq, message_id),
        )
        if old is None:
            raise SessionNotFoundError(
                session_id=session_id, hint=f"it has no message {message_id}"
            )
        platform_id = new.platform_message_id
        if platform_id is not None:
            clash = fetch(
                f"SELECT id FROM {messages} WHERE session_seq = {mark} "  # noqa: S608
                f"AND platform_message_id = {mark} AND id != {mark}",
                (seq, self.to_text(platform_id), message_id),
            )
            if clash is not None:
                raise InvalidArgumentError(
                    f"platform message id {platform_id!r} already belongs to message {clash[0]} "
                    f"of session {session_id}; give the edit that message's id or another one"
                )
        tools = (tool_call_count(new) if new.active else 0) - (old[1] if old[0] else 0)
        return new, int(new.active) - int(old[0]), tools
