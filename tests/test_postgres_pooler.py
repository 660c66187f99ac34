"""The PostgreSQL backend behind a pooler in transaction mode, and no session state left behind.

A pooler in transaction mode (PgBouncer, Supavisor, RDS Proxy) may give each transaction a
different server connection, so the backend must never rely on session state: no session-level
advisory lock, no ``SET`` without ``LOCAL``, no temporary table, no ``LISTEN``, no named prepared
statement kept between transactions. Two proofs: every operation leaves its server connection
without any such state (always, with the test server), and the whole workload runs through a real
PgBouncer 1.18 in transaction mode with fewer server connections than clients (when the
``pgbouncer`` program is installed: Debian's package ``pgbouncer``; 1.18 has no prepared-statement
support at all, so a named statement reused across transactions would fail).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from typing import TYPE_CHECKING

import pytest

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends.postgres import PostgresBackend
from hermes_sessions.exceptions import ConflictError
from hermes_sessions.queries import SessionQuery
from pg_support import requires_pg, schema_for, test_dsn

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = requires_pg

SESSION_STATE = {
    "advisory locks held": "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
    "AND pid = pg_backend_pid()",
    "prepared statements": "SELECT count(*) FROM pg_prepared_statements",
    "temporary tables": "SELECT count(*) FROM pg_class WHERE relpersistence = 't'",
    "channels listened to": "SELECT count(*) FROM pg_listening_channels()",
    "settings changed for the session": "SELECT count(*) FROM pg_settings WHERE source = 'session'",
    "open cursors": "SELECT count(*) FROM pg_cursors",
}


def workload(store: SessionStore, worker: int, rounds: int = 5) -> int:
    """Routing, appends, redeliveries, rotations, CAS conflicts and searches; return appends."""
    appended = 0
    for number in range(rounds):
        source = SessionSource(platform="telegram", chat_id=str(number % 3), user_id=f"u{worker}")
        lookup = store.get_or_create(source)
        message = Message(
            role="user",
            content=f"部署 worker{worker} round{number}",
            platform_message_id=f"{worker}-{number}",
        )
        if not store.append(lookup.session_id, message).duplicate:
            appended += 1
        assert store.append(lookup.session_id, message).duplicate  # a redelivery: stored once
        if number % 2:
            store.reset(lookup.entry.session_key)
        entry = store.backend.get_entry(lookup.entry.session_key)
        if entry is not None:
            try:  # a stale revision must be refused, whoever else wrote meanwhile
                store.backend.put_entry(entry, expected_revision=entry.revision - 1)
            except ConflictError:
                pass
            else:  # pragma: no cover  # the backend would be broken
                raise AssertionError("a stale revision was accepted")
        assert store.search(f"worker{worker}")
    return appended


def test_operations_leave_no_session_state(tmp_path):
    """After migrations and every kind of operation, the server connection holds no state."""
    backend = PostgresBackend(test_dsn(), schema=schema_for(tmp_path), min_size=1, max_size=1)
    with SessionStore(backend) as store:
        workload(store, 0)
        backend.reindex()
        pool = backend._pool  # the one server connection every call used
        assert pool is not None
        with pool.connection() as connection:
            found = {
                what: connection.execute(query).fetchone()[0]  # type: ignore[index]
                for what, query in SESSION_STATE.items()
            }
    assert found == dict.fromkeys(SESSION_STATE, 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def pgbouncer(tmp_path: Path) -> Iterator[str]:
    """A PgBouncer in transaction mode with two server connections; its DSN."""
    program = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None
    )
    if program is None:
        pytest.skip("needs the pgbouncer program (Debian: apt-get install pgbouncer)")
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

    server = conninfo_to_dict(test_dsn())
    port = _free_port()
    folder = tmp_path / "pgbouncer"
    folder.mkdir()
    folder.chmod(0o755)  # read by the unprivileged user PgBouncer switches to
    config = folder / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"* = host={server.get('host', '127.0.0.1')} port={server.get('port', 5432)}"
        f" user={server.get('user', 'postgres')}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        "auth_type = any\npool_mode = transaction\ndefault_pool_size = 2\n"
        "server_round_robin = 1\nignore_startup_parameters = extra_float_digits,options\n"
    )
    config.chmod(0o644)
    command = [program, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(config)]
    log = folder / "pgbouncer.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=output)  # our config
    try:
        deadline = time.monotonic() + 30
        while True:  # ready when it accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"pgbouncer did not start: {log.read_text()}")
                time.sleep(0.05)
        database = server.get("dbname", "test")
        yield f"postgresql://{server.get('user', 'postgres')}@127.0.0.1:{port}/{database}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_workload_runs_through_pgbouncer_in_transaction_mode(tmp_path, pgbouncer):
    """Four hosts of four connections each share two server connections through PgBouncer."""
    schema = schema_for(tmp_path)
    results: dict[int, int] = {}
    errors: list[BaseException] = []

    def host(worker: int) -> None:
        try:
            backend = PostgresBackend(pgbouncer, schema=schema, min_size=0, max_size=4)
            with SessionStore(backend) as store:
                results[worker] = workload(store, worker, rounds=8)
        except BaseException as error:  # noqa: BLE001  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=host, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    direct = PostgresBackend(test_dsn(), schema=schema, min_size=0, max_size=1)
    with direct:  # the same data, read without the pooler: every message stored exactly once
        records = [i.record for i in direct.list_sessions(SessionQuery(limit=None)).items]
        stored = sum(len(direct.get_messages(r.id)) for r in records)
    assert results == dict.fromkeys(range(4), 8)
    assert stored == 32
