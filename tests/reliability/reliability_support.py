"""What the reliability suite shares: the backends it covers, the workload, the invariants.

Every persistent backend is covered: SQLite, JSONL and PostgreSQL (on the server of
``HERMES_SESSIONS_TEST_PG_DSN``; CI sets it). ``--stress`` multiplies every count by
:data:`STRESS_FACTOR`.
"""

from __future__ import annotations

import collections
import functools
import os
import random
import signal
import time
from typing import TYPE_CHECKING, Final

import pytest

from hermes_sessions import (
    Message,
    ResetPolicies,
    ResetPolicy,
    SessionSource,
    SessionStore,
    crashpoints,
)
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend
from pg_support import SKIP_REASON, open_pg, test_dsn

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from hermes_sessions.protocols import Backend

STRESS_FACTOR: Final = 20
KEYS: Final = 3
TURNS: Final = 40
"""Turns a crash worker runs at most (it is killed before the end)."""
KINDS: Final = (
    "sqlite",
    "jsonl",
    pytest.param("postgres", marks=pytest.mark.skipif(test_dsn() is None, reason=SKIP_REASON)),
)
"""The persistent backends, as a ``parametrize`` list."""


def open_backend(kind: str, home: Path) -> Backend:
    """The backend ``kind`` on the data of ``home`` (PostgreSQL: the schema standing for it)."""
    if kind == "sqlite":
        return SQLiteBackend(home / "state.db")
    if kind == "jsonl":
        return JSONLBackend(home / "sessions")
    return open_pg(home)


def open_store(kind: str, home: Path) -> SessionStore:
    """A store that never resets by itself: every rotation in a run is one the run asked for."""
    never = ResetPolicies(ResetPolicy(mode="none"))
    return SessionStore(open_backend(kind, home), resets=never)


def source(number: int) -> SessionSource:
    """The conversation ``number`` (modulo :data:`KEYS`: workers share the keys)."""
    chat = str(number % KEYS)
    return SessionSource(platform="telegram", chat_id=chat, user_id=chat)


def turn(store: SessionStore, number: int, tag: str) -> None:
    """One turn: find the key's session, store the question and its answer in one append."""
    lookup = store.get_or_create(source(number))
    store.append(
        lookup.session_id,
        Message(role="user", content=f"q {tag}", platform_message_id=tag),
        Message(role="assistant", content=f"a {tag}"),
    )


def check_store(
    store: SessionStore, acknowledged: set[str], *, copies: bool = False
) -> collections.Counter[str]:
    """Check the invariants of a store after a run; return how often each tag's turn is stored.

    - every key points at a session that exists and is live (not ended), and no live session
      is left without a key pointing at it (one live session per key);
    - each session's counter equals its transcript;
    - every question has its answer right after it (no turn is half-stored);
    - every acknowledged turn is stored, and no transcript holds a turn twice; without
      ``copies`` (no branch ran, which copies a transcript) no turn is stored twice at all.
    """
    sessions = store.list_sessions(limit=None, include_compressed=True).items
    live = [item.record for item in sessions if not item.record.is_ended]
    keys = {store.key_for(source(n)) for n in range(KEYS)}
    pointed = set()
    for key in keys:
        try:
            entry = store.entry(key)
        except LookupError:
            continue
        record = store.session(entry.session_id)
        assert not record.is_ended, f"{key} points at the ended session {record.id}"
        pointed.add(record.id)
    assert {record.id for record in live} <= pointed, "a live session no key points at"
    stored: collections.Counter[str] = collections.Counter()
    for item in sessions:
        transcript = store.transcript(item.record.id)
        assert item.record.message_count == len(transcript), item.record.id
        questions = [m.content for m in transcript if m.role == "user"]
        assert len(questions) == len(set(questions)), f"a turn twice in {item.record.id}"
        for index, message in enumerate(transcript):
            if message.role != "user":
                continue
            tag = str(message.content).removeprefix("q ")
            stored[tag] += 1
            answer = transcript[index + 1] if index + 1 < len(transcript) else None
            assert answer is not None, f"the turn {tag} is half-stored"
            assert answer.content == f"a {tag}", f"the turn {tag} is half-stored"
    if not copies:
        assert not [tag for tag, n in stored.items() if n > 1], "a turn stored twice"
    missing = acknowledged - set(stored)
    assert not missing, f"acknowledged turns lost: {sorted(missing)}"
    return stored


def work(kind: str, home: Path, round_: int, ack: int) -> None:
    """The forked worker: turns (and a reset every fifth turn), each acknowledged on ``ack``."""
    with open_store(kind, home) as store:
        for n in range(TURNS):
            tag = f"{round_}:{n}"
            if n % 5 == 4:
                store.reset(store.key_for(source(n)), source=source(n))
            turn(store, n, tag)
            os.write(ack, f"{tag}\n".encode())


def run_round(
    kind: str, home: Path, round_: int, *, point: str | None, kill_after: float
) -> set[str]:
    """Fork a worker, let it die (at ``point``, or by our SIGKILL); return what it acknowledged."""
    return set(
        fork_and_kill(
            lambda ack: work(kind, home, round_, ack),
            point=point,
            arm_after=1 + (round_ * 7) % 23,
            kill_after=kill_after,
        )
    )


def fork_and_kill(
    worker: Callable[[int], None], *, point: str | None, arm_after: int, kill_after: float
) -> list[str]:
    """Fork ``worker(ack)`` and let it die; return the lines it wrote to ``ack``.

    With ``point`` the worker kills itself the ``arm_after``-th time it reaches that crash
    point; without, we SIGKILL it after ``kill_after`` seconds (unless it finished first).
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into pytest
        os.close(read_end)
        code = 3
        try:
            if point is not None:
                crashpoints.arm(point, after=arm_after)
            worker(write_end)
            code = 4  # ran to the end: the point was never reached often enough
        finally:
            os._exit(code)
    os.close(write_end)
    if point is None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
    with os.fdopen(read_end, "rb") as pipe:
        lines = [line.decode() for line in pipe.read().splitlines()]
    _, status = os.waitpid(pid, 0)
    if point is not None or os.WIFSIGNALED(status):
        assert os.WIFSIGNALED(status), f"the worker exited with {os.waitstatus_to_exitcode(status)}"
        assert os.WTERMSIG(status) == signal.SIGKILL
    return lines


BATCH_KILLS = {"sqlite.before_commit": 7, "sqlite.after_commit": 7, None: 6}
"""Kills per crash point of the batched-commit tests (``None``: at a random moment); 20 in all."""


def kill_batched_writers(
    home: Path, work: Callable[[Path, int, int], None], *, seed: str, scale: int
) -> tuple[set[str], int]:
    """Kill ``work(home, round, ack)`` 20 times ``scale``, checking the store after each kill.

    The worker writes each acknowledged turn's tag to ``ack`` and ``batch N`` for every batch of
    N writes it commits. Returns every acknowledged tag and the largest batch seen.
    """
    chance = random.Random(seed)  # noqa: S311  # test data, not secrets
    acknowledged: set[str] = set()
    largest = 0
    round_ = 0
    for point, kills in BATCH_KILLS.items():
        for _ in range(kills * scale):
            lines = fork_and_kill(
                functools.partial(work, home, round_),
                point=point,
                arm_after=2 + (round_ * 5) % 17,
                kill_after=chance.uniform(0.05, 0.4),
            )
            sizes = [int(line.split()[1]) for line in lines if line.startswith("batch ")]
            acknowledged |= {line for line in lines if not line.startswith("batch ")}
            largest = max(largest, *sizes, 0)
            round_ += 1
            with open_store("sqlite", home) as store:
                check_store(store, acknowledged)
    return acknowledged, largest
