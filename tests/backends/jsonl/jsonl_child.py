"""A child process for the JSONL process tests (run as a script, never imported by pytest).

``crash DIRECTORY SEED ROUND``: forever, append turns to the keys' sessions and rotate keys to new
sessions, printing one line per *acknowledged* operation (after the call returned, before the
next one starts) until the parent kills it:

* ``A <session_id> <tag>`` — appended ``<tag>-u`` and ``<tag>-a`` (one batch) to the session,
  setting ``last`` to ``<tag>`` in the session's state in the same write;
* ``R <key> <session_id> <tag>`` — rotated the key to the new session (first message ``<tag>-s``).

``concurrent DIRECTORY WORKER COUNT``: print ``ready``, wait for a line on stdin, then ``COUNT``
times record activity on the shared key and the worker's own key and append one message to the
shared session and one to the worker's own session (redelivering an earlier one now and then).
"""

from __future__ import annotations

import os
import random
import sys
from datetime import UTC, datetime, timedelta

from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.models import Message, SessionEntry, SessionRecord
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.state import StateScope

CRASH_KEYS = [f"agent:main:cli:dm:{n}" for n in range(3)]
SHARED_KEY = "agent:main:cli:group:shared"
START = datetime(2026, 6, 1, tzinfo=UTC)


def report(line: str) -> None:
    """One whole line in one write, so the parent never reads half of it."""
    os.write(1, (line + "\n").encode())


def rotate(
    backend: JSONLBackend, key: str, entry: SessionEntry | None, tag: str, at: datetime
) -> str:
    """Move ``key`` to a new session (its first one if ``entry`` is None); return the new id."""
    new = "r" + tag.replace("-", "n")
    record = SessionRecord(id=new, source="cli", started_at=at, session_key=key)
    write = EntryWrite(
        entry=SessionEntry(session_key=key, session_id=new, created_at=at, updated_at=at),
        expected_revision=None if entry is None else entry.revision,
    )
    first = Message(role="system", content=f"start {tag}", platform_message_id=f"{tag}-s")
    backend.apply(
        RotationPlan(
            at=at,
            create=record,
            messages=[first],
            entries=[write],
            end=[] if entry is None else [(entry.session_id, "idle")],
        )
    )
    return new


def crash(directory: str, seed: int, round_: int) -> None:
    """Append and rotate until killed, acknowledging every operation that returned."""
    rng = random.Random(seed)  # noqa: S311  # test data, not secrets
    at = START + timedelta(hours=round_)
    with JSONLBackend(directory) as backend:
        for n in range(1, 1_000_000):
            key = rng.choice(CRASH_KEYS)
            entry = backend.get_entry(key)
            tag = f"{round_}-{n}"
            if entry is None or rng.random() < 0.3:
                new = rotate(backend, key, entry, tag, at)
                report(f"R {key} {new} {tag}")
            else:
                turn = [
                    Message(role="user", content=f"q {tag}", platform_message_id=f"{tag}-u"),
                    Message(role="assistant", content=f"a {tag}", platform_message_id=f"{tag}-a"),
                ]
                scope = StateScope.session(entry.session_id).id  # state with the turn, or neither
                backend.append_messages(
                    entry.session_id, turn, touch_at=at, state={scope: {"last": tag}}
                )
                report(f"A {entry.session_id} {tag}")


def concurrent(directory: str, worker: int, count: int) -> None:
    """One of the eight workers: activity and appends, shared and own, with redeliveries."""
    with JSONLBackend(directory) as backend:
        report("ready")
        sys.stdin.readline()
        for n in range(count):
            at = START + timedelta(minutes=worker * 1000 + n)
            backend.record_activity(SHARED_KEY, at)
            backend.record_activity(f"agent:main:cli:dm:w{worker}", at, last_prompt_tokens=n)
            shared = Message(
                role="user", content=f"{worker}:{n}", platform_message_id=f"{worker}:{n}"
            )
            backend.append_messages("shared", [shared], touch_at=at)
            own = Message(role="user", content=f"own {n}", platform_message_id=f"own{n}")
            backend.append_messages(f"own{worker}", [own])
            if n % 5 == 4:  # webhook redelivery of an earlier message
                again = Message(
                    role="user", content="again", platform_message_id=f"{worker}:{n - 2}"
                )
                backend.append_messages("shared", [again])
        report("done")


if __name__ == "__main__":
    mode, directory, first, second = sys.argv[1:5]
    if mode == "crash":
        crash(directory, int(first), int(second))
    else:
        concurrent(directory, int(first), int(second))
