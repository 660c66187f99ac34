"""Reading the context window: the last 40 messages of a session, as a host does every turn.

Three readers of the same conversations, each timed in a fresh process, rounds interleaved:

* ``store``: ``SessionStore.tail(session_id, 40)`` on the SQLite store, returning ``Message``
  objects (ids, aware timestamps, tool calls, extra fields).
* ``raw``: plain ``sqlite3`` on the same database file: one indexed query for the 40 newest
  active message bodies of the session (joined to the session by id) and ``json.loads`` of each
  into a dict — the floor of any reader that stores JSON.
* ``openai``: the OpenAI Agents SDK's ``SQLiteSession.get_items(40)`` on the same messages stored
  through its ``add_items`` (skipped, saying so, when the ``frameworks`` extra is not installed).

Each process opens its reader, warms up, then reads a random session's window repeatedly; the
figure is reads per CPU second of the process (``time.process_time``: every thread's CPU, so the
Agents SDK's worker thread counts, its waits do not). CPU time, not wall time, because on a
shared machine the wall time of a process swings several-fold with the load of the others.
The ratio of a round compares processes of the same round; the figure printed is the median
over the rounds. It also prints the Python calls one ``tail``
makes (a profile hook counts them, untimed).

Targets (issue 39, item 2): the store's read takes at most 2x the raw read's time, and the store
reads faster than the Agents SDK's ``get_items(40)``.

    python benchmarks/reads.py [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.backends.sqlite import SQLiteBackend

NEVER = ResetPolicies(ResetPolicy(mode="none"))
WINDOW = 40
T0 = datetime(2026, 5, 12, 1, 0, tzinfo=UTC)
WORDS = "deploy the staging container then restart redis and check the helm chart logs".split()
READERS = ("store", "raw", "openai")


def has_openai() -> bool:
    """Whether the Agents SDK is installed."""
    try:
        from agents.memory import SQLiteSession  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def conversation(rng: random.Random, turns: int) -> list[Message]:
    """``turns`` turns of a realistic chat: user, sometimes a tool call and result, reply."""
    out: list[Message] = []
    at = T0
    for n in range(turns):
        at += timedelta(seconds=rng.randint(5, 90))
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
        out.append(
            Message(
                role="user",
                content=f"question {n}: {words}",
                timestamp=at,
                platform_message_id=f"m{n}",
                sender_id="4242",
                sender_name="Ada",
            )
        )
        if n % 3 == 0:
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "search", "arguments": json.dumps({"q": words[:30]})},
            }
            out.append(Message(role="assistant", content=None, tool_calls=[call], timestamp=at))
            out.append(
                Message(
                    role="tool",
                    content=f"3 results for {words[:30]}",
                    tool_call_id=f"call_{n}",
                    tool_name="search",
                    timestamp=at,
                )
            )
        reply = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80)))
        out.append(
            Message(
                role="assistant",
                content=reply,
                timestamp=at,
                token_count=rng.randint(50, 400),
                finish_reason="stop",
            )
        )
    return out


def build(folder: Path, sessions: int, turns: int) -> list[str]:
    """Fill the store (and the Agents SDK's database) with the same conversations."""
    rng = random.Random(5)
    ids = []
    chats = []
    with SessionStore(SQLiteBackend(folder / "state.db", durability="normal"), resets=NEVER) as s:
        for number in range(sessions):
            source = SessionSource(platform="telegram", chat_id=str(number), user_id="4242")
            session_id = s.get_or_create(source).session_id
            messages = conversation(rng, turns)
            s.append(session_id, *messages)
            ids.append(session_id)
            chats.append(messages)
    if has_openai():
        from agents.memory import SQLiteSession  # noqa: PLC0415

        from hermes_sessions.formats import openai_chat  # noqa: PLC0415

        async def fill() -> None:
            for session_id, messages in zip(ids, chats, strict=True):
                session = SQLiteSession(session_id, folder / "openai.db")
                items = [openai_chat.to_openai_chat(m) for m in messages]
                await session.add_items(items)  # type: ignore[arg-type]
                session.close()

        asyncio.run(fill())
    return ids


# -- the readers, each run in a child process ------------------------------------------------


def read_store(folder: Path, ids: list[str], reads: int) -> float:
    """Reads per CPU second of ``SessionStore.tail``."""
    rng = random.Random(1)
    picks = [rng.choice(ids) for _ in range(reads)]
    with SessionStore(SQLiteBackend(folder / "state.db", durability="normal")) as store:
        for session_id in ids:  # warm-up
            if len(store.tail(session_id, WINDOW)) != WINDOW:
                raise AssertionError(session_id)
        start = time.process_time()
        for session_id in picks:
            store.tail(session_id, WINDOW)
        return reads / (time.process_time() - start)


RAW_SQL = (
    "SELECT m.body FROM messages AS m JOIN sessions AS s ON s.seq = m.session_seq "
    "WHERE s.id = ? AND m.active = 1 ORDER BY m.id DESC LIMIT ?"
)


def read_raw(folder: Path, ids: list[str], reads: int) -> float:
    """Reads per CPU second of a plain query and ``json.loads`` into dicts."""
    rng = random.Random(1)
    picks = [rng.choice(ids) for _ in range(reads)]
    connection = sqlite3.connect(folder / "state.db", isolation_level=None)
    loads = json.loads

    def read(session_id: str) -> list[dict[str, Any]]:
        rows = connection.execute(RAW_SQL, (session_id, WINDOW)).fetchall()
        rows.reverse()
        return [loads(body) for (body,) in rows]

    for session_id in ids:
        if len(read(session_id)) != WINDOW:
            raise AssertionError(session_id)
    start = time.process_time()
    for session_id in picks:
        read(session_id)
    elapsed = time.process_time() - start
    connection.close()
    return reads / elapsed


def read_openai(folder: Path, ids: list[str], reads: int) -> float:
    """Reads per CPU second of the Agents SDK's ``SQLiteSession.get_items(40)``."""
    from agents.memory import SQLiteSession  # noqa: PLC0415

    rng = random.Random(1)
    picks = [rng.choice(ids) for _ in range(reads)]

    async def run() -> float:
        sessions = {i: SQLiteSession(i, folder / "openai.db") for i in ids}
        for session in sessions.values():
            if len(await session.get_items(WINDOW)) != WINDOW:
                raise AssertionError(session.session_id)
        start = time.process_time()
        for session_id in picks:
            await sessions[session_id].get_items(WINDOW)
        elapsed = time.process_time() - start
        for session in sessions.values():
            session.close()
        return reads / elapsed

    return asyncio.run(run())


def calls_per_read(folder: Path, ids: list[str]) -> int:
    """Python function calls of one ``tail`` (after a warm-up), counted by a profile hook."""
    with SessionStore(SQLiteBackend(folder / "state.db", durability="normal")) as store:
        store.tail(ids[0], WINDOW)
        calls = 0

        def count(_frame: object, event: str, _arg: object) -> None:
            nonlocal calls
            calls += event in {"call", "c_call"}

        sys.setprofile(count)
        try:
            store.tail(ids[1], WINDOW)
        finally:
            sys.setprofile(None)
    return calls


def child(reader: str, folder: str, ids: str, reads: int) -> None:
    """Entry point of a child process: print one reader's rate."""
    function = {"store": read_store, "raw": read_raw, "openai": read_openai}[reader]
    print(function(Path(folder), ids.split(","), reads))


def measure(reader: str, folder: Path, ids: list[str], reads: int) -> float:
    """Run ``reader`` in a fresh interpreter; return its reads per CPU second."""
    out = subprocess.run(  # our own interpreter and script
        [sys.executable, __file__, "--child", reader, str(folder), ",".join(ids), str(reads)],
        check=False,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"the {reader} reader failed:\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Build, measure in interleaved rounds, print the ratios and the verdicts."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke tests")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (median; at least 5)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        reader, folder, ids, reads = args.child
        child(reader, folder, ids, int(reads))
        return
    rounds = max(5, args.rounds or 5)
    sessions, turns, reads = (10, 30, 300) if args.quick else (50, 60, 5_000)
    readers = [r for r in READERS if r != "openai" or has_openai()]
    if "openai" not in readers:
        print(
            "the Agents SDK is not installed (pip install 'hermes-sessions[frameworks]'): "
            "its baseline is skipped"
        )
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        ids = build(folder, sessions, turns)
        rates: dict[str, list[float]] = {reader: [] for reader in readers}
        for round_ in range(rounds):
            order = readers[round_ % len(readers) :] + readers[: round_ % len(readers)]
            for reader in order:
                rates[reader].append(measure(reader, folder, ids, reads))
        calls = calls_per_read(folder, ids)
    print(
        f"reading the last {WINDOW} messages, {sessions} sessions of {turns} turns, {reads:,} "
        f"reads per process; medians of {rounds} rounds, each reader in a fresh process, "
        "rounds interleaved"
    )
    for reader in readers:
        print(f"  {reader:7} {statistics.median(rates[reader]):9,.0f} reads per CPU second")
    cost = statistics.median(r / s for s, r in zip(rates["store"], rates["raw"], strict=True))
    mark = "pass" if cost <= 2.0 else "MISS"
    print(f"store read time / raw read time: {cost:.2f} (target <= 2.0): {mark}")
    if "openai" in rates:
        speed = statistics.median(
            s / o for s, o in zip(rates["store"], rates["openai"], strict=True)
        )
        mark = "pass" if speed > 1.0 else "MISS"
        print(
            f"store reads/s / Agents SDK get_items({WINDOW}) reads/s: {speed:.2f} "
            f"(target > 1.0): {mark}"
        )
    print(f"Python calls per tail({WINDOW}): {calls:,}")


if __name__ == "__main__":
    main()
