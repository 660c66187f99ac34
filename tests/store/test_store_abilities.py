"""Optional backend abilities are declared protocols, found with isinstance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions import SessionStore
from hermes_sessions.backends import InMemoryBackend, JSONLBackend, SQLiteBackend
from hermes_sessions.protocols import SearchableBackend, SupportsScrub, SupportsSearch

if TYPE_CHECKING:
    from pathlib import Path


def test_every_bundled_backend_declares_search(tmp_path: Path):
    """The in-memory, JSONL and SQLite backends all implement SupportsSearch."""
    with (
        SQLiteBackend(tmp_path / "state.db") as sqlite,
        JSONLBackend(tmp_path / "jsonl") as jsonl,
        InMemoryBackend() as memory,
    ):
        for backend in (sqlite, jsonl, memory):
            assert isinstance(backend, SupportsSearch)
            assert isinstance(backend, SearchableBackend)


def test_only_sqlite_offers_scrub(tmp_path: Path):
    """SQLite implements SupportsScrub; the in-memory backend keeps nothing to scrub."""
    with SQLiteBackend(tmp_path / "state.db") as sqlite, InMemoryBackend() as memory:
        assert isinstance(sqlite, SupportsScrub)
        assert not isinstance(memory, SupportsScrub)


class ScrubbingBackend(InMemoryBackend):
    """An in-memory backend that also declares the scrub ability, counting the calls."""

    scrubbed = 0

    def scrub(self) -> None:
        """Count the call."""
        self.scrubbed += 1


def test_erase_user_scrubs_a_backend_that_can():
    """erase_user calls scrub() once, at the end, when the backend implements SupportsScrub."""
    backend = ScrubbingBackend()
    with SessionStore(backend) as store:
        store.erase_user("telegram", "nobody")
    assert backend.scrubbed == 1
