"""Retention in a loop while other processes talk, reset and resume: no chat loses anything.

One spawned process runs ``maintain`` with ``max_age=0`` (every ended session nobody points
at goes) over and over; three others run seeded turns, ``/new`` and ``/resume`` of sessions
they saw on three shared keys, so resumes land on sessions a pass has just chosen. Refusals
that are the user's lot are allowed (resuming a session retention already deleted; a turn
whose session another process reset and retention deleted in between, while the key moved
on). Afterwards: every key points at a session that exists, and every turn acknowledged into
a session that still exists, or that a key points at, is in it.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import traceback
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from reliability_support import KEYS, KINDS, open_store, source

from hermes_sessions import Message, RetentionPolicy, SessionNotFoundError

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions import SessionStore

WORKERS = 3
OPERATIONS = 80
"""Operations per worker in CI; ``--stress`` x 20."""


def turn(store: SessionStore, worker: int, n: int, key_number: int, log: dict) -> None:
    """A turn on the key's session; logged with that session once acknowledged."""
    key = store.key_for(source(key_number))
    lookup = store.get_or_create(source(key_number))
    tag = f"t{worker}x{n}"
    try:
        store.append(
            lookup.session_id,
            Message(role="user", content=f"q {tag}", platform_message_id=tag),
            Message(role="assistant", content=f"a {tag}"),
        )
    except SessionNotFoundError:
        # allowed only if the key moved on (a /new elsewhere, then retention took the session)
        assert store.entry(key).session_id != lookup.session_id, f"{key} points at a ghost"
        log["refused"] += 1
        return
    log["acknowledged"].append([lookup.session_id, tag])
    log["seen"].setdefault(key, []).append(lookup.session_id)


def rotate(store: SessionStore, key_number: int, chance: random.Random, log: dict) -> None:
    """``/new``, or ``/resume`` of a session the worker saw under the key (maybe gone by now)."""
    key = store.key_for(source(key_number))
    seen = log["seen"].get(key)
    if chance.random() < 0.4 or not seen:
        store.reset(key, source=source(key_number))
        return
    try:
        store.resume(key, chance.choice(seen[-6:]))
    except SessionNotFoundError:
        log["refused"] += 1


def talk(kind: str, home: Path, operations: int, worker: int) -> None:
    """One worker process: seeded turns and rotations, its log written at the end."""
    chance = random.Random(f"{kind}-retention-{worker}")  # noqa: S311  # test data
    log: dict = {"acknowledged": [], "seen": {}, "refused": 0, "error": None}
    try:
        with open_store(kind, home) as store:
            for n in range(operations):
                key_number = chance.randrange(KEYS)
                if chance.random() < 0.55:
                    turn(store, worker, n, key_number, log)
                else:
                    rotate(store, key_number, chance, log)
    except BaseException:  # noqa: BLE001  # reported to the parent, which fails the test
        log["error"] = traceback.format_exc()
    (home / f"worker-{worker}.json").write_text(json.dumps(log), encoding="utf-8")


def maintain(kind: str, home: Path) -> None:
    """The retention process: passes back to back until the workers are done."""
    log: dict = {"passes": 0, "removed": 0, "spared": 0, "error": None}
    policy = RetentionPolicy(max_age=timedelta(0))
    try:
        with open_store(kind, home) as store:
            while not (home / "done").exists():
                report = store.maintain(policy)
                log["passes"] += 1
                log["removed"] += len(report.removed)
                log["spared"] += len(report.spared)
    except BaseException:  # noqa: BLE001  # reported to the parent, which fails the test
        log["error"] = traceback.format_exc()
    (home / "maintainer.json").write_text(json.dumps(log), encoding="utf-8")


@pytest.mark.parametrize("kind", KINDS)
def test_retention_racing_resumes_loses_no_acknowledged_turn(kind, tmp_path, scale):
    """3 processes x 80 turns, resets and resumes beside a retention loop: nothing lost."""
    with open_store(kind, tmp_path):
        pass  # create the store once, before the processes race to
    context = multiprocessing.get_context("spawn")
    maintainer = context.Process(target=maintain, args=(kind, tmp_path))
    maintainer.start()
    workers = [
        context.Process(target=talk, args=(kind, tmp_path, OPERATIONS * scale, w))
        for w in range(WORKERS)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    (tmp_path / "done").touch()
    maintainer.join()
    assert [p.exitcode for p in [*workers, maintainer]] == [0] * (WORKERS + 1)
    logs = [json.loads((tmp_path / f"worker-{w}.json").read_text("utf-8")) for w in range(WORKERS)]
    passes = json.loads((tmp_path / "maintainer.json").read_text("utf-8"))
    errors = [log["error"] for log in [*logs, passes] if log["error"]]
    assert not errors, errors[0]
    assert passes["removed"] > 0, "retention never removed anything: the race was not run"
    with open_store(kind, tmp_path) as store:
        pointed = set()
        for n in range(KEYS):
            entry = store.entry(store.key_for(source(n)))
            store.session(entry.session_id)  # every key on a session that exists
            pointed.add(entry.session_id)
        existing = {
            item.record.id
            for item in store.list_sessions(limit=None, include_compressed=True).items
        }
        assert pointed <= existing
        stored: dict[str, set[str]] = {}
        for session_id in existing:
            stored[session_id] = {
                str(m.content).removeprefix("q ")
                for m in store.transcript(session_id)
                if m.role == "user"
            }
        lost = [
            (session_id, tag)
            for log in logs
            for session_id, tag in log["acknowledged"]
            if session_id in existing and tag not in stored[session_id]
        ]
        assert not lost, f"acknowledged turns lost: {lost}"
