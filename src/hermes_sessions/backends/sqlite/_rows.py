"""Rows of the SQLite backend: the shared rows and SQL (:mod:`..sqlrows`) in SQLite's dialect.

Times are integer microseconds since the epoch; text is stored as it is; flags are 0 and 1;
parameters are ``?``. Each ``*_FIELDS`` tuple is the order of the values a ``*_from_row``
function reads; the statement modules select those columns in that order.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from hermes_sessions.backends.sqlite._clauses import in_list
from hermes_sessions.backends.sqlrows import (
    ENTRY_FIELDS,
    MESSAGE_FIELDS,
    SESSION_FIELDS,
    SQLDialect,
    entry_body,
    message_body,
    message_from_row,
    messages_from_rows,
    preview_of,
    same_text,
)

__all__ = [
    "ENTRY_FIELDS",
    "MESSAGE_FIELDS",
    "SESSION_FIELDS",
    "SQLITE",
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

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def to_us(moment: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch."""
    return (moment - EPOCH) // _MICROSECOND


def from_us(value: int) -> datetime:
    """Integer microseconds since the epoch as an aware UTC datetime."""
    return EPOCH + timedelta(microseconds=value)


SQLITE: Final = SQLDialect(
    mark="?",
    tables="",
    active="m.active = 1",
    join="CROSS JOIN",
    never="0",
    starts_with="substr(s.id, 1, length(?)) = ?",
    time_type=int,
    to_time=to_us,
    from_time=from_us,
    to_text=same_text,
    from_text=same_text,
    to_flag=int,
    in_list=in_list,
)
"""SQLite's way of storing the shared rows, and the shared SQL in its dialect."""

record_from_row: Final = SQLITE.record_from_row
record_row: Final = SQLITE.record_values
entry_from_row: Final = SQLITE.entry_from_row
