"""SQLiteBackend beyond the conformance suite: schema, FTS5, files, retries and maintenance."""

from __future__ import annotations

import gc
import multiprocessing
import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest

import hermes_sessions
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.sqlite import _connections as connections
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.exceptions import (
    BackendClosedError,
    CorruptRecordError,
    IncompatibleStoreError,
    LockTimeoutError,
    StorageError,
)
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import T0, minutes, record, say, seed


@pytest.fixture
def db_path(tmp_path):
    """Where the test's database lives (its directory does not exist yet)."""
    return tmp_path / "data" / "state.db"


@pytest.fixture
def backend(db_path):
    """A backend on ``db_path``, closed afterwards."""
    with SQLiteBackend(db_path) as opened:
        yield opened


def found(backend, text, **filters):
    """The contents of every hit of ``text`` over all roles and sources."""
    filters.setdefault("roles", None)
    filters.setdefault("exclude_sources", ())
    hits = backend.search(SearchQuery(text=text, limit=None, **filters))
    return sorted(str(hit.message.content) for hit in hits)


def raw(path):
    """A plain sqlite3 connection to the same file (closed by the caller)."""
    return sqlite3.connect(path, isolation_level=None)


# -- opening ---------------------------------------------------------------------------------------


def test_in_home_opens_state_db(tmp_path, monkeypatch):
    """in_home() opens <home>/state.db, under $HERMES_SESSIONS_HOME by default."""
    monkeypatch.setenv("HERMES_SESSIONS_HOME", str(tmp_path / "home"))
    with SQLiteBackend.in_home() as backend:
        assert backend.path == tmp_path / "home" / "state.db"
    with SQLiteBackend.in_home(tmp_path / "other", durability="normal") as backend:
        assert backend.path == tmp_path / "other" / "state.db"
        assert backend.durability == "normal"


def test_files_are_created_private(db_path):
    """The directory is created 0700 and the database, WAL and shared memory 0600."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("hello"))
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in db_path.parent.iterdir()}
        assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700
        assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}


def test_repr_names_the_file(backend, db_path):
    """The repr shows the path and durability, and says when the backend is closed."""
    assert repr(backend) == f"<SQLiteBackend {str(db_path)!r} full>"
    backend.close()
    assert repr(backend) == f"<SQLiteBackend {str(db_path)!r} closed>"


@pytest.mark.parametrize(
    "options",
    [
        {"durability": "fast"},
        {"busy_timeout": 0},
        {"busy_timeout": True},
        {"retries": -1},
        {"wal_size_limit": 0},
        {"secure_delete": "yes"},
    ],
)
def test_bad_options_are_refused(db_path, options):
    """Unknown durability, non-positive timeouts and negative retries raise ValueError."""
    with pytest.raises((ValueError, TypeError)):
        SQLiteBackend(db_path, **options)


@pytest.mark.parametrize(("durability", "level"), [("full", 2), ("normal", 1)])
def test_durability_sets_synchronous(db_path, durability, level):
    """Full means PRAGMA synchronous=FULL (fsync per commit); normal means NORMAL."""
    with SQLiteBackend(db_path, durability=durability) as backend:
        connection = backend._connection()
        assert connection.execute("PRAGMA synchronous").fetchone()[0] == level
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_unopenable_path_is_a_storage_error(tmp_path):
    """A path SQLite cannot open raises StorageError with the sqlite3 error as its cause."""
    (tmp_path / "state.db").mkdir()
    with pytest.raises(StorageError) as info:
        SQLiteBackend(tmp_path / "state.db")
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_failures_during_calls_are_storage_errors(backend):
    """A sqlite3 error inside a call reaches the caller as StorageError."""
    backend._connection().execute("DROP TABLE leases")
    with pytest.raises(StorageError) as info:
        backend.acquire_lease("r", "a", ttl=timedelta(minutes=1), now=T0)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def test_closed_backend_refuses_maintenance(backend):
    """Maintenance methods also raise BackendClosedError after close."""
    backend.close()
    for call in (backend.optimize, backend.checkpoint, backend.integrity_check):
        with pytest.raises(BackendClosedError):
            call()


# -- schema and migrations -------------------------------------------------------------------------


def test_migrations_are_recorded_once(db_path):
    """Every migration is recorded with its time; reopening applies nothing again."""
    SQLiteBackend(db_path).close()
    SQLiteBackend(db_path).close()
    connection = raw(db_path)
    rows = connection.execute("SELECT version, applied_at FROM schema_migrations").fetchall()
    connection.close()
    assert [version for version, _ in rows] == list(range(1, schema.SCHEMA_VERSION + 1))
    assert all(applied.endswith("Z") for _, applied in rows)


def test_newer_schema_is_refused(db_path):
    """A database with a migration this library does not know raises IncompatibleStoreError."""
    SQLiteBackend(db_path).close()
    connection = raw(db_path)
    connection.execute("INSERT INTO schema_migrations VALUES (99, '2030-01-01T00:00:00Z')")
    connection.close()
    with pytest.raises(IncompatibleStoreError) as info:
        SQLiteBackend(db_path)
    assert (info.value.found_version, info.value.supported_version) == (99, schema.SCHEMA_VERSION)


def test_migrating_an_older_database_keeps_its_data(db_path):
    """A database at version 1 is migrated on open; its messages stay searchable by time."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, *(say(f"fig {n}", timestamp=minutes(n)) for n in range(3)))
    connection = raw(db_path)
    connection.execute("DROP TABLE message_blocks")
    connection.execute("DROP TABLE meta")
    connection.execute("DELETE FROM schema_migrations WHERE version = 2")
    connection.close()
    with SQLiteBackend(db_path) as backend:
        newest = backend.search(SearchQuery(text="fig", order="newest", limit=1))
        assert [hit.message.content for hit in newest] == ["fig 2"]
        assert backend.integrity_check() == []


def test_a_failing_migration_changes_nothing(db_path, monkeypatch):
    """A migration that fails part-way is rolled back whole and the version stays."""
    SQLiteBackend(db_path).close()
    broken = (*schema.MIGRATIONS, ("CREATE TABLE half (x)", "CREATE TABLE oops ("))
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(broken))
    with pytest.raises(StorageError):
        SQLiteBackend(db_path)
    connection = raw(db_path)
    assert schema.applied_version(connection) == len(broken) - 1
    assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchall() == []
    connection.close()


# -- search ----------------------------------------------------------------------------------------

HAN = "机器人学习飞书部署服务端配置修改模型的了是不"
KANA = "とうきょうタワーにいきましたカナ"
HANGUL = "서울에서회의가있습니다"
LATIN = ["docker", "redis", "youer", "deploy", "net", "network", "the", "sp_new1", "P2.2"]
SEPARATORS = [" ", "，", "。", "-", "\n", "", ""]


def _rng(seed_value):
    """A seeded generator for reproducible test data."""
    return random.Random(seed_value)  # noqa: S311  # test data, not secrets


def _mixed_corpus(seed_value, count):
    """Short messages mixing CJK runs from a small alphabet with Latin words and punctuation."""
    rng = _rng(seed_value)
    alphabet = HAN + KANA + HANGUL
    corpus = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.3:
                parts.append(rng.choice(LATIN))
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))))
            parts.append(rng.choice(SEPARATORS))
        corpus.append("".join(parts))
    return corpus


def _is_cjk(char):
    return char in HAN or char in KANA or char in HANGUL


def test_cjk_substrings_have_exact_precision_and_recall(backend):
    """Each 1-3 character CJK substring of a mixed corpus finds exactly its messages."""
    corpus = _mixed_corpus(7, 150)
    seed(backend, "s1", None, *(say(text) for text in corpus))
    queries = {
        text[start : start + width]
        for text in corpus
        for width in (1, 2, 3)
        for start in range(len(text) - width + 1)
        if all(_is_cjk(char) for char in text[start : start + width])
    }
    assert len(queries) > 500
    for query in sorted(queries):
        expected = sorted(text for text in corpus if query in text)
        assert found(backend, query) == expected, query


def test_latin_word_inside_chinese_is_found(backend):
    """``youer`` finds 修改youer服务端."""
    seed(backend, "s1", None, say("修改youer服务端"), say("you are here"))
    assert found(backend, "youer") == ["修改youer服务端"]


@pytest.fixture(scope="module")
def twin_corpus(tmp_path_factory):
    """The same mixed corpus in a SQLite backend and in the reference in-memory backend."""
    corpus = _mixed_corpus(11, 120)
    sqlite_backend = SQLiteBackend(tmp_path_factory.mktemp("twin") / "state.db")
    reference = InMemoryBackend()
    for target in (sqlite_backend, reference):
        seed(target, "s1", None, *(say(text) for text in corpus))
    yield sqlite_backend, reference
    sqlite_backend.close()


WORDS = [*LATIN, *HAN[:8], "机器", "器人", "学习", "タワー", "서울", "服务端", "dock", "the"]


@pytest.mark.parametrize(
    "query",
    [
        "docker redis",
        "docker OR redis",
        "docker redis OR youer",
        "机器 -学习",
        "NOT the 机",
        "dock* 机",
        '"机器人"',
        "机器人 OR タワー -redis",
        "net* -network",
        "服务端，配置",
        " ".join(f"w{n}" for n in range(80)),
    ],
)
def test_fts_translation_agrees_with_the_matcher(twin_corpus, query):
    """FTS5 with the parenthesised translation finds exactly what the shared matcher finds."""
    sqlite_backend, reference = twin_corpus
    assert found(sqlite_backend, query) == found(reference, query)


def test_random_queries_agree_with_the_matcher(twin_corpus):
    """Random AND/OR/NOT/prefix/phrase queries agree between FTS5 and the reference."""
    rng = _rng(3)
    sqlite_backend, reference = twin_corpus
    for _ in range(300):
        terms = []
        for _ in range(rng.randint(1, 4)):
            word = rng.choice(WORDS)
            shape = rng.random()
            if shape < 0.15:
                word = f"-{word}"
            elif shape < 0.3:
                word = f"{word}*"
            elif shape < 0.4:
                word = f'"{word} {rng.choice(WORDS)}"'
            terms.append(word)
            if rng.random() < 0.3:
                terms.append("OR")
        query = " ".join(terms)
        assert found(sqlite_backend, query) == found(reference, query), query


def test_newest_and_oldest_pages_follow_message_time(db_path):
    """newest/oldest order by message time across id blocks, whatever the insertion order."""
    rng = _rng(5)
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1")
        times = list(range(9000))
        rng.shuffle(times[6000:])  # a late import of old messages, out of order
        batch = []
        for n, offset in enumerate(times):
            timestamp = None if n % 997 == 0 else minutes(offset)
            words = "kiwi" if n % 3 else "kiwi lime"
            batch.append(say(f"{words} {n}", timestamp=timestamp))
        stored = backend.append_messages("s1", batch)
        reference = {"kiwi": stored, "lime": [m for m in stored if "lime" in str(m.content)]}
        for word, matching in reference.items():
            by_time = sorted(
                matching, key=lambda m: (m.timestamp or minutes(-(10**7)), m.id), reverse=True
            )
            for order, expected in (("newest", by_time), ("oldest", by_time[::-1])):
                for offset, limit in ((0, 5), (3, 20), (0, 1)):
                    query = SearchQuery(text=word, order=order, limit=limit, offset=offset)
                    hits = [hit.message.id for hit in backend.search(query)]
                    assert hits == [m.id for m in expected[offset : offset + limit]], (
                        order,
                        offset,
                    )
                everything = SearchQuery(text=word, order=order, limit=None, offset=2)
                assert [h.message.id for h in backend.search(everything)] == [
                    m.id for m in expected[2:]
                ]


def test_soft_delete_and_restore_keep_the_index_in_step(backend):
    """Soft-deleted messages are found only with include_inactive, and again once restored."""
    seed(backend, "s1")
    (message,) = backend.append_messages("s1", [say("papaya 木瓜")])
    backend.set_active("s1", [message.id], active=False)
    assert found(backend, "木瓜") == []
    assert found(backend, "木瓜", include_inactive=True) == ["papaya 木瓜"]
    backend.set_active("s1", [message.id], active=True)
    assert found(backend, "papaya") == ["papaya 木瓜"]
    assert backend.integrity_check() == []


def test_ranked_hits_have_scores_and_snippets(backend):
    """Ranked hits come best first with positive scores and marked snippets."""
    seed(backend, "s1", None, say("grape " + "filler " * 40), say("grape grape grape harvest"))
    hits = backend.search(SearchQuery(text="grape", offset=0))
    assert hits[0].message.content == "grape grape grape harvest"
    assert hits[0].score > hits[1].score > 0
    assert hits[0].snippet.startswith(">>>grape<<<")
    (second,) = backend.search(SearchQuery(text="grape", offset=1))
    assert second.message.content.startswith("grape filler")


def test_without_fts5_search_falls_back_with_one_warning(db_path, monkeypatch):
    """Without FTS5 writes work and search matches like the reference, after one warning."""
    monkeypatch.setattr(schema, "fts5_available", lambda _connection: False)
    with pytest.warns(RuntimeWarning, match="no FTS5") as warned:
        backend = SQLiteBackend(db_path)
    # Any further warning would fail this test: pytest runs with -W error.
    with backend:
        seed(backend, "s1", None, say("修改youer服务端"), say("docker compose", role="assistant"))
        (extra,) = backend.append_messages("s1", [say("飞书机器人", active=False)])
        backend.replace_message("s1", extra.id, say("飞书机器人 redis", timestamp=minutes(5)))
        assert found(backend, "youer") == ["修改youer服务端"]
        assert found(backend, "机器 OR compose") == ["docker compose", "飞书机器人 redis"]
        newest = backend.search(SearchQuery(text="redis OR docker", order="newest", limit=1))
        assert [hit.message.content for hit in newest] == ["飞书机器人 redis"]
        backend.delete_messages("s1", [extra.id])
        assert found(backend, "redis") == []
        everything = SearchQuery(
            text="docker", roles=None, exclude_sources=(), include_inactive=True
        )
        assert len(backend.search(everything)) == 1
        backend.replace_messages("s1", [say("replaced kiwi")])
        assert found(backend, "kiwi") == ["replaced kiwi"]
        seed(backend, "s2", None, say("lime"))
        assert backend.delete_session("s2")
        assert found(backend, "lime") == []
        assert backend.integrity_check() == []
        assert backend.rebuild_index() == 0
        backend.optimize()
    assert len(warned) == 1
    with sqlite3.connect(db_path) as connection:
        assert schema.fts_state(connection) == "missing"


def test_index_missed_without_fts5_is_rebuilt(db_path, monkeypatch):
    """Messages written by a build without FTS5 are indexed when FTS5 is back."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("walnut"))
    with monkeypatch.context() as patch:
        patch.setattr(schema, "fts5_available", lambda _connection: False)
        with pytest.warns(RuntimeWarning):
            backend = SQLiteBackend(db_path)
        with backend:
            backend.append_messages("s1", [say("pecan")])
            backend.delete_messages("s1", [1])
    with SQLiteBackend(db_path) as backend:
        assert found(backend, "pecan") == ["pecan"]
        assert found(backend, "walnut") == []
        assert backend.integrity_check() == []


# -- concurrency, crashes and retries --------------------------------------------------------------


def _append_in_process(path, worker, count):
    """Append ``count`` messages one call at a time, redelivering every fifth one."""
    with SQLiteBackend(path) as backend:
        for n in range(count):
            message = say(f"{worker}:{n}", platform_message_id=f"{worker}:{n}")
            backend.append_messages("shared", [message], touch_at=minutes(n))
            if n % 5 == 0:
                backend.append_messages("shared", [message])


@pytest.mark.slow
def test_eight_processes_append_without_loss_or_duplicates(db_path):
    """Eight processes appending at once: every message exactly once, no lock error."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "shared", "agent:main:telegram:dm:1")
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_append_in_process, args=(db_path, worker, 30))
        for worker in range(8)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    assert [process.exitcode for process in workers] == [0] * 8
    with SQLiteBackend(db_path) as backend:
        contents = [str(m.content) for m in backend.get_messages("shared")]
        assert sorted(contents) == sorted(f"{w}:{n}" for w in range(8) for n in range(30))
        record = backend.get_session("shared")
        assert record is not None
        assert record.message_count == 240
        assert backend.integrity_check() == []


_CRASH_WRITER = """
import sys
from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.models import Message

backend = SQLiteBackend(sys.argv[1])
n = 0
while True:
    (stored,) = backend.append_messages(
        "s1", [Message(role="user", content=f"m{n} 飞书", platform_message_id=f"p{n}")]
    )
    print(stored.id, flush=True)
    n += 1
"""


@pytest.mark.slow
def test_killed_writer_loses_no_acknowledged_append(db_path):
    """SIGKILL during appends: on reopen every acknowledged message is there exactly once."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1")
    source = str(Path(hermes_sessions.__file__).resolve().parents[1])
    environment = {**os.environ, "PYTHONPATH": source}
    writer = subprocess.Popen(
        [sys.executable, "-c", _CRASH_WRITER, str(db_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )
    acknowledged = []
    assert writer.stdout is not None
    for line in writer.stdout:
        acknowledged.append(int(line))
        if len(acknowledged) == 150:
            writer.send_signal(signal.SIGKILL)
            break
    writer.wait()
    writer.stdout.close()
    with SQLiteBackend(db_path) as backend:
        stored = backend.get_messages("s1")
        ids = [m.id for m in stored]
        assert len(ids) == len(set(ids))
        assert set(acknowledged) <= set(ids)
        assert backend.integrity_check() == []
        assert len(found(backend, "飞书")) == len(stored)


def test_busy_database_is_retried_then_succeeds(db_path, monkeypatch):
    """A write that finds the database locked is retried after a pause and succeeds."""
    backend = SQLiteBackend(db_path, busy_timeout=0.01, retries=3)
    blocker = raw(db_path)
    blocker.execute("BEGIN IMMEDIATE")
    pauses = []

    def pause(seconds):
        pauses.append(seconds)
        if blocker.in_transaction:
            blocker.execute("COMMIT")

    monkeypatch.setattr(connections, "_sleep", pause)
    with backend:
        stored = backend.create_session(record("s1"))
        assert backend.get_session("s1") == stored
    blocker.close()
    assert len(pauses) == 1
    assert 0 <= pauses[0] <= 0.25


def test_lock_held_too_long_raises_lock_timeout(db_path, monkeypatch):
    """When every retry finds the database locked, the caller gets LockTimeoutError."""
    backend = SQLiteBackend(db_path, busy_timeout=0.01, retries=2)
    blocker = raw(db_path)
    blocker.execute("BEGIN IMMEDIATE")
    pauses = []
    monkeypatch.setattr(connections, "_sleep", pauses.append)
    with backend, pytest.raises(LockTimeoutError) as info:
        backend.create_session(record("s1"))
    blocker.execute("ROLLBACK")
    blocker.close()
    assert len(pauses) == 2
    assert info.value.resource == str(db_path)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


def test_each_thread_uses_its_own_connection(backend):
    """Threads get separate connections; a finished thread's connection is released."""
    seen = []

    def work():
        seen.append(backend._connection())
        backend.get_session("nope")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen[0] is not backend._connection()
    del seen[:]
    gc.collect()
    assert len(backend._connections) == 1


def test_a_forked_child_opens_its_own_connection(backend):
    """After fork the child uses a new connection, never the parent's."""
    seed(backend, "s1")
    parent = backend._connection()
    child = os.fork()
    if child == 0:  # pragma: no cover  # runs in the child; its exit code is the assertion
        ok = backend._connection() is not parent and backend.get_session("s1") is not None
        backend.append_messages("s1", [say("from the child")])
        backend.close()  # closes the child's connection only
        os._exit(0 if ok else 1)
    _pid, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend._connection() is parent
    backend.append_messages("s1", [say("from the parent")])
    assert [m.content for m in backend.get_messages("s1")] == ["from the child", "from the parent"]


# -- write-ahead log and maintenance ---------------------------------------------------------------


def test_wal_stays_bounded_under_steady_writes(db_path):
    """With readers running beside a steady writer, the WAL never grows far past its limit."""
    limit = 256 * 1024
    with SQLiteBackend(db_path, wal_size_limit=limit) as backend:
        seed(backend, "s1")
        wal = db_path.parent / "state.db-wal"
        done = threading.Event()

        def read():
            while not done.is_set():
                backend.get_messages("s1", limit=5, from_end=True)

        reader = threading.Thread(target=read)
        reader.start()
        sizes = []
        try:
            for n in range(300):
                backend.append_messages("s1", [say(f"{n} " + "filler text 飞书机器人 " * 40)])
                sizes.append(wal.stat().st_size)
        finally:
            done.set()
            reader.join()
        # SQLite's own automatic checkpoint waits for 1,000 pages (4 MiB): far above the limit.
        # A truncation that meets a reader is retried at the next commit, hence the slack.
        assert max(sizes) < 2 * limit
        assert sizes.count(0) >= 3


def test_maintenance_keeps_data_and_finds_problems(backend):
    """optimize, vacuum and checkpoint keep every message; integrity_check reports damage."""
    seed(backend, "s1", None, *(say(f"kiwi {n}") for n in range(50)))
    backend.optimize()
    backend.vacuum()
    assert backend.checkpoint()
    assert backend.checkpoint(truncate=False)
    assert len(found(backend, "kiwi")) == 50
    assert backend.integrity_check() == []
    connection = backend._connection()
    connection.execute("UPDATE sessions SET message_count = 7")
    connection.execute("DELETE FROM messages_fts WHERE rowid = 3")
    connection.execute("INSERT INTO entries VALUES ('k', 'ghost', 1, 0, 0, NULL, '{}')")
    problems = backend.integrity_check()
    assert any("session s1: stored counts 7/0, actual 50/0" in p for p in problems)
    assert any("1 messages unindexed" in p for p in problems)
    assert any("points at missing session 'ghost'" in p for p in problems)
    assert backend.rebuild_index() == 50
    assert len(found(backend, "kiwi")) == 50


def test_corrupt_fts_index_is_reported(backend):
    """A full-text index that disagrees with its content fails integrity_check."""
    seed(backend, "s1", None, say("kiwi"))
    backend._connection().execute("UPDATE messages_fts_content SET c0 = 'lime' WHERE id = 1")
    assert any("full-text index" in problem for problem in backend.integrity_check())


@pytest.mark.parametrize("secure_delete", [True, False])
def test_scrub_removes_deleted_text_from_the_files(db_path, secure_delete):
    """After delete_session and scrub(), the deleted text is nowhere in the database files."""
    secret = "zebrafish-password-4471"  # noqa: S105  # test data
    with SQLiteBackend(db_path, secure_delete=secure_delete) as backend:
        seed(backend, "keep", None, *(say(f"ordinary message {n}") for n in range(30)))
        seed(backend, "gone", None, say(f"my secret is {secret} 秘密口令"))
        backend.optimize()
        backend.delete_session("gone")
        backend.scrub()
        data = b"".join(path.read_bytes() for path in db_path.parent.iterdir())
        assert secret.encode() not in data
        assert "秘密口令".encode() not in data
        assert b"4471" not in data
        assert len(found(backend, "ordinary")) == 30


def test_replace_message_refuses_a_platform_id_of_another_message(backend):
    """An edit may not take the platform id of another message in the session."""
    seed(backend, "s1")
    first, second = backend.append_messages(
        "s1", [say("a", platform_message_id="p1"), say("b", platform_message_id="p2")]
    )
    with pytest.raises(ValueError, match="already belongs"):
        backend.replace_message("s1", second.id, say("b2", platform_message_id="p1"))
    assert backend.find_message("s1", "p1") == first


def test_fts5_probe_reports_a_missing_module():
    """The probe answers False when SQLite cannot create an FTS5 table."""

    class NoFts5:
        def execute(self, _sql):
            raise sqlite3.OperationalError("no such module: fts5")

    assert schema.fts5_available(NoFts5()) is False


def test_migrations_and_index_builds_done_by_another_process_are_skipped(backend):
    """Re-running an applied migration or building a ready index changes nothing."""
    from hermes_sessions.backends.sqlite import _statements as statements  # noqa: PLC0415

    connection = backend._connection()
    statements.migrate(connection, version=1)
    assert statements.build_index(connection) == 0
    assert schema.applied_version(connection) == schema.SCHEMA_VERSION


def test_plan_repointing_and_writing_one_key_matches_the_reference(backend):
    """A plan that repoints a key and also writes it stores what the reference stores."""
    from hermes_sessions.protocols import EntryWrite, RotationPlan  # noqa: PLC0415
    from hermes_sessions.testing._support import entry_for  # noqa: PLC0415

    key = "agent:main:telegram:dm:1"
    reference = InMemoryBackend()
    results = []
    for target in (backend, reference):
        seed(target, "a", key)
        seed(target, "b")
        plan = RotationPlan(
            at=minutes(1),
            repoint=[("a", "b")],
            entries=[EntryWrite(entry=entry_for(key, "b", suspended=True), expected_revision=1)],
        )
        results.append(target.apply(plan))
    assert results[0] == results[1]
    assert backend.get_entry(key) == reference.get_entry(key)


def test_scrub_refuses_to_report_success_while_an_old_reader_holds_the_wal(db_path):
    """scrub() raises LockTimeoutError when a reader keeps the WAL from being truncated."""
    with SQLiteBackend(db_path, busy_timeout=0.05) as backend:
        seed(backend, "s1", None, say("kiwi"))
        reader = raw(db_path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchone()
        try:
            backend.append_messages("s1", [say("lime")])
            with pytest.raises(LockTimeoutError):
                backend.scrub()
        finally:
            reader.execute("COMMIT")
            reader.close()
        backend.scrub()


def test_a_database_that_cannot_use_wal_is_refused(db_path, monkeypatch):
    """If SQLite will not switch to WAL mode, opening fails and the connection is closed."""

    class NoWal(connections._Connection):
        def execute(self, sql, *args):
            if sql.startswith("PRAGMA journal_mode"):
                return super().execute("SELECT 'delete'")
            return super().execute(sql, *args)

    monkeypatch.setattr(connections, "_Connection", NoWal)
    with pytest.raises(StorageError, match="cannot use WAL"):
        SQLiteBackend(db_path)


def test_a_file_that_cannot_be_created_is_a_storage_error(tmp_path):
    """Creating the database under a plain file raises StorageError."""
    (tmp_path / "plain").write_text("not a directory")
    for path in (tmp_path / "plain" / "state.db", tmp_path / "plain" / "deeper" / "state.db"):
        with pytest.raises(StorageError, match="cannot create"):
            SQLiteBackend(path)


def test_closing_during_a_call_raises_backend_closed(backend, monkeypatch):
    """A call whose backend is closed under it raises BackendClosedError, not a sqlite3 error."""
    from hermes_sessions.backends.sqlite import _statements as statements  # noqa: PLC0415

    def close_first(connection, session_id):
        backend.close()
        return connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))

    monkeypatch.setattr(statements, "record", close_first)
    with pytest.raises(BackendClosedError):
        backend.get_session("s1")
    with pytest.raises(BackendClosedError):
        backend._connection()


def test_wal_limit_can_be_left_to_sqlite(db_path):
    """wal_size_limit=None leaves checkpoints to SQLite; writes work the same."""
    with SQLiteBackend(db_path, wal_size_limit=None) as backend:
        seed(backend, "s1", None, say("kiwi"))
        assert found(backend, "kiwi") == ["kiwi"]


def test_work_that_ended_its_own_transaction_is_not_rolled_back_twice(backend):
    """An error after the transaction already ended propagates as it is."""

    def work(connection):
        connection.execute("ROLLBACK")
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        backend._run(work, write=True)
    assert backend.get_session("s1") is None


def test_a_damaged_routing_row_is_a_corrupt_record(backend):
    """A routing row whose columns were damaged by hand raises CorruptRecordError, not garbage."""
    seed(backend, "s1", "agent:main:x:dm:1")
    connection = backend._connection()
    connection.execute(
        "UPDATE entries SET revision = 'two' WHERE session_key = 'agent:main:x:dm:1'"
    )
    with pytest.raises(CorruptRecordError, match="malformed"):
        backend.get_entry("agent:main:x:dm:1")
    connection.execute(
        'UPDATE entries SET revision = 2, body = \'{"suspended": "yes"}\' '
        "WHERE session_key = 'agent:main:x:dm:1'"
    )
    with pytest.raises(CorruptRecordError):
        backend.get_entry("agent:main:x:dm:1")
