"""Eight real processes running turns on overlapping keys: one session per key, nothing lost."""

from __future__ import annotations

import multiprocessing
import threading
from typing import TYPE_CHECKING

import pytest

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.backends import open_backend
from hermes_sessions.exceptions import TitleConflictError

if TYPE_CHECKING:
    from pathlib import Path

WORKERS = 8
TURNS = 200
KEYS = 12


def source(number: int) -> SessionSource:
    """The conversation a turn belongs to (keys overlap between workers)."""
    return SessionSource(
        platform="telegram", chat_id=str(number % KEYS), user_id=str(number % KEYS)
    )


def run_turns(kind: str, home: Path, worker: int) -> None:
    """One worker: TURNS turns of get_or_create and an append of a question and its reply."""
    never = ResetPolicies(ResetPolicy(mode="none"))
    with SessionStore(open_backend(kind, home), resets=never) as store:
        for n in range(TURNS):
            lookup = store.get_or_create(source(worker + n))
            tag = f"{worker}:{n}"
            store.append(
                lookup.session_id,
                Message(role="user", content=f"q {tag}", platform_message_id=tag),
                Message(role="assistant", content=f"a {tag}"),
            )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_processes_share_one_session_per_key(kind, tmp_path):
    """Concurrent turns from 8 processes: exactly one session per key, every message once."""
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=run_turns, args=(kind, tmp_path, worker))
        for worker in range(WORKERS)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    assert [process.exitcode for process in workers] == [0] * WORKERS
    with SessionStore(open_backend(kind, tmp_path)) as store:
        sessions = store.list_sessions(limit=None).items
        keys = [item.record.session_key for item in sessions]
        assert sorted(keys) == sorted({store.key_for(source(n)) for n in range(KEYS)})
        questions = [
            message.content
            for item in sessions
            for message in store.transcript(item.record.id)
            if message.role == "user"
        ]
        expected = [f"q {w}:{n}" for w in range(WORKERS) for n in range(TURNS)]
        assert sorted(questions) == sorted(expected)
        assert sum(item.record.message_count for item in sessions) == 2 * WORKERS * TURNS


def title_one_session(kind: str, home: Path, session_id: str, worker: int) -> None:
    """One worker: give ``session_id`` the title every worker wants; exit 3 if refused."""
    del worker
    with SessionStore(open_backend(kind, home)) as store:
        try:
            store.set_title(session_id, "Plans")
        except TitleConflictError:
            raise SystemExit(3) from None


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_processes_racing_set_title_one_wins(kind, tmp_path):
    """Eight processes titling eight sessions of one user alike: exactly one title is stored."""
    with SessionStore(open_backend(kind, tmp_path)) as store:
        ids = [
            store.get_or_create(
                SessionSource(platform="telegram", chat_id=str(n), user_id="u")
            ).session_id
            for n in range(WORKERS)
        ]
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=title_one_session, args=(kind, tmp_path, ids[n], n))
        for n in range(WORKERS)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    codes = [process.exitcode for process in workers]
    assert (codes.count(0), codes.count(3)) == (1, WORKERS - 1)
    with SessionStore(open_backend(kind, tmp_path)) as store:
        assert [store.session(i).title for i in ids].count("Plans") == 1


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "memory"])
def test_threads_racing_set_title_one_wins(kind, tmp_path):
    """Eight threads titling eight sessions of one user alike: exactly one wins."""
    with SessionStore(open_backend(kind, tmp_path)) as store:
        ids = [
            store.get_or_create(
                SessionSource(platform="telegram", chat_id=str(n), user_id="u")
            ).session_id
            for n in range(WORKERS)
        ]
        barrier = threading.Barrier(WORKERS)
        refused: list[str] = []

        def work(session_id: str) -> None:
            barrier.wait()
            try:
                store.set_title(session_id, "Plans")
            except TitleConflictError:
                refused.append(session_id)

        threads = [threading.Thread(target=work, args=(i,)) for i in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(refused) == WORKERS - 1
        assert [store.session(i).title for i in ids].count("Plans") == 1
