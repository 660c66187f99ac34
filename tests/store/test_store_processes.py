"""Eight real processes running turns on overlapping keys: one session per key, nothing lost."""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING

import pytest

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.backends import open_backend

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
