"""Fixtures of the SQLite backend tests: a database path and a backend on it."""

from __future__ import annotations

import pytest

from hermes_sessions.backends import SQLiteBackend


@pytest.fixture
def db_path(tmp_path):
    """Where the test's database lives (its directory does not exist yet)."""
    return tmp_path / "data" / "state.db"


@pytest.fixture
def backend(db_path):
    """A backend on ``db_path``, closed afterwards."""
    with SQLiteBackend(db_path) as opened:
        yield opened
