"""Damaged rows: reading one raises ``CorruptRecordError`` naming the file, table and row."""

from __future__ import annotations

import pytest
from sqlite_helpers import raw

from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.queries import SessionQuery
from hermes_sessions.testing._support import say, seed


def _damage(path, sql, *params):
    connection = raw(path)
    try:
        connection.execute(sql, params)
    finally:
        connection.close()


def _message_id(path):
    connection = raw(path)
    try:
        return connection.execute("SELECT id FROM messages ORDER BY id LIMIT 1").fetchone()[0]
    finally:
        connection.close()


def test_a_message_body_of_invalid_json_names_file_table_and_row(backend, db_path):
    """A body that is not JSON: the error gives the database file, ``messages`` and the id."""
    seed(backend, "s1", "k1", say("hello"))
    message_id = _message_id(db_path)
    _damage(db_path, "UPDATE messages SET body = '{bad'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_messages("s1")
    error = caught.value
    assert (error.path, error.table, error.row) == (db_path, "messages", message_id)
    assert "JSONDecodeError" in error.reason
    assert str(db_path) in str(error)
    assert f"table messages row {message_id!r}" in str(error)


def test_a_message_body_of_the_wrong_shape_is_corrupt(backend, db_path):
    """A body that is JSON but not a message object is corrupt too."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(db_path, "UPDATE messages SET body = '[1, 2]'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_messages("s1")
    assert caught.value.table == "messages"


def test_a_session_metadata_of_invalid_json_names_the_session(backend, db_path):
    """A damaged JSON column of ``sessions`` names the session id."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(db_path, "UPDATE sessions SET metadata = 'not json' WHERE id = 's1'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_session("s1")
    assert (caught.value.path, caught.value.table, caught.value.row) == (db_path, "sessions", "s1")


def test_a_listing_preview_of_a_damaged_body_is_corrupt(backend, db_path):
    """The listing preview decodes the last body: damage there is corrupt, not a bare error."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(db_path, "UPDATE messages SET body = '{bad'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.list_sessions(SessionQuery(limit=None))
    assert (caught.value.path, caught.value.table) == (db_path, "messages")


def test_a_routing_entry_of_invalid_json_names_the_key(backend, db_path):
    """A damaged entry body names ``entries`` and the routing key."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(db_path, "UPDATE entries SET body = '{bad' WHERE session_key = 'k1'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_entry("k1")
    assert (caught.value.path, caught.value.table, caught.value.row) == (db_path, "entries", "k1")


def test_non_utf8_text_is_a_corrupt_record_not_a_decode_error(backend, db_path):
    """Text that is not UTF-8 (sqlite3 cannot decode it) is corrupt, naming the file."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(db_path, "UPDATE messages SET body = CAST(X'7B22C3' AS TEXT)")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_messages("s1")
    assert caught.value.path == db_path
