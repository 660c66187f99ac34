"""The turn ledger across SIGKILL (issue 40): nothing accepted is lost, nothing answered twice.

A forked gateway worker runs the loop of ``docs/ledger.md`` over a stream of deliveries and is
killed at one step of one turn — after accepting, during the model call, after the reply is
stored, after the send, after the mark, and inside the backend's commits — by a real
``SIGKILL``. A fake platform keeps what it delivered, what the gateway acknowledged, and every
message sent (with its idempotency key) in files, as a platform would. Then the restart: a new
process (this one) recovers what the ledger lists, the platform redelivers what was never
acknowledged, and every delivered message is answered exactly once — one reply stored, one
message sent — with nothing left pending or unknown. Two workers given the same deliveries at
once answer each message once too.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from datetime import timedelta
from typing import TYPE_CHECKING, Final

import pytest
from reliability_support import KINDS, open_backend

from hermes_sessions import (
    Message,
    ResetPolicies,
    ResetPolicy,
    SessionSource,
    SessionStore,
    crashpoints,
)
from hermes_sessions.clock import SystemClock
from hermes_sessions.testing import FrozenClock

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

MESSAGES: Final = 6
"""Deliveries per run; the worker is killed during the fourth turn."""
DOOMED: Final = 3
STEPS: Final = ("after_accept", "during_model", "after_answer", "after_send", "after_mark")
"""The gateway's steps a worker is killed at (by itself, with SIGKILL)."""
COMMITS: Final = {
    "sqlite": ("sqlite.before_commit", "sqlite.after_commit"),
    "jsonl": ("jsonl.after_journal", "jsonl.after_files"),
    "postgres": ("postgres.before_commit", "postgres.after_commit"),
}
"""The backend's own crash points (inside ``accept``'s and ``answer``'s commits)."""
TTL: Final = timedelta(seconds=30)
NEVER: Final = ResetPolicies(ResetPolicy(mode="none"))


def _source(number: int) -> SessionSource:
    chat = str(number % 2)
    return SessionSource(platform="telegram", chat_id=chat, user_id=chat)


def _delivery(number: int) -> tuple[SessionSource, Message]:
    return _source(number), Message(
        role="user", content=f"q {number}", platform_message_id=f"m{number}"
    )


class Platform:
    """The fake platform: an append-only file of sends, and of acknowledged deliveries."""

    def __init__(self, home: Path) -> None:
        self.sent_path = home / "platform-sent.jsonl"
        self.acked_path = home / "platform-acked.txt"

    def _append(self, path: Path, line: str) -> None:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, (line + "\n").encode())
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def send(self, idempotency_key: str, text: str) -> str:
        """Deliver a reply; return the platform's message id."""
        self._append(self.sent_path, json.dumps({"key": idempotency_key, "text": text}))
        return f"p-{idempotency_key[-8:]}"

    def acknowledge(self, platform_message_id: str) -> None:
        """The gateway answered the webhook: no redelivery."""
        self._append(self.acked_path, platform_message_id)

    def sent(self) -> list[dict[str, str]]:
        """Every send, in order."""
        if not self.sent_path.exists():
            return []
        return [json.loads(line) for line in self.sent_path.read_text().splitlines()]

    def was_sent(self, idempotency_key: str) -> bool:
        """Whether a reply with this key reached the platform (reconciliation asks this)."""
        return any(item["key"] == idempotency_key for item in self.sent())

    def acknowledged(self) -> set[str]:
        """The deliveries the gateway acknowledged."""
        if not self.acked_path.exists():
            return set()
        return set(self.acked_path.read_text().split())


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _fork_until_killed(
    worker: Callable[[int], None], *, point: str | None = None, arrival: int = 1
) -> list[str] | None:
    """Fork ``worker(ack)``, which must die by SIGKILL (its own step, or the armed ``point``).

    Returns the lines it wrote to ``ack`` before it died; ``None`` if it ran to the end because
    ``point`` was reached fewer than ``arrival`` times.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into pytest
        os.close(read_end)
        code = 3
        try:
            if point is not None:
                crashpoints.arm(point, after=arrival)
            worker(write_end)
            code = 4  # ran to the end: it was never killed
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        lines = [line.decode() for line in pipe.read().splitlines()]
    _, status = os.waitpid(pid, 0)
    if point is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 4:
        return None
    assert os.WIFSIGNALED(status), f"the worker exited with {os.waitstatus_to_exitcode(status)}"
    assert os.WTERMSIG(status) == signal.SIGKILL
    return lines


def _handle(
    store: SessionStore,
    platform: Platform,
    number: int,
    holder: str,
    die_at: str | None = None,
) -> None:
    """The gateway loop of ``docs/ledger.md`` for one delivery, killed at ``die_at``."""
    source, message = _delivery(number)
    accepted = store.ledger.accept(source, message, holder=holder, ttl=TTL)
    if die_at == "after_accept":
        _kill_self()
    platform.acknowledge(f"m{number}")
    if accepted.duplicate:
        return
    assert accepted.inbound is not None
    _answer(store, platform, accepted.inbound.session_key, number, holder, die_at)


def _answer(
    store: SessionStore,
    platform: Platform,
    key: str,
    number: int,
    holder: str,
    die_at: str | None = None,
) -> None:
    if die_at == "during_model":
        _kill_self()
    reply = Message(role="assistant", content=f"a {number}")
    answer = store.ledger.answer(key, f"m{number}", reply, holder=holder, ttl=TTL)
    if die_at == "after_answer":
        _kill_self()
    for intent in answer.intents:
        sent = platform.send(intent.idempotency_key, f"a {number}")
        if die_at == "after_send":
            _kill_self()
        store.ledger.mark_sent(intent.idempotency_key, sent)
        if die_at == "after_mark":
            _kill_self()


def _gateway(kind: str, home: Path, step: str | None, ack: int) -> None:
    """The forked worker: handles every delivery, dying at ``step`` of turn :data:`DOOMED`."""
    with SessionStore(open_backend(kind, home), resets=NEVER, ledger=True) as store:
        platform = Platform(home)
        for number in range(MESSAGES):
            _handle(store, platform, number, "worker", step if number == DOOMED else None)
            os.write(ack, f"m{number}\n".encode())


def _recover(kind: str, home: Path) -> dict[str, int]:
    """The restart: finish what the ledger lists, then take the platform's redeliveries.

    Returns how many entries each listing had before recovery.
    """
    later = FrozenClock(SystemClock().now() + timedelta(hours=1))  # every old lease ran out
    with SessionStore(open_backend(kind, home), resets=NEVER, clock=later, ledger=True) as store:
        platform = Platform(home)
        listed = {"pending": len(store.ledger.pending()), "unknown": len(store.ledger.unknown())}
        for inbound in store.ledger.pending():
            claimed = store.ledger.claim(
                inbound.session_key, inbound.platform_message_id, holder="restarted"
            )
            assert claimed is not None
            number = int(inbound.platform_message_id.removeprefix("m"))
            _answer(store, platform, claimed.session_key, number, "restarted")
        for intent in store.ledger.unknown():
            if platform.was_sent(intent.idempotency_key):
                store.ledger.mark_sent(intent.idempotency_key)
                continue
            again = store.ledger.retry(intent.idempotency_key, holder="restarted")
            assert again is not None
            text = str(store.ledger.reply(again).content)
            store.ledger.mark_sent(
                again.idempotency_key, platform.send(again.idempotency_key, text)
            )
        acknowledged = platform.acknowledged()
        for number in range(MESSAGES):  # the platform redelivers what was not acknowledged
            if f"m{number}" not in acknowledged:
                _handle(store, platform, number, "restarted")
        for number in range(MESSAGES):  # and, being a platform, some of the rest again
            _handle(store, platform, number, "restarted")
    return listed


def _check(kind: str, home: Path) -> None:
    """Every delivery answered once: one question and one reply stored, one message sent."""
    with SessionStore(open_backend(kind, home), resets=NEVER, ledger=True) as store:
        assert store.ledger.pending() == []
        assert store.ledger.unknown() == []
        stored: dict[str, int] = {}
        for item in store.list_sessions(limit=None).items:
            for message in store.transcript(item.record.id):
                stored[str(message.content)] = stored.get(str(message.content), 0) + 1
        expected = {f"{role} {n}": 1 for n in range(MESSAGES) for role in ("q", "a")}
        assert stored == expected
        for number in range(MESSAGES):
            key = store.key_for(_source(number))
            inbound = store.ledger.get(key, f"m{number}")
            assert inbound is not None
            assert inbound.status == "answered"
        sends = Platform(home).sent()
        texts = sorted(item["text"] for item in sends)
        assert texts == sorted(f"a {n}" for n in range(MESSAGES)), "a reply sent twice or never"
        assert len({item["key"] for item in sends}) == MESSAGES
        intents = store.ledger.intents()
        assert len(intents) == MESSAGES
        assert {i.status for i in intents} == {"sent"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("step", STEPS)
def test_a_gateway_killed_at_each_step_loses_and_repeats_nothing(
    kind: str, step: str, tmp_path: Path
) -> None:
    """Killed after accept, in the model call, after the answer, after the send, after the mark."""
    home = tmp_path / "home"
    home.mkdir()
    acknowledged = _fork_until_killed(lambda ack: _gateway(kind, home, step, ack))
    assert acknowledged is not None
    assert acknowledged == [f"m{n}" for n in range(DOOMED)]
    listed = _recover(kind, home)
    if step in {"after_accept", "during_model"}:  # accepted, never answered
        assert listed == {"pending": 1, "unknown": 0}
    elif step in {"after_answer", "after_send"}:  # answered, the send unmarked
        assert listed == {"pending": 0, "unknown": 1}
    else:
        assert listed == {"pending": 0, "unknown": 0}
    _check(kind, home)


def _kind_points() -> list[object]:
    params = []
    for kind in KINDS:
        name = kind if isinstance(kind, str) else kind.values[0]
        marks = () if isinstance(kind, str) else kind.marks
        params.extend(pytest.param(name, point, marks=marks) for point in COMMITS[str(name)])
    return params


ARRIVALS: Final = range(1, 3 * MESSAGES + 2, 3)
"""The arrivals at a commit point killed at, one run each: a run commits 20 times (per turn an
accept, an answer and a mark; a session for each of the two chats), and every third is taken.
JSONL reaches ``after_files`` only for writes with lines (accepts and answers), so fewer."""


@pytest.mark.parametrize(("kind", "point"), _kind_points())
def test_a_gateway_killed_inside_a_commit_loses_and_repeats_nothing(
    kind: str, point: str, tmp_path: Path
) -> None:
    """Killed inside the backend's commits (before and after), at commits across the run."""
    kills = 0
    for arrival in ARRIVALS:
        home = tmp_path / f"home-{arrival}"
        home.mkdir()
        died = _fork_until_killed(
            lambda ack, home=home: _gateway(kind, home, None, ack), point=point, arrival=arrival
        )
        kills += died is not None
        _recover(kind, home)
        _check(kind, home)
    assert kills >= 4, f"{point} was reached too rarely to kill the run there"


def _concurrent_gateway(kind: str, home: Path, name: str) -> None:
    """A worker handling every delivery (another does the same at the same time)."""
    with SessionStore(open_backend(kind, home), resets=NEVER, ledger=True) as store:
        platform = Platform(home)
        for number in range(MESSAGES):
            _handle(store, platform, number, name)


@pytest.mark.parametrize("kind", KINDS)
def test_two_workers_given_the_same_deliveries_answer_each_once(kind: str, tmp_path: Path) -> None:
    """The same stream delivered to two worker processes at once: one answer per message."""
    home = tmp_path / "home"
    home.mkdir()
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_concurrent_gateway, args=(kind, home, f"w{n}")) for n in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert [worker.exitcode for worker in workers] == [0, 0]
    _check(kind, home)
