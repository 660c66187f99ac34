"""Fixtures and builders shared by the conformance suite's mixins."""

from __future__ import annotations

import multiprocessing
import stat
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from hermes_sessions.models import Message, SessionEntry, SessionRecord, SessionSource
from hermes_sessions.protocols import Backend, EntryWrite, RotationPlan, SearchableBackend

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

__all__ = [
    "T0",
    "ContractBase",
    "SearchableBackend",
    "entry_for",
    "evolve",
    "minutes",
    "private_mode_problems",
    "record",
    "run_threads",
    "run_workers",
    "say",
    "seed",
]

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
"""The reference time of the suite's data."""


def minutes(n: float) -> datetime:
    """``T0`` plus ``n`` minutes."""
    return T0 + timedelta(minutes=n)


def record(session_id: str, **fields: Any) -> SessionRecord:
    """A session record with sensible defaults (telegram, user ``u1``, started at ``T0``)."""
    values: dict[str, Any] = {
        "source": "telegram",
        "started_at": T0,
        "user_id": "u1",
        "session_key": f"agent:main:telegram:dm:{fields.get('user_id', 'u1')}",
    }
    values.update(fields)
    return SessionRecord(id=session_id, **values)


def entry_for(key: str, session_id: str, *, at: datetime = T0, **fields: Any) -> SessionEntry:
    """A routing entry pointing ``key`` at ``session_id``."""
    return SessionEntry(
        session_key=key,
        session_id=session_id,
        created_at=at,
        updated_at=at,
        origin=SessionSource(platform="telegram", chat_id="1", user_id="u1"),
        platform="telegram",
        chat_type="dm",
        **fields,
    )


def seed(
    backend: Backend,
    session_id: str,
    key: str | None = None,
    *messages: Message,
    **fields: Any,
) -> SessionRecord:
    """Create a session (and an entry for ``key``, if given) with ``messages`` in one plan."""
    created = record(session_id, **({"session_key": key} if key else {}) | fields)
    writes = [EntryWrite(entry=entry_for(key, session_id), expected_revision=None)] if key else []
    backend.apply(RotationPlan(at=T0, create=created, messages=messages, entries=writes))
    stored = backend.get_session(session_id)
    assert stored is not None
    return stored


def run_workers(target: Callable[..., None], *args: Any, workers: int = 4) -> list[int | None]:
    """Run ``target(*args, worker)`` in ``workers`` spawned processes; return their exit codes."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=(*args, w)) for w in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    return [process.exitcode for process in processes]


def run_threads(target: Callable[[int], None], *, workers: int) -> None:
    """Run ``target(worker)`` in ``workers`` threads at once and wait for all of them."""
    threads = [threading.Thread(target=target, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def say(content: Any, role: str = "user", **fields: Any) -> Message:
    """A message at ``T0`` unless a timestamp is given."""
    fields.setdefault("timestamp", T0)
    return Message(role=role, content=content, **fields)


class ContractBase:
    """Fixtures of the suite. Subclasses implement :meth:`make_backend`."""

    def make_backend(self, directory: Path) -> Backend:
        """Open the backend under test on ``directory``.

        Opening twice with the same directory must reach the same data for persistent
        backends; backends that keep no files may ignore the directory (a database backend can
        derive a schema or database name from it). For multi-process tests the method is
        called in child processes, so the subclass must be importable at module level.
        """
        raise NotImplementedError

    @pytest.fixture
    def data_dir(self, tmp_path: Path) -> Path:
        """A fresh directory for this test's data."""
        return tmp_path / "data"

    @pytest.fixture
    def backend(self, data_dir: Path) -> Iterator[Backend]:
        """The backend under test, closed afterwards."""
        backend = self.make_backend(data_dir)
        yield backend
        backend.close()

    @pytest.fixture
    def searchable(self, backend: Backend) -> SearchableBackend:
        """The backend under test, if it can search (else the test is skipped)."""
        if not isinstance(backend, SearchableBackend):
            pytest.skip("the backend does not implement SupportsSearch")
        return backend

    @pytest.fixture
    def reopen(self, backend: Backend, data_dir: Path) -> Iterator[Callable[[], Backend]]:
        """Close the backend and open it again on the same data (persistent backends only)."""
        if not backend.capabilities().persistent:
            pytest.skip("the backend is not persistent")
        opened: list[Backend] = []

        def reopen() -> Backend:
            backend.close()
            for earlier in opened:
                earlier.close()
            fresh = self.make_backend(data_dir)
            opened.append(fresh)
            return fresh

        yield reopen
        for fresh in opened:
            fresh.close()

    @pytest.fixture
    def multiprocess(self, backend: Backend) -> Backend:
        """The backend under test, if several processes may share its data."""
        if not backend.capabilities().multiprocess:
            pytest.skip("the backend is single-process")
        return backend


def private_mode_problems(directory: Path) -> list[str]:
    """Files or directories under ``directory`` that other users could read."""
    problems = []
    for path in [directory, *directory.rglob("*")]:
        if not path.exists() or path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            problems.append(f"{path} has mode {mode:o}")
    return problems


def evolve(model: Any, **changes: Any) -> Any:
    """``attrs.evolve``, re-exported for the mixins."""
    return attrs.evolve(model, **changes)
