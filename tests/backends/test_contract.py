"""The conformance suite, run on every backend in this repository."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.testing import BackendContract
from pg_support import open_pg, requires_pg

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.backends.postgres import PostgresBackend


class TestInMemoryBackend(BackendContract):
    """The in-memory reference backend."""

    def make_backend(self, directory: Path) -> InMemoryBackend:
        """A fresh in-memory backend (it keeps no files)."""
        del directory
        return InMemoryBackend()


class TestSQLiteBackend(BackendContract):
    """The SQLite backend, on a file in the test's fresh directory."""

    def make_backend(self, directory: Path) -> SQLiteBackend:
        """A backend on ``<directory>/state.db`` (reopening reaches the same data)."""
        return SQLiteBackend(directory / "state.db")


class TestJSONLBackend(BackendContract):
    """The JSONL files backend (full durability, as deployed)."""

    def make_backend(self, directory: Path) -> JSONLBackend:
        """A JSONL backend on ``directory`` (created on first use)."""
        return JSONLBackend(directory)


@requires_pg
class TestPostgresBackend(BackendContract):
    """The PostgreSQL backend, in a schema of its own for each test directory."""

    def make_backend(self, directory: Path) -> PostgresBackend:
        """A backend on the test server whose schema is derived from ``directory``."""
        return open_pg(directory)
