"""Processes doing every kind of operation on shared keys: the store's invariants hold after.

Four spawned processes each run a seeded mix of turns (with a lane-state delta, and now and
then a redelivery of the turn before), ``/new``, ``/resume``, ``/branch``, titles, compressions
and searches on three shared keys. Refusals an operation documents are allowed (a title taken
by another session, a compression lease held elsewhere, compressing a session another process
ended meanwhile); any other error — a lock timeout above all — fails the run. Afterwards:
every acknowledged turn is stored, no transcript holds one twice, no turn is half-stored, each
key has one live session, counters match transcripts, titles are unique per owner, a
redelivery never stored anything, and each key's lane state holds each worker's last write.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import random
import traceback
from typing import TYPE_CHECKING

import pytest
from reliability_support import KEYS, KINDS, check_store, open_store, source

from hermes_sessions import Message, StateScope
from hermes_sessions.exceptions import ConflictError, LeaseHeldError, TitleConflictError

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions import SessionStore

WORKERS = 4
OPERATIONS = 60
"""Operations per worker in CI; ``--stress`` × 20."""


def question(tag: str) -> Message:
    """The question of the turn ``tag`` (its platform id is the tag)."""
    return Message(role="user", content=f"q {tag}", platform_message_id=tag)


def one_turn(store: SessionStore, worker: int, n: int, log: dict) -> None:
    """A turn with a lane-state delta; logged once acknowledged."""
    key_number = n % KEYS
    key = store.key_for(source(key_number))
    lookup = store.get_or_create(source(key_number))
    tag = f"t{worker}x{n}"
    result = store.append(
        lookup.session_id,
        question(tag),
        Message(role="assistant", content=f"a {tag}"),
        state_delta={StateScope.lane(key): {f"w{worker}": n}},
    )
    assert not result.duplicate, f"a new turn {tag} was taken for a redelivery"
    log["acknowledged"].append(tag)
    log["lane"][str(key_number)] = n
    log["seen"].setdefault(key, []).append(lookup.session_id)


def redeliver(store: SessionStore, log: dict) -> None:
    """Deliver the last acknowledged turn again: stored nothing unless the key moved on."""
    if not log["acknowledged"]:
        return
    tag = log["acknowledged"][-1]
    key_number = int(tag.partition("x")[2]) % KEYS
    lookup = store.get_or_create(source(key_number))
    answer = Message(role="assistant", content=f"a {tag}")
    again = store.append(lookup.session_id, question(tag), answer)
    if lookup.session_id in log["seen"][store.key_for(source(key_number))][-1:]:
        assert again.duplicate, f"the redelivery of {tag} was stored again"
    elif not again.duplicate:  # the key moved to another session: a new turn there, legitimately
        log["redelivered_elsewhere"].append(tag)


def rotate(store: SessionStore, key_number: int, chance: random.Random, log: dict) -> None:
    """``/new``, ``/resume`` of a session the worker saw under the key, or ``/branch``."""
    key = store.key_for(source(key_number))
    roll = chance.randrange(3)
    if roll == 0:
        store.reset(key, source=source(key_number))
    elif roll == 1 and log["seen"].get(key):
        store.resume(key, chance.choice(log["seen"][key]))
    else:
        store.branch(key, source=source(key_number))


def retitle(store: SessionStore, key_number: int, chance: random.Random, log: dict) -> None:
    """Title the key's session with one of four titles (taken ones are refused)."""
    lookup = store.get_or_create(source(key_number))
    try:
        store.set_title(lookup.session_id, f"topic {chance.randrange(4)}")
    except TitleConflictError:
        log["refused"]["title"] += 1


def compress(store: SessionStore, key_number: int, worker: int, log: dict) -> None:
    """Compress the key's session (refused while another holds the lease, or once it ended)."""
    lookup = store.get_or_create(source(key_number))
    summary = Message(role="assistant", content=f"summary by {worker}")
    try:
        store.compress(lookup.session_id, [summary], holder=f"worker-{worker}")
    except (LeaseHeldError, ConflictError):
        log["refused"]["compress"] += 1


def search(store: SessionStore, chance: random.Random, log: dict) -> None:
    """Search an acknowledged turn: found, and every hit is that turn."""
    if not log["acknowledged"]:
        return
    tag = chance.choice(log["acknowledged"])
    hits = store.search(tag)
    assert hits, f"the acknowledged turn {tag} is not found"
    assert all(tag in str(hit.message.content).split() for hit in hits), f"a wrong hit: {tag}"


def operate(store: SessionStore, worker: int, n: int, chance: random.Random, log: dict) -> None:
    """One seeded operation: half are turns, the rest spread over the other kinds."""
    key_number = chance.randrange(KEYS)
    roll = chance.random()
    if roll < 0.5:
        one_turn(store, worker, n, log)
    elif roll < 0.55:
        redeliver(store, log)
    elif roll < 0.75:
        rotate(store, key_number, chance, log)
    elif roll < 0.83:
        retitle(store, key_number, chance, log)
    elif roll < 0.9:
        compress(store, key_number, worker, log)
    else:
        search(store, chance, log)


def work(kind: str, home: Path, operations: int, worker: int) -> None:
    """One worker process: ``operations`` seeded operations, its log written at the end."""
    chance = random.Random(f"{kind}-{worker}")  # noqa: S311  # test data, not secrets
    log: dict = {
        "acknowledged": [],
        "lane": {},
        "seen": {},
        "refused": collections.Counter(),
        "redelivered_elsewhere": [],
        "error": None,
    }
    try:
        with open_store(kind, home) as store:
            for n in range(operations):
                operate(store, worker, n, chance, log)
    except BaseException:  # noqa: BLE001  # reported to the parent, which fails the test
        log["error"] = traceback.format_exc()
    (home / f"worker-{worker}.json").write_text(json.dumps(log), encoding="utf-8")


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_operations_from_processes_keep_every_invariant(kind, tmp_path, scale):
    """4 processes x 60 mixed operations on 3 keys: nothing lost, doubled, orphaned or leaked."""
    tmp_path.mkdir(exist_ok=True)
    with open_store(kind, tmp_path):
        pass  # create the store once, before the workers race to
    context = multiprocessing.get_context("spawn")
    arguments = (kind, tmp_path, OPERATIONS * scale)
    workers = [context.Process(target=work, args=(*arguments, w)) for w in range(WORKERS)]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    assert [process.exitcode for process in workers] == [0] * WORKERS
    logs = [
        json.loads((tmp_path / f"worker-{w}.json").read_text(encoding="utf-8"))
        for w in range(WORKERS)
    ]
    errors = [log["error"] for log in logs if log["error"]]
    assert not errors, errors[0]
    acknowledged = {tag for log in logs for tag in log["acknowledged"]}
    with open_store(kind, tmp_path) as store:
        check_store(store, acknowledged, copies=True)
        titles = collections.Counter(
            (item.record.source, item.record.user_id, item.record.title.casefold())
            for item in store.list_sessions(limit=None, include_compressed=True).items
            if item.record.title is not None
        )
        assert not [title for title, n in titles.items() if n > 1], "a title held twice"
        for w, log in enumerate(logs):
            for key_number, last in log["lane"].items():
                lane = store.get_or_create(source(int(key_number))).state.lane
                assert lane[f"w{w}"] == last, (key_number, w)
