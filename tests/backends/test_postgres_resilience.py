"""PostgresBackend when the server drops connections, and when the DSN cannot work.

Connections are dropped the way a restart, a failover or an idle-session timeout drops them:
``pg_terminate_backend`` from another connection, on the pooled connections of this backend only
(other tests share the server).
"""

from __future__ import annotations

import time

import pytest

from hermes_sessions.exceptions import StorageError
from hermes_sessions.testing._support import record, say, seed
from pg_support import open_pg, requires_pg, test_dsn

psycopg = pytest.importorskip("psycopg")

from hermes_sessions.backends.postgres import PostgresBackend  # noqa: E402

pytestmark = requires_pg


def terminate(*pids):
    """Kill the server processes ``pids`` and wait until they are gone."""
    with psycopg.connect(test_dsn(), autocommit=True) as connection:
        for pid in pids:
            connection.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(500):
            alive = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)
            ).fetchone()[0]
            if not alive:
                return
            time.sleep(0.01)
    raise AssertionError(f"server processes {pids} still alive")


def pooled_pids(backend):
    """The server process of every connection in the backend's pool (all checked out at once)."""
    pool = backend._pool
    connections = [pool.getconn() for _ in range(backend.max_size)]
    try:
        return [connection.info.backend_pid for connection in connections]
    finally:
        for connection in connections:
            pool.putconn(connection)


def test_dropped_idle_connections_never_reach_a_caller(tmp_path):
    """Every pooled connection killed: the next calls, reads and writes, all succeed."""
    with open_pg(tmp_path, min_size=4, max_size=4) as backend:
        seed(backend, "s1", "k1", say("before"))
        terminate(*pooled_pids(backend))
        for number in range(8):  # one turn per pooled connection, twice over
            assert backend.get_session("s1") is not None
            backend.append_messages("s1", [say(f"after {number}")])
        assert [m.content for m in backend.get_messages("s1")][-1] == "after 7"
        assert len(backend.get_messages("s1")) == 9  # each write stored exactly once


def test_a_connection_lost_inside_a_transaction_is_run_again(tmp_path):
    """The server drops the connection after the first statement: the work reruns, once."""
    with open_pg(tmp_path, max_size=2) as backend:
        seed(backend, "s1", "k1")
        runs = []

        def work(connection):
            runs.append(connection.info.backend_pid)
            connection.execute("SELECT 1")
            if len(runs) == 1:
                terminate(connection.info.backend_pid)
            return connection.execute("SELECT 2").fetchone()[0]

        assert backend._run(work) == 2
        assert len(runs) == 2
        assert runs[0] != runs[1]


def test_a_connection_lost_during_commit_is_not_run_again(tmp_path):
    """Lost while committing: the outcome is unknown, so the caller is told rather than retried."""
    with open_pg(tmp_path, max_size=2) as backend:
        runs = []

        def work(connection):
            runs.append(1)
            connection.execute("SELECT 1")
            terminate(connection.info.backend_pid)

        with pytest.raises(StorageError, match="may or may not be stored"):
            backend._run(work)
        assert len(runs) == 1
        assert backend.get_session("nothing") is None  # the pool has recovered


def test_a_bad_dsn_fails_at_once_naming_the_cause():
    """An unknown database: the open fails at once (not after the pool's timeout), saying why."""
    dsn = psycopg.conninfo.make_conninfo(
        test_dsn(),
        dbname="hs_no_such_database",
        password="s3cret-pw",  # noqa: S106
    )
    with pytest.raises(StorageError) as caught:
        PostgresBackend(dsn, timeout=600)  # the pool's timeout is not what ends the wait
    message = str(caught.value)
    assert "hs_no_such_database" in message
    assert "does not exist" in message
    assert "s3cret-pw" not in message
    assert caught.value.__cause__ is None or "s3cret-pw" not in str(caught.value.__cause__)


def test_a_pool_timeout_names_the_servers_reason(tmp_path, monkeypatch):
    """The pool cannot connect any more: the timeout's message carries why."""
    with open_pg(tmp_path, min_size=0, max_size=1, timeout=0.5) as backend:
        assert backend.get_session("s1") is None
        terminate(*pooled_pids(backend))
        monkeypatch.setattr(
            backend,
            "dsn",
            psycopg.conninfo.make_conninfo(test_dsn(), dbname="hs_no_such_database"),
        )
        backend._pool.kwargs["dbname"] = "hs_no_such_database"
        with pytest.raises(StorageError, match="does not exist"):
            backend.get_session("s1")


def test_record_round_trip_after_kill(tmp_path):
    """A session written on a fresh connection after a kill reads back the same."""
    with open_pg(tmp_path, min_size=1, max_size=1) as backend:
        terminate(*pooled_pids(backend))
        backend.create_session(record("s2"))
        assert backend.get_session("s2").id == "s2"
