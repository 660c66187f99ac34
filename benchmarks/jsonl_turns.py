"""JSONLBackend: does the cost of a turn stay flat as keys grow (DESIGN §11)?

A *turn* is what a host does for every inbound message once it has routed it:
``get_entry(key)``, then ``append_messages(session, [user message, reply], touch_at=now)`` —
one append announced in the journal, written to the session file, with the key's activity.

Two data directories are built, one with few keys and one with many (each key with its own
session), and opened side by side. Turns on random keys alternate between them in rounds (so
machine noise hits both alike); the median rate of each is printed with their ratio, which is
near 1.0 when the cost does not grow with the number of keys and sessions, and so is the median
of the ratios of back-to-back rounds (steadier on a busy machine). A raw loop doing the same two
fsynced appends per turn without the library is printed as the floor.

The directories are built through the documented bulk path: session files written in the
documented format, then ``JSONLBackend.repair()`` adopts them and builds the routing index.
After opening each one, a full garbage collection is run once (see the comment in ``main``).

Usage: ``python benchmarks/jsonl_turns.py [--quick]`` (``--quick``: a smoke run of seconds).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.jsonl._session_records import Header, encode
from hermes_sessions.models import Message, SessionRecord
from hermes_sessions.queries import SessionQuery

START = datetime(2026, 5, 1, tzinfo=UTC)


def key_of(n: int) -> str:
    """The session key of key number ``n``."""
    return f"agent:main:bench:dm:user{n}"


def build(directory: Path, keys: int) -> float:
    """Write ``keys`` session files (one per key) and let repair() index them; return seconds."""
    began = time.perf_counter()
    sessions = directory / "sessions"
    sessions.mkdir(parents=True, mode=0o700)
    for n in range(keys):
        record = SessionRecord(
            id=f"s{n:07d}", source="bench", started_at=START, session_key=key_of(n), user_id=f"u{n}"
        )
        fd = os.open(sessions / f"{record.id}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(encode(Header(0, record, 1).to_json()))
    report = JSONLBackend.repair(directory)
    if len(report.adopted_sessions) != keys or report.backup is not None:
        raise SystemExit(f"bulk load went wrong: {report}")
    return time.perf_counter() - began


def turns(
    backend: JSONLBackend, keys: int, count: int, rng: random.Random, clock: list[int]
) -> float:
    """Run ``count`` turns on random keys; return turns per second."""
    began = time.perf_counter()
    for _ in range(count):
        clock[0] += 1
        now = START + timedelta(seconds=clock[0])
        entry = backend.get_entry(key_of(rng.randrange(keys)))
        if entry is None:
            raise SystemExit("a key lost its entry")
        backend.append_messages(
            entry.session_id,
            [
                Message(role="user", content=f"question {clock[0]} about docker", timestamp=now),
                Message(role="assistant", content=f"answer {clock[0]}: use compose", timestamp=now),
            ],
            touch_at=now,
        )
    return count / (time.perf_counter() - began)


def raw_floor(directory: Path, count: int) -> float:
    """Turns per second of two fsynced whole-line appends (journal + session file), no library."""
    journal = os.open(directory / "raw-journal", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    session = os.open(directory / "raw-session", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = b'{"op":"write","tx":1,"session":"s0000001","lines":2}\n'
    lines = b'{"type":"message","tx":1,"message":{"role":"user","content":"q"}}\n' * 2
    began = time.perf_counter()
    for _ in range(count):
        os.write(journal, line)
        os.fsync(journal)
        os.write(session, lines)
        os.fsync(session)
    elapsed = time.perf_counter() - began
    os.close(journal)
    os.close(session)
    return count / elapsed


def main(argv: list[str] | None = None) -> int:
    """Build, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a CI smoke run")
    options = parser.parse_args(argv)
    small, large = (200, 2_000) if options.quick else (1_000, 100_000)
    rounds, per_round = (3, 100) if options.quick else (15, 200)
    rng = random.Random(20260501)
    clock = [0]
    with tempfile.TemporaryDirectory(prefix="jsonl-turns-") as scratch:
        root = Path(scratch)
        print("JSONLBackend, per-turn cost (get_entry + 2-message append with touch, fsync on)")
        built = {keys: build(root / f"k{keys}", keys) for keys in (small, large)}
        os.sync()  # let the build's writes reach the disk before any fsync is timed
        sizes = {}
        for keys in (small, large):
            began = time.perf_counter()
            backend = JSONLBackend(root / f"k{keys}")
            sizes[keys] = (backend, built[keys], time.perf_counter() - began, [])
        # Opening allocates the whole cache; the first full garbage collection after that walks
        # all of it once (about half a second at 100,000 sessions). It is a one-off cost of
        # opening, not of a turn, so it is paid here rather than inside a measured round.
        gc.collect()
        for keys, (backend, _, _, _) in sizes.items():
            turns(backend, keys, per_round, rng, clock)  # warm up
        for _ in range(rounds):
            for keys, (backend, _, _, rates) in sizes.items():
                rates.append(turns(backend, keys, per_round, rng, clock))
        floor = raw_floor(root, rounds * per_round)
        print(
            f"{'keys':>9} {'sessions':>9} {'build s':>8} {'open s':>7} {'turns':>6} {'turns/s':>8}"
        )
        medians = {}
        for keys, (backend, built, opened, rates) in sizes.items():
            medians[keys] = statistics.median(rates)
            sessions = len(backend.list_sessions(SessionQuery(limit=None)).items)
            done = rounds * per_round
            print(
                f"{keys:>9,} {sessions:>9,} {built:>8.1f} {opened:>7.1f} {done:>6,} "
                f"{medians[keys]:>8,.0f}"
            )
            backend.close()
        ratio = medians[large] / medians[small]
        paired = statistics.median(
            big / few for few, big in zip(sizes[small][3], sizes[large][3], strict=True)
        )
        print(f"ratio {large:,} keys / {small:,} keys: {ratio:.2f} (flat = near 1.0)")
        print(f"median of the {rounds} back-to-back round ratios: {paired:.2f}")
        print(f"raw floor, two fsynced appends per turn without the library: {floor:,.0f} turns/s")
        print(f"library turn rate / raw floor at {large:,} keys: {medians[large] / floor:.2f}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"peak memory of this process: {peak:,.0f} MiB "
            "(each process caches entries, summaries and the transcripts it used)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
