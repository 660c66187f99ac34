"""PostgreSQL rows written before width folding: exact searches meanwhile, a resumable re-index."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import hermes_sessions
from hermes_sessions.protocols import ReindexProgress, SupportsReindex
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import say, seed
from hermes_sessions.text import searchable_text
from hermes_sessions.text._tokens import folded_index_tokens
from pg_support import open_pg, requires_pg, schema_for, test_dsn

psycopg = pytest.importorskip("psycopg")
sql = pytest.importorskip("psycopg.sql")

from hermes_sessions.backends.postgres import _search as pg_search  # noqa: E402
from hermes_sessions.backends.postgres._rows import message_from_row  # noqa: E402

pytestmark = requires_pg

WIDE = ["ＡＰＩ ｶﾞｲﾄﾞ", "ｄｏｃｋｅｒ＋ｈｅｌｍ", "api guide"]
CHILD = Path(__file__).resolve().parent.parent / "pg_reindex_child.py"


def run(directory, statement, params=()):
    """Run one statement in the schema of ``directory`` (``{s}``); return its rows."""
    query = sql.SQL(statement).format(s=sql.Identifier(schema_for(directory)))
    with psycopg.connect(test_dsn(), autocommit=True) as connection:
        cursor = connection.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def make_tokens_version_one(directory):
    """Turn the schema into one the library wrote before width folding (rows and meta)."""
    rows = run(directory, "SELECT session_seq, id, active, body FROM {s}.messages")
    for seq, message_id, active, body in rows:
        positions: dict[str, list[int]] = {}
        message = message_from_row((message_id, active, body), "unused")
        for position, token in enumerate(folded_index_tokens(searchable_text(message)), 1):
            positions.setdefault(token, []).append(position)
        literal = pg_search._literal(positions)
        run(
            directory,
            "UPDATE {s}.message_text SET tsv = %s::tsvector "
            "WHERE session_seq = %s AND message_id = %s",
            (literal, seq, message_id),
        )
    run(directory, "DELETE FROM {s}.meta WHERE name = 'reindexed_through'")
    run(directory, "UPDATE {s}.meta SET value = '1' WHERE name = 'tokens_version'")


def old_schema(directory, *texts, filler=0):
    """A schema holding ``texts`` (and ``filler`` plain messages) as version 1 wrote it."""
    with open_pg(directory) as backend:
        seed(backend, "s1", None, *map(say, texts), *(say(f"note {n}") for n in range(filler)))
    make_tokens_version_one(directory)


def reopen(directory):
    """Open an old schema, which warns that it needs a re-index."""
    with pytest.warns(RuntimeWarning, match="reindex"):
        return open_pg(directory)


def found(backend, text):
    """The sorted contents of every hit of ``text``."""
    hits = backend.search(SearchQuery(text=text, limit=None, roles=None, exclude_sources=()))
    return sorted(str(hit.message.content) for hit in hits)


def index_finds(directory, lexeme):
    """Message ids whose stored rows hold ``lexeme`` (the index alone, no re-check)."""
    rows = run(
        directory,
        "SELECT DISTINCT message_id FROM {s}.message_text WHERE tsv @@ %s::tsquery ORDER BY 1",
        (pg_search._quote(lexeme),),
    )
    return [row[0] for row in rows]


def test_an_older_schema_still_answers_searches_exactly(tmp_path):
    """Before any re-index, the version-1 rows are bypassed: the shared matcher finds it all."""
    old_schema(tmp_path, *WIDE)
    assert index_finds(tmp_path, "api") == [3]  # the premise: the rows are version 1
    with reopen(tmp_path) as backend:
        assert isinstance(backend, SupportsReindex)
        assert backend.reindex_needed()
        assert found(backend, "api") == ["api guide", "ＡＰＩ ｶﾞｲﾄﾞ"]
        assert found(backend, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]
        assert found(backend, "docker -helm") == []
        newest = backend.search(SearchQuery(text="api", order="newest", limit=1, roles=None))
        assert [hit.message.content for hit in newest] == ["api guide"]


def test_reindex_rewrites_every_row_with_progress(tmp_path):
    """Batches rewrite the rows in key order, report after each, and leave the index current."""
    old_schema(tmp_path, *WIDE, filler=9)
    reports: list[ReindexProgress] = []
    with reopen(tmp_path) as backend:
        assert backend.reindex(progress=reports.append, batch_size=5) == 12
        assert [(r.done, r.total) for r in reports] == [(5, 12), (10, 12), (12, 12), (12, 12)]
        assert not backend.reindex_needed()
        assert found(backend, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]
        assert backend.reindex() == 0
    assert index_finds(tmp_path, "api") == [1, 3]
    with open_pg(tmp_path) as backend:  # no warning any more
        assert not backend.reindex_needed()


def test_a_new_schema_needs_no_reindex(tmp_path):
    """A schema the current version created (even with messages since) is current."""
    with open_pg(tmp_path) as backend:
        seed(backend, "s1", None, say("ＡＰＩ"))
        assert not backend.reindex_needed()
        assert found(backend, "api") == ["ＡＰＩ"]
        assert index_finds(tmp_path, "api") == [1]


def test_a_reindex_on_another_host_is_noticed(tmp_path):
    """A backend opened before another host finished the re-index uses the index afterwards."""
    old_schema(tmp_path, *WIDE)
    with reopen(tmp_path) as first, reopen(tmp_path) as second:
        seed(first, "s2", None, say("ｎｅｗ ＡＰＩ"))
        second.reindex(batch_size=2)
        assert not first.reindex_needed()
        assert found(first, "api") == sorted(["api guide", "ｎｅｗ ＡＰＩ", "ＡＰＩ ｶﾞｲﾄﾞ"])


@pytest.mark.slow
def test_a_reindex_killed_inside_a_batch_resumes_where_it_stopped(tmp_path):
    """SIGKILL inside the third batch keeps two batches; the next call rewrites only the rest."""
    old_schema(tmp_path, *WIDE, filler=297)
    checkout = Path(hermes_sessions.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(CHILD.parent)])}
    process = subprocess.Popen(
        [sys.executable, str(CHILD), test_dsn() or "", schema_for(tmp_path), "100", "250"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    lines = [process.stdout.readline() for _ in range(3)]
    assert lines == [b"progress 100 300\n", b"progress 200 300\n", b"inside\n"]
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    process.stdin.close()  # type: ignore[union-attr]
    assert process.returncode == -signal.SIGKILL
    mark = run(tmp_path, "SELECT value FROM {s}.meta WHERE name = 'reindexed_through'")
    assert mark == [("1:200",)]
    reports: list[ReindexProgress] = []
    with reopen(tmp_path) as backend:
        assert found(backend, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]  # exact while half done
        assert backend.reindex(progress=reports.append, batch_size=100) == 100
        assert [(r.done, r.total) for r in reports] == [(300, 300), (300, 300)]
    assert index_finds(tmp_path, "api") == [1, 3]
