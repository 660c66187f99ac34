"""Several hosts on one PostgreSQL schema: eight stores racing, and clients killed mid-write."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import hermes_sessions
from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.exceptions import ConflictError, LeaseHeldError
from hermes_sessions.queries import SessionQuery
from pg_support import open_pg, requires_pg, schema_for, test_dsn

pytestmark = [requires_pg, pytest.mark.slow]

HOSTS = 8
OPERATIONS = 200
KEYS = 6


def source(number: int) -> SessionSource:
    """The conversation of key ``number`` (every host talks in every conversation)."""
    return SessionSource(platform="telegram", chat_id=str(number), user_id=f"u{number}")


def host(directory: Path, worker: int, log: Path) -> None:  # one branch per operation
    """One gateway host: its own store and pool, random operations, acknowledged ones logged."""
    rng = random.Random(worker)  # noqa: S311  # test data, not secrets
    never = ResetPolicies(ResetPolicy(mode="none"))
    seen: dict[int, list[str]] = {}
    with (
        SessionStore(open_pg(directory, min_size=1, max_size=2), resets=never) as store,
        log.open("w", encoding="utf-8") as out,
    ):

        def ack(*fields: object) -> None:
            out.write(json.dumps(fields) + "\n")
            out.flush()

        for n in range(OPERATIONS):
            number = rng.randrange(KEYS)
            key = store.key_for(source(number))
            tag = f"{worker}.{n}"
            choice = rng.random()
            if choice < 0.08:
                store.get_or_create(source(number))  # /new needs a conversation to reset
                ack("R", key, store.reset(key).session_id)
            elif choice < 0.15 and seen.get(number):
                target = rng.choice(seen[number])
                ack("S", key, target, store.resume(key, target).session_id)
            elif choice < 0.22:
                session_id = store.get_or_create(source(number)).session_id
                store.set_title(session_id, f"title {tag}")
                ack("T", session_id, tag)
            elif choice < 0.30:
                session_id = store.get_or_create(source(number)).session_id
                summary = Message(role="system", content=f"summary {tag}")
                try:
                    child = store.compress(session_id, [summary], holder=f"host-{worker}")
                except (ConflictError, LeaseHeldError):
                    continue  # another host compressed it first: the documented outcome
                ack("C", session_id, child.id, tag)
            else:
                lookup = store.get_or_create(source(number))
                seen.setdefault(number, []).append(lookup.session_id)
                store.append(
                    lookup.session_id,
                    Message(role="user", content=f"q {tag}", platform_message_id=tag),
                    Message(role="assistant", content=f"a {tag}"),
                )
                ack("A", lookup.session_id, tag)


def check_consistency(store: SessionStore) -> dict[str, list[Message]]:
    """One live session per key: open sessions are exactly the sessions keys point at."""
    backend = store.backend
    entries = backend.entries()
    sessions = backend.list_sessions(SessionQuery(limit=None)).items  # compressed ones too
    records = {item.record.id: item.record for item in sessions}
    for entry in entries:
        assert entry.session_id in records, entry
        assert not records[entry.session_id].is_ended, entry
    open_ids = {record.id for record in records.values() if not record.is_ended}
    assert open_ids == {entry.session_id for entry in entries}
    transcripts = {sid: backend.get_messages(sid, include_inactive=True) for sid in records}
    for session_id, messages in transcripts.items():
        assert records[session_id].message_count == sum(m.active for m in messages)
    return transcripts


def test_eight_hosts_share_one_schema(tmp_path):
    """Eight hosts racing turns, resets, resumes, titles and compressions lose and fork nothing."""
    context = multiprocessing.get_context("spawn")
    logs = [tmp_path / f"host-{n}.log" for n in range(HOSTS)]
    open_pg(tmp_path).close()  # migrate once up front; the race of opening is tested elsewhere
    hosts = [context.Process(target=host, args=(tmp_path, n, logs[n])) for n in range(HOSTS)]
    for process in hosts:
        process.start()
    for process in hosts:
        process.join()
    assert [process.exitcode for process in hosts] == [0] * HOSTS
    acknowledged = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    kinds = Counter(record[0] for record in acknowledged)
    assert all(kinds[kind] > 0 for kind in "ARSTC"), kinds
    with SessionStore(open_pg(tmp_path)) as store:
        transcripts = check_consistency(store)
        where = Counter(
            (session_id, m.platform_message_id)
            for session_id, messages in transcripts.items()
            for m in messages
            if m.platform_message_id is not None
        )
        appended = [
            (session_id, tag) for kind, session_id, tag in (r for r in acknowledged if r[0] == "A")
        ]
        assert sorted(where) == sorted(appended)  # every acknowledged turn, nowhere else
        assert set(where.values()) == {1}  # and only once
        for kind, *fields in acknowledged:
            if kind == "T":
                assert store.session(fields[0]).title is not None
            elif kind == "C":
                child = store.session(fields[1])
                assert child.parent_session_id == fields[0]
                assert store.session(fields[0]).end_reason == "compression"
                assert [m.content for m in transcripts[child.id]][:1] == [f"summary {fields[2]}"]
        assert len({e.session_key for e in store.backend.entries()}) == KEYS


# -- clients killed mid-transaction ----------------------------------------------------------------

CHILD = Path(__file__).with_name("pg_child.py")


def start_client(directory: Path, seed: int) -> subprocess.Popen[str]:
    """Start ``pg_child.py`` with this checkout of the library importable."""
    checkout = Path(hermes_sessions.__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, str(CHILD), test_dsn() or "", schema_for(directory), str(seed)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_clients_killed_mid_transaction_lose_no_acknowledged_write(tmp_path):
    """SIGKILL a client 20 times at random moments: acknowledged writes stay, no half rotation."""
    open_pg(tmp_path).close()
    rng = random.Random(20261202)  # noqa: S311  # kill moments, not secrets
    appended: list[tuple[str, str]] = []
    rotated: dict[str, str] = {}
    for round_ in range(20):
        client = start_client(tmp_path, round_)
        assert client.stdout is not None
        for _ in range(rng.randint(3, 40)):
            line = client.stdout.readline().split()
            if line[0] == "A":
                appended.append((line[1], line[2]))
            else:
                rotated[line[1]] = line[2]
        client.send_signal(signal.SIGKILL)  # the client is busy: usually inside a transaction
        for line in client.stdout.read().splitlines():  # acknowledged before the kill landed
            kind, first, second = line.split()
            if kind == "A":
                appended.append((first, second))
            else:
                rotated[first] = second
        client.wait()
        client.stdout.close()
        with SessionStore(open_pg(tmp_path)) as store:
            transcripts = check_consistency(store)
            for session_id, tag in appended:
                contents = [m.content for m in transcripts[session_id]]
                assert contents.count(f"{tag}-u") == 1
                index = contents.index(f"{tag}-u")
                assert contents[index + 1] == f"{tag}-a"  # the batch landed whole
            for key, session_id in rotated.items():
                # the key's newest acknowledged rotation is there, or a later one on top of it
                assert session_id in transcripts
                entry = store.entry(key)
                assert entry.session_id == session_id or store.session(session_id).is_ended
