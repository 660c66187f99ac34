"""PostgresBackend beyond the conformance suite: schema, migrations, locking, retries, text."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.exceptions import (
    BackendClosedError,
    IncompatibleStoreError,
    LockTimeoutError,
    StorageError,
)
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import T0, minutes, record, say, seed
from pg_support import open_pg, requires_pg, schema_for, test_dsn

psycopg = pytest.importorskip("psycopg")
sql = pytest.importorskip("psycopg.sql")

from hermes_sessions.backends.postgres import PostgresBackend  # noqa: E402
from hermes_sessions.backends.postgres import _pool as pool_module  # noqa: E402
from hermes_sessions.backends.postgres import _schema as schema  # noqa: E402
from hermes_sessions.backends.postgres._rows import dec, enc  # noqa: E402

pytestmark = requires_pg


@pytest.fixture
def backend(tmp_path):
    """A backend in a fresh schema, closed afterwards."""
    with open_pg(tmp_path) as opened:
        yield opened


def raw(statement, params=(), *, schema_name=""):
    """Run one statement (``{s}``: the quoted schema) outside the backend; return its rows."""
    query = sql.SQL(statement).format(s=sql.Identifier(schema_name or "public"))
    with psycopg.connect(test_dsn(), autocommit=True) as connection:
        cursor = connection.execute(query, params)
        return cursor.fetchall() if cursor.description else []


# -- opening, schema and migrations ----------------------------------------------------------------


def _open_and_report(directory, barrier):
    barrier.wait()
    with open_pg(directory, min_size=0) as backend:
        return backend.migrations_applied


def test_hosts_starting_at_once_migrate_once(tmp_path):
    """Four processes opening a new schema at the same moment: one applies each migration."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(4)
        with context.Pool(4) as workers:
            applied = workers.starmap(_open_and_report, [(tmp_path, barrier)] * 4)
    assert sum(applied) == schema.SCHEMA_VERSION  # each migration by one of them
    rows = raw(
        "SELECT version FROM {s}.schema_migrations ORDER BY version",
        schema_name=schema_for(tmp_path),
    )
    assert [row[0] for row in rows] == list(range(1, schema.SCHEMA_VERSION + 1))


def test_reopening_applies_nothing(tmp_path):
    """A schema at the current version is opened without migrating."""
    with open_pg(tmp_path) as first:
        assert first.migrations_applied == schema.SCHEMA_VERSION
        assert first.schema_version() == schema.SCHEMA_VERSION
    with open_pg(tmp_path) as second:
        assert second.migrations_applied == 0


def test_a_newer_schema_is_refused(tmp_path):
    """A schema migrated by a newer library raises IncompatibleStoreError and is left alone."""
    open_pg(tmp_path).close()
    name = schema_for(tmp_path)
    raw(
        "INSERT INTO {s}.schema_migrations VALUES (%s, now(), %s)",
        (schema.SCHEMA_VERSION + 1, "9.9"),
        schema_name=name,
    )
    with pytest.raises(IncompatibleStoreError) as caught:
        open_pg(tmp_path)
    assert caught.value.found_version == schema.SCHEMA_VERSION + 1
    assert name in str(caught.value)


def test_schema_names_are_quoted(tmp_path):
    """A schema name with quotes, spaces and capitals works (identifiers go through psycopg.sql)."""
    name = schema_for(tmp_path) + ' We"ird'
    with PostgresBackend(test_dsn() or "", schema=name, max_size=2) as backend:
        seed(backend, "s1", "k", say("hello"))
        assert backend.get_messages("s1")[0].content == "hello"
    assert raw("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (name,)) == [(1,)]


def test_unreachable_server_is_a_storage_error():
    """A server that refuses connections fails the open with StorageError, password unshown."""
    dsn = "postgresql://postgres:s3cret-pw@127.0.0.1:1/test"
    with pytest.raises(StorageError) as caught:
        PostgresBackend(dsn, timeout=1, connect_timeout=1)
    assert "s3cret-pw" not in str(caught.value)
    assert "127.0.0.1:1" in str(caught.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_size": 3, "max_size": 2}, "must not exceed"),
        ({"schema": ""}, "identifier"),
        ({"schema": "x" * 64}, "identifier"),
        ({"timeout": 0}, "positive"),
        ({"lock_timeout": -1}, "positive"),
    ],
)
def test_bad_options_are_refused(options, message):
    """Pool and schema options are validated before connecting."""
    with pytest.raises(ValueError, match=message):
        PostgresBackend(test_dsn() or "", **options)


def test_closed_backend_and_repr(tmp_path):
    """The repr names the schema and pool but not the DSN; a closed backend refuses calls."""
    backend = open_pg(tmp_path)
    assert schema_for(tmp_path) in repr(backend)
    assert "pool 1-4" in repr(backend)
    backend.close()
    assert "closed" in repr(backend)
    with pytest.raises(BackendClosedError):
        backend.schema_version()


def test_from_env_needs_a_dsn(monkeypatch):
    """Without dsn= and without HERMES_SESSIONS_DSN, opening says what to set."""
    monkeypatch.delenv("HERMES_SESSIONS_DSN", raising=False)
    with pytest.raises(ValueError, match="HERMES_SESSIONS_DSN"):
        PostgresBackend.from_env()


def test_open_backend_and_store_read_the_environment(tmp_path, monkeypatch):
    """open_backend('postgres') and SessionStore.open(backend='postgres') use the DSN variable."""
    from hermes_sessions.backends import open_backend  # noqa: PLC0415
    from hermes_sessions.models import SessionSource  # noqa: PLC0415
    from hermes_sessions.store import SessionStore  # noqa: PLC0415

    dsn = test_dsn()
    assert dsn is not None
    with psycopg.connect(dsn, autocommit=True) as connection:  # no pre-release schema migrates
        connection.execute("DROP SCHEMA IF EXISTS hermes_sessions CASCADE")
    monkeypatch.setenv("HERMES_SESSIONS_DSN", dsn)
    with open_backend("postgres") as backend:
        assert isinstance(backend, PostgresBackend)
        assert backend.schema == "hermes_sessions"
    with SessionStore.open(backend="postgres", dsn=test_dsn()) as store:
        assert isinstance(store.backend, PostgresBackend)
        lookup = store.get_or_create(SessionSource(platform="telegram", chat_id="1", user_id="u"))
        assert store.backend.get_session(lookup.entry.session_id) is not None
        store.backend.delete_entry(lookup.entry.session_key, expected_revision=1)
        store.backend.delete_session(lookup.entry.session_id)


# -- transactions, locks and retries ---------------------------------------------------------------


def test_serialization_failures_are_retried(backend, monkeypatch):
    """A transaction failing with 40001 is retried after a jittered pause, invisibly."""
    pauses = []
    monkeypatch.setattr(pool_module, "_sleep", pauses.append)
    attempts = []

    def work(connection):
        attempts.append(1)
        if len(attempts) < 3:
            raise psycopg.errors.SerializationFailure("could not serialize access")
        return connection.execute("SELECT 42").fetchone()[0]

    assert backend._run(work) == 42
    assert len(pauses) == 2
    assert all(0 <= pause <= 0.25 for pause in pauses)


def test_retries_are_bounded(backend, monkeypatch):
    """Deadlocks that keep happening end in LockTimeoutError after the configured retries."""
    monkeypatch.setattr(pool_module, "_sleep", lambda _seconds: None)
    attempts = []

    def work(_connection):
        attempts.append(1)
        raise psycopg.errors.DeadlockDetected("deadlock detected")

    with pytest.raises(LockTimeoutError):
        backend._run(work)
    assert len(attempts) == backend.retries + 1


def test_lock_timeout_ends_in_lock_timeout_error(tmp_path, monkeypatch):
    """A row held locked by another client longer than lock_timeout: the write gives up clearly."""
    monkeypatch.setattr(pool_module, "_sleep", lambda _seconds: None)
    with open_pg(tmp_path, lock_timeout=0.05, retries=1) as backend:
        seed(backend, "s1")
        with psycopg.connect(test_dsn()) as holder:
            statement = sql.SQL("SELECT 1 FROM {s}.sessions WHERE id = %s FOR UPDATE")
            holder.execute(statement.format(s=sql.Identifier(backend.schema)), ("s1",))
            with pytest.raises(LockTimeoutError):
                backend.append_messages("s1", [say("blocked")])
        (stored,) = backend.append_messages("s1", [say("later")])
        assert stored.content == "later"


def test_other_database_errors_are_storage_errors(backend):
    """A psycopg error that is not a conflict reaches the caller as StorageError, chained."""
    raw("DROP TABLE {s}.leases", schema_name=backend.schema)
    with pytest.raises(StorageError) as caught:
        backend.acquire_lease("r", "h", ttl=timedelta(seconds=1), now=T0)
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_pool_exhaustion_is_a_storage_error(tmp_path):
    """No free connection within the pool timeout: StorageError saying what to raise."""
    with open_pg(tmp_path, max_size=1, timeout=0.2) as backend:
        release = threading.Event()
        taken = threading.Event()

        def hold(_connection):
            taken.set()
            release.wait(5)

        holder = threading.Thread(target=backend._run, args=(hold,))
        holder.start()
        taken.wait(5)
        try:
            with pytest.raises(StorageError, match="max_size"):
                backend.get_session("s1")
        finally:
            release.set()
            holder.join()


def test_concurrent_appends_keep_ids_in_commit_order(backend):
    """Threads appending to one session: ids strictly increase and none is lost."""
    seed(backend, "s1")

    def worker(n):
        for i in range(20):
            backend.append_messages("s1", [say(f"{n}:{i}")])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [m.id for m in backend.get_messages("s1")]
    assert len(ids) == 80
    assert ids == sorted(ids)
    assert len(set(ids)) == 80


# -- text that PostgreSQL cannot hold as is --------------------------------------------------------


@given(st.text())
@settings(max_examples=200)
def test_text_escape_round_trips(value):
    """enc/dec is lossless for every string, and enc never leaves U+0000 in the column."""
    assert dec(enc(value)) == value
    assert "\x00" not in enc(value)


def test_nul_characters_are_stored_and_found(backend):
    """U+0000 in content, ids, names and titles round-trips, and the content is searchable."""
    seed(backend, "s1", "key\x00with nul", title="ti\x00tle \\0")
    message = say("before\x00after marmot", platform_message_id="p\x00\\1", sender_id="a\\0\x00")
    (stored,) = backend.append_messages("s1", [message])
    assert backend.get_messages("s1") == [stored]
    assert backend.find_message("s1", "p\x00\\1") == stored
    assert backend.get_entry("key\x00with nul") is not None
    record_ = backend.get_session("s1")
    assert record_ is not None
    assert (record_.title, record_.session_key) == ("ti\x00tle \\0", "key\x00with nul")
    hits = backend.search(SearchQuery(text="after marmot"))
    assert [hit.message.content for hit in hits] == ["before\x00after marmot"]


def test_activity_and_cost_columns_round_trip(backend):
    """Cost increments are float-exact enough and activity keeps microseconds."""
    seed(backend, "s1", "k")
    backend.update_session("s1", increments={"estimated_cost_usd": 0.25, "input_tokens": 7})
    backend.update_session("s1", increments={"estimated_cost_usd": 0.5})
    stored = backend.get_session("s1")
    assert stored is not None
    assert (stored.estimated_cost_usd, stored.input_tokens) == (0.75, 7)
    moment = minutes(1) + timedelta(microseconds=7)
    entry = backend.record_activity("k", moment)
    assert entry is not None
    assert entry.updated_at == moment


def test_sessions_of_other_schemas_are_invisible(tmp_path):
    """Two schemas on one database are two independent stores."""
    with open_pg(tmp_path / "a") as first, open_pg(tmp_path / "b") as second:
        first.create_session(record("s1"))
        assert second.get_session("s1") is None
        second.create_session(record("s1", title="other"))
        stored = first.get_session("s1")
        assert stored is not None
        assert stored.title is None


def test_a_host_that_loses_the_migration_race_applies_nothing(tmp_path, monkeypatch):
    """Migrated by another host between the unlocked read and the lock: nothing is applied."""
    open_pg(tmp_path).close()
    reads = []
    real = schema.applied_version

    def stale_first(pool, connection):
        reads.append(1)
        return 0 if len(reads) == 1 else real(pool, connection)

    monkeypatch.setattr(schema, "applied_version", stale_first)
    with open_pg(tmp_path) as backend:
        assert backend.migrations_applied == 0
    assert len(reads) == 2


def test_a_write_behind_a_moved_revision_conflicts(backend):
    """The revision guard of the write itself catches a key moved after the check."""
    from hermes_sessions.backends.postgres import _statements as statements  # noqa: PLC0415
    from hermes_sessions.exceptions import ConflictError  # noqa: PLC0415
    from hermes_sessions.testing._support import entry_for  # noqa: PLC0415

    seed(backend, "s1", "k")
    with pytest.raises(ConflictError) as caught:
        backend._run(lambda c: statements.store_entry(backend, c, entry_for("k", "s1"), 5))
    assert (caught.value.expected_revision, caught.value.actual_revision) == (5, 1)


def test_a_malformed_dsn_is_a_storage_error():
    """A DSN libpq cannot parse fails the open with StorageError (and a readable description)."""
    with pytest.raises(StorageError, match="PostgreSQL schema"):
        PostgresBackend("this is = not a 'dsn", timeout=1, connect_timeout=1)
