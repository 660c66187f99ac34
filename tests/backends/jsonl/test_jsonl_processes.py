"""JSONLBackend shared by real processes: SIGKILL at random moments and concurrent writers."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from jsonl_helpers import SHARED_KEY, START

import hermes_sessions
from hermes_sessions.backends import JSONLBackend
from hermes_sessions.queries import SessionQuery
from hermes_sessions.state import StateScope
from hermes_sessions.testing._support import seed

# -- real processes --------------------------------------------------------------------------------

CHILD = Path(__file__).with_name("jsonl_child.py")
CRASH_KEYS = [f"agent:main:cli:dm:{n}" for n in range(3)]


def child(*args):
    """Start ``jsonl_child.py`` with this checkout of the library importable."""
    source = Path(hermes_sessions.__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, str(CHILD), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


def check_after_crash(directory, appended, rotated):
    """Reopening works; acknowledged writes are there once; keys point at sessions; no half turn."""
    with JSONLBackend(directory) as backend:
        for key in CRASH_KEYS:
            entry = backend.get_entry(key)
            assert entry is None or backend.get_session(entry.session_id) is not None, key
        for new, tag in rotated.items():
            assert backend.find_message(new, f"{tag}-s") is not None, new
        sessions = backend.list_sessions(SessionQuery(limit=None)).items
        seen: dict[str, int] = {}
        for item in sessions:
            messages = backend.get_messages(item.record.id, include_inactive=True)
            ids = [m.id or 0 for m in messages]
            assert ids == sorted(set(ids)), item.record.id
            for message in messages:
                pid = message.platform_message_id or ""
                seen[pid] = seen.get(pid, 0) + 1
            check_state(backend, item.record, messages)
        for tag, session_id in appended.items():
            assert seen.get(f"{tag}-u") == seen.get(f"{tag}-a") == 1, (tag, session_id)
            assert backend.find_message(session_id, f"{tag}-u") is not None
        halves = {p.rsplit("-", 1)[0] for p in seen if p.endswith(("-u", "-a"))}
        assert all(seen.get(f"{t}-u") == seen.get(f"{t}-a") == 1 for t in halves)


def check_state(backend, record, messages):
    """State written with each turn is never half-applied: it names exactly the last turn."""
    turns = [m.platform_message_id[:-2] for m in messages if m.platform_message_id.endswith("-u")]
    scope = StateScope.session(record.id).id
    state = backend.get_state([scope])
    assert state == ({scope: {"last": turns[-1]}} if turns else {}), record.id
    assert record.revision == len(turns), record.id


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(directory):
    """A child appending and rotating is killed 24 times; every acknowledged write survives."""
    rng = random.Random(20260501)  # noqa: S311  # kill moments, not secrets
    appended: dict[str, str] = {}
    rotated: dict[str, str] = {}
    kills = 0
    for round_ in range(24):
        process = child("crash", directory, rng.randrange(1 << 30), round_)
        assert process.stdout is not None
        wanted = rng.randint(1, 12)
        lines = [process.stdout.readline() for _ in range(wanted)]
        # The delay only picks the moment of the kill, so that it falls inside an operation
        # (between an announcement and its data, inside a rotation) rather than right after an
        # acknowledgement; nothing waits on it and the checks hold wherever the kill lands.
        time.sleep(rng.uniform(0, 0.01))
        process.send_signal(signal.SIGKILL)
        rest = process.stdout.read()
        process.wait()
        process.stdin.close()  # type: ignore[union-attr]
        process.stdout.close()
        assert process.returncode == -signal.SIGKILL, b"".join(lines) + rest
        kills += 1
        complete = b"".join(lines) + rest
        for line in complete.decode().splitlines(keepends=True):
            if not line.endswith("\n"):
                continue
            kind, *fields = line.split()
            if kind == "A":
                appended[fields[1]] = fields[0]
            else:
                rotated[fields[1]] = fields[2]
        check_after_crash(directory, appended, rotated)
    assert kills >= 20
    assert len(appended) > kills
    assert len(rotated) > kills // 2


@pytest.mark.slow
def test_eight_processes_touching_and_appending_lose_nothing(backend, directory):
    """Eight processes recording activity and appending at once: nothing lost or doubled."""
    workers, count = 8, 20
    seed(backend, "shared", SHARED_KEY)
    for w in range(workers):
        seed(backend, f"own{w}", f"agent:main:cli:dm:w{w}")
    processes = [child("concurrent", directory, w, count) for w in range(workers)]
    for process in processes:
        assert process.stdout.readline() == b"ready\n"  # type: ignore[union-attr]
    for process in processes:
        process.stdin.write(b"go\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
    for process in processes:
        assert process.stdout.readline() == b"done\n"  # type: ignore[union-attr]
        assert process.wait() == 0
        process.stdin.close()  # type: ignore[union-attr]
        process.stdout.close()  # type: ignore[union-attr]
    shared = backend.get_messages("shared")
    assert sorted(str(m.content) for m in shared) == sorted(
        f"{w}:{n}" for w in range(workers) for n in range(count)
    )
    ids = [m.id or 0 for m in shared]
    assert ids == sorted(ids)
    assert len(set(ids)) == workers * count
    stored = backend.get_session("shared")
    assert stored is not None
    assert stored.message_count == workers * count
    last = START + timedelta(minutes=(workers - 1) * 1000 + count - 1)
    assert backend.get_entry(SHARED_KEY).updated_at == last  # type: ignore[union-attr]
    for w in range(workers):
        own = backend.get_entry(f"agent:main:cli:dm:w{w}")
        assert own is not None
        assert own.updated_at == START + timedelta(minutes=w * 1000 + count - 1)
        assert own.last_prompt_tokens == count - 1
        assert [m.content for m in backend.get_messages(f"own{w}")] == [
            f"own {n}" for n in range(count)
        ]
    with JSONLBackend(directory) as again:
        assert again.get_messages("shared") == shared
