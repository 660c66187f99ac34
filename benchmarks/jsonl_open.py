"""JSONLBackend: what opening a home costs, and what reading on demand costs afterwards.

One home of N sessions (each with its own key and a two-message transcript) is built through
the documented bulk path (session files, then ``JSONLBackend.repair()``, which writes the
snapshot with every session's summary). It is then opened two ways in the same run:

* **on demand** (the backend as shipped): the snapshot and the journal are read, no session
  file; transcripts are read when a call needs them and at most ``cache_sessions`` are kept;
* **baseline**, the full-load path of earlier versions: every session file read at opening,
  every transcript kept and the search index built (the engine with the snapshot's summaries
  ignored, then the index built).

For each it prints the time to open, the memory that opening allocated (tracemalloc peak), the
rate of turns (``get_entry`` + an append of two messages, fsync on) on random keys right after
opening and on the same keys again (their transcripts cached), the first search and the median
of later searches, the memory still held after them (tracemalloc, current), with the ratios on
demand / baseline: the median of the ratios of paired rounds (baseline, then on demand).

A reference home of 1,000 sessions is built in the same run and its turns measured the same way
(on demand): the ratio of the turn rates (this home / the reference) says whether a turn stays
flat as the home grows. The output ends with the targets of issue 21 (at 100,000 sessions,
``--full``): opening in under 1 s and 50 MB, and turns flat (a ratio of at least 0.8).

Usage: ``python benchmarks/jsonl_open.py [--quick | --full] [--home DIR] [--rounds N]``
(``--quick``: 500 sessions, a smoke run; default 10,000; ``--full``: 100,000; ``--home``: reuse
a home built by an earlier run, or build it there and keep it, e.g. ``--full --home /tmp/home``
twice; its reference home is kept beside it as ``DIR-1k``).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_sessions.backends import JSONLBackend
from hermes_sessions.backends.jsonl import _backend
from hermes_sessions.backends.jsonl._engine import DirectoryEngine
from hermes_sessions.backends.jsonl._session_records import Header, MessageLine, encode
from hermes_sessions.models import Message, SessionRecord
from hermes_sessions.queries import SearchQuery

if TYPE_CHECKING:
    from collections.abc import Iterator

START = datetime(2026, 5, 1, tzinfo=UTC)
WORDS = ["docker", "compose", "deploy", "kubernetes", "rollback", "nginx", "redis", "backup"]


def key_of(n: int) -> str:
    """The session key of key number ``n``."""
    return f"agent:main:bench:dm:user{n}"


def build(directory: Path, count: int) -> float:
    """Write ``count`` session files (one per key, two messages each), index them; seconds."""
    began = time.perf_counter()
    sessions = directory / "sessions"
    sessions.mkdir(parents=True, mode=0o700)
    for n in range(count):
        record = SessionRecord(
            id=f"s{n:07d}", source="bench", started_at=START, session_key=key_of(n), user_id=f"u{n}"
        )
        word = WORDS[n % len(WORDS)]
        lines = [Header(0, record, 3)] + [
            MessageLine(
                0, Message(role=role, content=f"{role} {n} on {word}", id=i, timestamp=START)
            )
            for i, role in ((1, "user"), (2, "assistant"))
        ]
        fd = os.open(sessions / f"{record.id}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(b"".join(encode(line.to_json()) for line in lines))
    report = JSONLBackend.repair(directory)
    if len(report.adopted_sessions) != count or report.backup is not None:
        raise SystemExit(f"bulk load went wrong: {report}")
    return time.perf_counter() - began


@contextmanager
def full_load() -> Iterator[None]:
    """Open the way earlier versions did: every file read, every transcript kept, index built."""
    original = _backend._open_engine  # noqa: SLF001  # swapped for the earlier full load

    def open_everything(backend: JSONLBackend) -> DirectoryEngine:
        engine = DirectoryEngine(
            backend.directory,
            sync_writes=backend.durability == "full",
            lock_timeout=backend.lock_timeout,
            compact_threshold=backend.compact_threshold,
            cache_sessions=None,
            use_summaries=False,
        ).open()
        engine.state.enable_search()
        return engine

    _backend._open_engine = open_everything  # noqa: SLF001  # restored below
    try:
        yield
    finally:
        _backend._open_engine = original  # noqa: SLF001


def opened(directory: Path, *, baseline: bool) -> tuple[JSONLBackend, float]:
    """Open ``directory`` (on demand, or the baseline's full load); the backend and seconds."""
    gc.collect()
    began = time.perf_counter()
    if baseline:
        with full_load():
            backend = JSONLBackend(directory)
    else:
        backend = JSONLBackend(directory)
    return backend, time.perf_counter() - began


def turns(backend: JSONLBackend, keys: list[int], clock: list[int]) -> float:
    """One turn on each of ``keys``; return turns per second."""
    return len(keys) / sum(turn(backend, n, clock) for n in keys)


def turn(backend: JSONLBackend, n: int, clock: list[int]) -> float:
    """One turn on key ``n``: its entry, then an append of two messages; seconds."""
    began = time.perf_counter()
    clock[0] += 1
    now = START + timedelta(seconds=clock[0])
    entry = backend.get_entry(key_of(n))
    if entry is None:
        raise SystemExit("a key lost its entry")
    backend.append_messages(
        entry.session_id,
        [
            Message(role="user", content=f"question {clock[0]}", timestamp=now),
            Message(role="assistant", content=f"answer {clock[0]}", timestamp=now),
        ],
        touch_at=now,
    )
    return time.perf_counter() - began


def paired_turns(
    backend: JSONLBackend, reference: JSONLBackend, keys: list[int], ref_keys: list[int]
) -> float:
    """This home's turn rate over the reference's, one turn on each in turn.

    Both are measured in the same moments, so the machine's load cancels out; the medians of
    the turn times are compared, so a stall of the machine (another process's fsync) during
    one turn does not decide it.
    """
    clock = [30_000_000]
    here: list[float] = []
    there: list[float] = []
    for n, m in zip(keys, ref_keys, strict=True):
        here.append(turn(backend, n, clock))
        there.append(turn(reference, m, clock))
    return statistics.median(there) / statistics.median(here)


def searches(backend: JSONLBackend, count: int) -> tuple[float, float, int]:
    """The first search's seconds, the median of ``count`` later ones, and the first's hits."""
    began = time.perf_counter()
    hits = len(backend.search(SearchQuery(text="docker", limit=20)))
    first = time.perf_counter() - began
    later = []
    for n in range(count):
        began = time.perf_counter()
        backend.search(SearchQuery(text=WORDS[n % len(WORDS)], limit=20))
        later.append(time.perf_counter() - began)
    return first, statistics.median(later), hits


def measure(
    directory: Path, count: int, sample: int, *, baseline: bool, reference: Path
) -> dict[str, float]:
    """Every figure of one way of opening."""
    rng = random.Random(20260501)
    clock = [0 if baseline else 10_000_000]
    compacted(directory)
    gc.collect()
    tracemalloc.start()  # tracing slows everything down: the times are taken without, below
    try:
        traced, _ = opened(directory, baseline=baseline)
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        try:
            searches(traced, 2)
            held = tracemalloc.get_traced_memory()[0] / 1e6
        finally:
            traced.close()
    finally:
        tracemalloc.stop()
    compacted(directory)
    backend, seconds = opened(directory, baseline=baseline)
    try:
        flat = float("nan")
        if not baseline:  # right after opening both, before anything else
            with JSONLBackend(reference) as small:
                paired = rng.sample(range(count), sample)
                flat = paired_turns(backend, small, paired, rng.sample(range(REFERENCE), sample))
        keys = rng.sample(range(count), sample)
        cold = turns(backend, keys, clock)
        warm = turns(backend, keys, clock)
        first, later, hits = searches(backend, 9)
    finally:
        backend.close()
    backend, reopen = opened(directory, baseline=baseline)  # the journal of those turns replayed
    backend.close()
    return {
        "open s": seconds,
        "reopen s": reopen,
        "open MB": peak,
        "turns/s cold": cold,
        "turns/s warm": warm,
        "search 1st s": first,
        "search s": later,
        "MB after search": held,
        "hits": hits,
        "turns flat": flat,
    }


REFERENCE = 1_000
"""Sessions in the reference home (turns measured there too, for the flatness ratio)."""

TARGETS = (("open s", 1.0, "open in under 1 s"), ("open MB", 50.0, "open in under 50 MB"))
FLAT = 0.8
"""The least turn rate, as a fraction of the reference home's, that counts as flat."""


def compacted(home: Path) -> None:
    """Compact ``home`` (an open measures the snapshot; "reopen s" adds the journal since)."""
    with JSONLBackend(home) as backend:
        backend.compact()


def ready(home: Path, count: int) -> float:
    """Build ``home`` unless it exists; compact it (a snapshot with its index); build seconds."""
    built = 0.0 if (home / "routing.jsonl").exists() else build(home, count)
    with JSONLBackend(home) as backend:
        backend.compact()
    return built


def median_ratio(rounds: list[tuple[dict[str, float], dict[str, float]]], name: str) -> float:
    """The median over paired rounds of on demand / baseline."""
    ratios = [new[name] / old[name] for new, old in rounds if old[name]]
    return statistics.median(ratios) if ratios else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Build, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="500 sessions, for a CI smoke run")
    size.add_argument("--full", action="store_true", help="100,000 sessions (minutes to build)")
    parser.add_argument("--home", type=Path, help="a home to reuse (built there if missing)")
    parser.add_argument("--rounds", type=int, default=2, help="paired rounds (default 2)")
    options = parser.parse_args(argv)
    count = 500 if options.quick else 100_000 if options.full else 10_000
    sample = 50 if options.quick else 200
    with tempfile.TemporaryDirectory(prefix="jsonl-open-") as scratch:
        home = options.home or Path(scratch) / "home"
        reference = home.with_name(home.name + "-1k") if options.home else Path(scratch) / "ref"
        built = ready(home, count)
        ready(reference, REFERENCE)
        with JSONLBackend(home) as backend:  # the home's own size, if it was reused
            count = len(backend.entries())
        os.sync()
        print(f"JSONLBackend, opening a home of {count:,} sessions (built in {built:.0f} s)")
        rounds: list[tuple[dict[str, float], dict[str, float]]] = []
        for _ in range(max(options.rounds, 1)):
            old = measure(home, count, sample, baseline=True, reference=reference)
            new = measure(home, count, sample, baseline=False, reference=reference)
            rounds.append((new, old))
            done = ", ".join(f"{k} {v:,.3f} / {old[k]:,.3f}" for k, v in new.items())
            print(f"round {len(rounds)} (on demand / baseline): {done}", flush=True)
        flat = statistics.median(new["turns flat"] for new, _ in rounds)
        for pair in rounds:
            for figures in pair:
                del figures["turns flat"]
        new, old = rounds[-1]
        print(
            f"{'':16} {'on demand':>10} {'baseline':>10} {'ratio':>7}   (last round; ratio: median)"
        )
        for name in new:
            ratio = median_ratio(rounds, name)
            print(f"{name:16} {new[name]:>10,.3f} {old[name]:>10,.3f} {ratio:>7.2f}")
        print(
            "baseline: the full-load path (every file read at opening, the index built); "
            f"turns on {sample} random keys, cold = right after opening, warm = same keys again; "
            "MB after search: tracemalloc, current, after the first search and one more; "
            "open s: a compacted home; reopen s: right after those turns (their journal "
            "replayed, each session it names read)"
        )
        print(
            f"turns flat: turn rate here / on a {REFERENCE:,}-session home, on demand, one turn "
            f"on each in turn ({sample} random keys each, medians of the turn times; median of "
            f"{len(rounds)} rounds): "
            f"{flat:.2f}"
        )
        report_targets(new, count, flat)
    return 0


def report_targets(new: dict[str, float], count: int, flatness: float) -> None:
    """Print the issue's targets and whether this run meets them."""
    scope = "" if count >= 100_000 else f" (they apply at 100,000 sessions, --full; here {count:,})"
    print(f"targets{scope}:")

    def verdict(ok: bool) -> str:  # noqa: FBT001  # a yes or no, printed
        return "met" if ok else "NOT met"

    for name, limit, what in TARGETS:
        print(f"  {what}: {new[name]:.3f} -> {verdict(new[name] < limit)}")
    print(f"  turns flat (ratio >= {FLAT}): {flatness:.2f} -> {verdict(flatness >= FLAT)}")


if __name__ == "__main__":
    sys.exit(main())
