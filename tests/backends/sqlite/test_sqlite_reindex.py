"""A database written before width folding: exact searches meanwhile, a resumable re-index."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlite_helpers import (
    found,
    fts_rowids,
    make_tokens_version_one,
    raw,
    reindexed_through,
)

import hermes_sessions
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.protocols import ReindexProgress, SupportsReindex
from hermes_sessions.testing._support import say, seed
from hermes_sessions.text import TOKENS_VERSION

WIDE = ["ＡＰＩ ｶﾞｲﾄﾞ", "ｄｏｃｋｅｒ＋ｈｅｌｍ", "api guide"]
CHILD = Path(__file__).with_name("sqlite_reindex_child.py")


def old_store(path, *texts, filler=0):
    """A database holding ``texts`` (and ``filler`` plain messages) as version 1 wrote it."""
    with SQLiteBackend(path) as backend:
        seed(backend, "s1", None, *map(say, texts), *(say(f"note {n}") for n in range(filler)))
    make_tokens_version_one(path)


def reopen(path):
    """Open an old database, which warns that it needs a re-index."""
    with pytest.warns(RuntimeWarning, match="reindex"):
        return SQLiteBackend(path)


def test_the_fixture_really_holds_version_one_rows(db_path):
    """FTS5 alone finds the full-width message only by its version-1 token (the test's premise)."""
    old_store(db_path, *WIDE)
    assert fts_rowids(db_path, '"api"') == [3]
    assert fts_rowids(db_path, '"ａｐｉ"') == [1]


def test_an_older_store_still_answers_searches_exactly(db_path):
    """Before any re-index, full-width and half-width text is found through the fallback scan."""
    old_store(db_path, *WIDE)
    with reopen(db_path) as backend:
        assert isinstance(backend, SupportsReindex)
        assert backend.reindex_needed()
        assert found(backend, "api") == ["api guide", "ＡＰＩ ｶﾞｲﾄﾞ"]
        assert found(backend, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]
        assert found(backend, "ＤＯＣＫＥＲ -helm") == []
        assert found(backend, "docker") == ["ｄｏｃｋｅｒ＋ｈｅｌｍ"]
        hit = backend.search(hermes_sessions.SearchQuery(text="ガイド", roles=None))[0]
        assert hit.spans == ((4, 9),)


def test_integrity_check_names_the_missing_reindex(db_path):
    """``integrity_check`` reports an index of an older token stream and says what to run."""
    old_store(db_path, *WIDE)
    with reopen(db_path) as backend:
        assert [p for p in backend.integrity_check() if "reindex()" in p]
        backend.reindex()
        assert backend.integrity_check() == []


def test_reindex_rewrites_every_row_with_progress(db_path):
    """Batches rewrite the rows in id order, report after each, and leave FTS5 current."""
    old_store(db_path, *WIDE, filler=9)
    reports: list[ReindexProgress] = []
    with reopen(db_path) as backend:
        assert backend.reindex(progress=reports.append, batch_size=5) == 12
        assert [(r.done, r.total) for r in reports] == [(5, 12), (10, 12), (12, 12), (12, 12)]
        assert not backend.reindex_needed()
        assert found(backend, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]
    assert fts_rowids(db_path, '"api"') == [1, 3]
    assert reindexed_through(db_path) is None
    connection = raw(db_path)
    try:
        version = connection.execute("SELECT value FROM meta WHERE name = 'tokens_version'")
        assert version.fetchone()[0] == str(TOKENS_VERSION)
    finally:
        connection.close()
    with SQLiteBackend(db_path) as backend:  # no warning any more
        assert not backend.reindex_needed()


def test_reindex_of_a_current_store_does_nothing(backend):
    """A store the current version wrote needs no re-index; progress reports it complete."""
    seed(backend, "s1", None, say("ＡＰＩ"))
    reports: list[ReindexProgress] = []
    assert not backend.reindex_needed()
    assert backend.reindex(progress=reports.append) == 0
    assert reports == [ReindexProgress(done=1, total=1)]


def test_an_older_store_without_messages_is_current_at_once(db_path):
    """Nothing to rewrite: opening records the current version, without a warning."""
    SQLiteBackend(db_path).close()
    make_tokens_version_one(db_path)
    with SQLiteBackend(db_path) as backend:
        assert not backend.reindex_needed()


def test_messages_written_meanwhile_are_found_and_rewritten_harmlessly(db_path):
    """Appends before and during a re-index get current rows; the re-index keeps them right."""
    old_store(db_path, *WIDE)
    with reopen(db_path) as backend:
        seed(backend, "s2", None, say("ｎｅｗ ＡＰＩ"))
        assert found(backend, "new api") == ["ｎｅｗ ＡＰＩ"]
        backend.reindex(batch_size=2)
        assert found(backend, "api") == sorted(["api guide", "ｎｅｗ ＡＰＩ", "ＡＰＩ ｶﾞｲﾄﾞ"])


def test_a_reindex_by_another_connection_is_noticed(db_path):
    """A backend opened before another one finished the re-index searches FTS5 afterwards."""
    old_store(db_path, *WIDE)
    with reopen(db_path) as first, reopen(db_path) as second:
        second.reindex()
        assert not first.reindex_needed()
        assert found(first, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]


@pytest.mark.parametrize(("size", "error"), [(0, ValueError), (True, TypeError), ("9", TypeError)])
def test_batch_size_is_checked(backend, size, error):
    """``batch_size`` must be an int of at least 1."""
    with pytest.raises(error, match="batch_size"):
        backend.reindex(batch_size=size)


@pytest.mark.slow
def test_a_reindex_killed_inside_a_batch_resumes_where_it_stopped(db_path):
    """SIGKILL inside the third batch keeps two batches; the next call rewrites only the rest."""
    old_store(db_path, *WIDE, filler=297)
    source = Path(hermes_sessions.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(CHILD.parent)])}
    process = subprocess.Popen(
        [sys.executable, str(CHILD), str(db_path), "100", "250"],
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
    assert reindexed_through(db_path) == 200
    reports: list[ReindexProgress] = []
    with reopen(db_path) as backend:
        assert backend.reindex_needed()
        assert found(backend, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]  # exact while half done
        assert backend.reindex(progress=reports.append, batch_size=100) == 100
        assert [(r.done, r.total) for r in reports] == [(300, 300), (300, 300)]
        assert backend.integrity_check() == []
    assert fts_rowids(db_path, '"api"') == [1, 3]


def test_without_fts5_there_is_nothing_to_reindex(db_path, monkeypatch):
    """A build without FTS5 scans anyway; the next FTS5 open rebuilds the index, current."""
    old_store(db_path, *WIDE)
    with monkeypatch.context() as patch:
        patch.setattr(schema, "fts5_available", lambda _connection: False)
        with pytest.warns(RuntimeWarning, match="no FTS5") as warned:
            backend = SQLiteBackend(db_path)
        with backend:
            assert not backend.reindex_needed()
            assert backend.reindex() == 0
            assert found(backend, "ガイド") == ["ＡＰＩ ｶﾞｲﾄﾞ"]
        assert len(warned) == 1
    with SQLiteBackend(db_path) as backend:  # rebuilt whole on open: no re-index warning
        assert not backend.reindex_needed()
    assert fts_rowids(db_path, '"api"') == [1, 3]
