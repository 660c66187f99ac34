"""PostgreSQL rows damaged behind the backend's back: ``CorruptRecordError`` naming the place."""

from __future__ import annotations

import pytest

from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.testing._support import say, seed
from pg_support import open_pg, requires_pg, test_dsn

psycopg = pytest.importorskip("psycopg")
sql = pytest.importorskip("psycopg.sql")

pytestmark = requires_pg


@pytest.fixture
def backend(tmp_path):
    """A backend in a fresh schema, closed afterwards."""
    with open_pg(tmp_path) as opened:
        yield opened


def _damage(backend, statement):
    query = sql.SQL(statement).format(s=sql.Identifier(backend.schema))
    with psycopg.connect(test_dsn(), autocommit=True) as connection:
        connection.execute(query)


def test_a_message_body_of_invalid_json_names_schema_table_and_row(backend):
    """A body that is not JSON: the error names the schema, ``messages`` and the id."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(backend, "UPDATE {s}.messages SET body = '{{bad'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_messages("s1")
    error = caught.value
    assert error.table == "messages"
    assert isinstance(error.row, int)
    assert backend.schema in str(error.path)
    assert "JSONDecodeError" in error.reason


def test_a_session_metadata_of_invalid_json_names_the_session(backend):
    """A damaged JSON column of ``sessions`` names the session id."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(backend, "UPDATE {s}.sessions SET metadata = 'not json'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_session("s1")
    assert (caught.value.table, caught.value.row) == ("sessions", "s1")


def test_a_routing_entry_of_invalid_json_names_the_key(backend):
    """A damaged entry body names ``entries`` and the routing key."""
    seed(backend, "s1", "k1", say("hello"))
    _damage(backend, "UPDATE {s}.entries SET body = '{{bad'")
    with pytest.raises(CorruptRecordError) as caught:
        backend.get_entry("k1")
    assert (caught.value.table, caught.value.row) == ("entries", "k1")


def test_check_reports_a_damaged_row_instead_of_raising(backend):
    """``check()`` decodes every row: a damaged one is a ``corrupt`` problem naming it."""
    seed(backend, "s1", "k1", say("hello"))
    seed(backend, "s2", "k2", say("fine"))
    assert backend.check().ok
    _damage(
        backend,
        "UPDATE {s}.messages SET body = '{{bad' WHERE session_seq = "
        "(SELECT seq FROM {s}.sessions WHERE id = 's2')",
    )
    problems = backend.check().problems
    assert [p.kind for p in problems] == ["corrupt"]
    assert backend.schema in problems[0].where
    assert "messages" in problems[0].where
