"""Turns per second with many chats at once: what group commit buys (issue 21, items 1 and 5).

A turn is what a gateway does for each inbound message of a chat: ``async with store.turn(source)``
(the key held, its session looked up), ``seen`` (the redelivery check) and one ``append`` of the
user message and the reply with the call's usage (one write). ``C`` concurrent chats are ``C``
asyncio tasks, each doing its chat's turns one after another through one ``AsyncSessionStore``
on SQLite with ``full`` durability (an fsync per commit). The same run measures, with the same
turns:

- the store with ``group_commit=False``: its own unbatched rate (one commit per turn);
- the store as it was before its writer and reader threads (``_batcher``): every call in a
  thread of its own (writes in the 64-thread write pool, reads in the default pool), still with
  group commit — what the writer thread improves on;
- 8 threads on the synchronous ``SessionStore`` (group commit on and off);
- the raw ``sqlite3`` loop of ``turns.py`` with one commit per turn, and the same loop batching 64
  turns per commit (the ideal a group commit approaches);
- the async store with the turn ledger (``ledger=True``: ``turn(source, message=...,
  holder=...)`` and ``turn.answer``, two commits a turn), beside the plain turn (issue 40);
- with a PostgreSQL DSN (``HERMES_SESSIONS_TEST_PG_DSN``, ``HERMES_SESSIONS_DSN`` or
  ``--pg-dsn``), the async store on PostgreSQL at the same concurrencies, in a fresh schema
  dropped at the end.

With ``--breakdown`` it also prints where the CPU of a turn goes at 64 chats (the event loop's
thread, the writer, the reader, the other threads), from each thread's CPU clock.

It prints every rate and the ratios of the targets: at 64 chats the async store reaches at
least 2x the raw one-commit loop, 3x its own unbatched rate and 0.5x the raw 64-batched loop.
Each figure is the median of ``--rounds`` rounds (other work shares this machine). ``--quick`` is
a smoke run of a few seconds (CI runs it).

    python benchmarks/concurrent_turns.py [--quick] [--rounds N] [--pg-dsn DSN] [--breakdown]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from turns import NEVER, build, raw_turns, source  # the sibling benchmark

from hermes_sessions import AsyncSessionStore, Message, SessionStore, Usage
from hermes_sessions.aio._writers import WritePool
from hermes_sessions.backends.sqlite import SQLiteBackend

if TYPE_CHECKING:
    from collections.abc import Callable

USAGE = Usage(input=120, output=30, cost_usd=0.001)


def _pair(tag: str, n: int) -> tuple[Message, Message]:
    return (
        Message(role="user", content=f"question {n} about staging", platform_message_id=tag),
        Message(role="assistant", content=f"answer {n}: restart the youer container"),
    )


async def _chat(
    store: AsyncSessionStore, number: int, turns: int, run: str, *, ledger: bool = False
) -> None:
    for n in range(turns):
        tag = f"{run}-{number}-{n}"
        if ledger:  # the turn ledger: accept (one commit), answer with the reply (one commit)
            question, reply = _pair(tag, n)
            async with store.turn(source(number), message=question, holder="bench") as turn:
                if turn.duplicate:
                    raise AssertionError("a fresh message was reported as a duplicate")
                await turn.answer(reply, usage=USAGE)
            continue
        async with store.turn(source(number)) as turn:
            if await store.seen(turn.session_id, tag) is not None:
                raise AssertionError("a fresh message was reported as seen")
            await store.append(turn.session_id, *_pair(tag, n), usage=USAGE)


def _thread_clocks(store: AsyncSessionStore) -> dict[str, float]:
    """CPU seconds so far of the loop's thread, the writer and the reader (Linux clocks)."""
    clocks = {"event loop": time.thread_time(), "process": time.process_time()}
    for name in ("_batcher", "_reader"):
        queue = getattr(store._writes, name)  # noqa: SLF001  # the benchmark looks inside
        pool = None if queue is None else queue._thread  # noqa: SLF001
        for thread in () if pool is None else pool._threads:  # noqa: SLF001
            clock = time.pthread_getcpuclockid(thread.ident)  # type: ignore[arg-type]
            clocks[name.strip("_")] = time.clock_gettime(clock)
    return clocks


async def _async_rate(
    store: AsyncSessionStore,
    chats: int,
    turns: int,
    run: str,
    cpu: dict[str, float] | None,
    *,
    ledger: bool = False,
) -> float:
    per_chat = max(1, turns // chats)
    warm = (_chat(store, c, 2, f"{run}w", ledger=ledger) for c in range(chats))
    await asyncio.gather(*warm)
    before = _thread_clocks(store)
    start = time.perf_counter()
    await asyncio.gather(*(_chat(store, c, per_chat, run, ledger=ledger) for c in range(chats)))
    elapsed = time.perf_counter() - start
    if cpu is not None:
        after = _thread_clocks(store)
        for name, value in after.items():
            cpu[name] = (value - before.get(name, 0.0)) / (chats * per_chat)
    return chats * per_chat / elapsed


def async_turns(
    open_store: Callable[[], SessionStore],
    chats: int,
    turns: int,
    run: str,
    *,
    threaded: bool = False,
    cpu: dict[str, float] | None = None,
    ledger: bool = False,
) -> float:
    """Turns per second of ``chats`` concurrent chats through ``AsyncSessionStore``.

    ``threaded``: as before the writer and reader threads, every call in a thread of its own.
    ``cpu`` receives the CPU seconds per turn of each thread (see :func:`_thread_clocks`).
    ``ledger``: turns through the turn ledger (the store must be opened with it).
    """

    async def main() -> float:
        async with AsyncSessionStore(open_store()) as store:
            if threaded:
                pool = WritePool(store.store.backend, batches=False)
                store._writes = pool  # noqa: SLF001  # the baseline: the write pool alone
            return await _async_rate(store, chats, turns, run, cpu, ledger=ledger)

    return asyncio.run(main())


def thread_turns(path: Path, threads: int, turns: int, run: str, *, group: bool) -> float:
    """Turns per second of ``threads`` threads sharing one synchronous store, a chat each."""
    per_thread = max(1, turns // threads)
    backend = SQLiteBackend(path, durability="full", group_commit=group)
    with SessionStore(backend, resets=NEVER) as store:
        barrier = threading.Barrier(threads + 1)

        def worker(number: int) -> None:
            barrier.wait()
            for n in range(per_thread):
                tag = f"{run}-{number}-{n}"
                lookup = store.get_or_create(source(number))
                if store.seen(lookup.session_id, tag) is not None:
                    raise AssertionError("a fresh message was reported as seen")
                store.append(lookup.session_id, *_pair(tag, n), usage=USAGE)

        with ThreadPoolExecutor(threads) as pool:
            done = [pool.submit(worker, t) for t in range(threads)]
            barrier.wait()
            start = time.perf_counter()
            for future in done:
                future.result()
            elapsed = time.perf_counter() - start
    return threads * per_thread / elapsed


def _sqlite_opener(path: Path, *, group: bool, ledger: bool = False) -> Callable[[], SessionStore]:
    def open_store() -> SessionStore:
        backend = SQLiteBackend(path, durability="full", group_commit=group)
        return SessionStore(backend, resets=NEVER, ledger=ledger)

    return open_store


def sqlite_round(
    scratch: Path,
    keys: int,
    turns: int,
    round_: int,
    concurrencies: tuple[int, ...],
    *,
    cpu: dict[str, float] | None = None,
) -> dict[str, float]:
    """One round of every SQLite figure, measured back to back (the machine's noise hits all)."""
    db = scratch / "state.db"
    rates = {
        "raw 1": raw_turns(scratch / f"raw{round_}.db", keys, turns, round_, checked=True),
        "raw 64": raw_turns(
            scratch / f"raw64-{round_}.db", keys, turns, round_, checked=True, batch=64
        ),
    }
    for chats in concurrencies:
        for group in (True, False):
            run = f"{'g' if group else 's'}{chats}-{round_}"
            opener = _sqlite_opener(db, group=group)
            clocks = cpu if group and chats == 64 else None  # the target's case
            rates[f"async {chats} {group}"] = async_turns(opener, chats, turns, run, cpu=clocks)
        opener = _sqlite_opener(db, group=True)
        run = f"p{chats}-{round_}"
        rates[f"async {chats} threaded"] = async_turns(opener, chats, turns, run, threaded=True)
        opener = _sqlite_opener(db, group=True, ledger=True)
        run = f"l{chats}-{round_}"
        rates[f"ledger {chats}"] = async_turns(opener, chats, turns, run, ledger=True)
    for group in (True, False):
        run = f"{'t' if group else 'u'}-{round_}"
        rates[f"threads {group}"] = thread_turns(db, 8, turns, run, group=group)
    return rates


def measure_sqlite(scratch: Path, args: argparse.Namespace, concurrencies: tuple[int, ...]) -> None:
    """Every SQLite figure and the targets' ratios: medians of the rounds, ratios per round."""
    keys = max(*concurrencies, 8)
    build(scratch / "state.db", keys)
    cpus: list[dict[str, float]] = [{} for _ in range(args.rounds)]
    rounds = [
        sqlite_round(scratch, keys, args.turns, r, concurrencies, cpu=cpus[r])
        for r in range(args.rounds)
    ]

    def rate(name: str) -> float:
        return statistics.median(each[name] for each in rounds)

    def ratio(name: str, base: str) -> float:
        return statistics.median(each[name] / each[base] for each in rounds)

    print(f"medians of {args.rounds} rounds; ratios are medians of each round's ratio")
    print(f"raw sqlite3, one commit per turn:   {rate('raw 1'):8,.0f} turns/s")
    print(f"raw sqlite3, 64 turns per commit:   {rate('raw 64'):8,.0f} turns/s")
    for chats in concurrencies:
        on, off = f"async {chats} True", f"async {chats} False"
        threaded = f"async {chats} threaded"
        print(
            f"AsyncSessionStore, {chats:>3} chats: group commit {rate(on):8,.0f} turns/s, "
            f"without {rate(off):8,.0f}; {ratio(on, off):5.2f}x unbatched, "
            f"{ratio(on, 'raw 1'):5.2f}x raw one-commit, {ratio(on, 'raw 64'):5.2f}x raw 64-batched"
        )
        print(
            f"    threads only (before the writer): {rate(threaded):8,.0f} turns/s; the writer "
            f"gives {ratio(on, threaded):5.2f}x; threads only is {ratio(threaded, 'raw 1'):5.2f}x "
            "raw one-commit"
        )
        ledgered = f"ledger {chats}"
        print(
            f"    with the turn ledger (accept; answer with the reply): {rate(ledgered):8,.0f} "
            f"turns/s; {ratio(ledgered, on):5.2f}x the plain turn"
        )
    if args.breakdown and 64 in concurrencies:  # the target's case
        print("CPU per turn at 64 chats (ms, medians of the rounds):")
        names = ("event loop", "batcher", "reader", "process")
        cpu = {n: statistics.median(c.get(n, 0.0) for c in cpus) * 1e3 for n in names}
        # Per round, then the median; the clocks tick apart, so a difference near zero can
        # come out a hair below it.
        others = 1e3 * statistics.median(
            max(0.0, c.get("process", 0.0) - sum(c.get(n, 0.0) for n in names[:3])) for c in cpus
        )
        print(
            f"    event loop {cpu['event loop']:.3f}, writer {cpu['batcher']:.3f}, reader "
            f"{cpu['reader']:.3f}, other threads {others:.3f}; all {cpu['process']:.3f}"
        )
    print(
        f"SessionStore, 8 threads: group commit {rate('threads True'):8,.0f} turns/s, without "
        f"{rate('threads False'):8,.0f}; {ratio('threads True', 'threads False'):5.2f}x "
        f"unbatched, {ratio('threads True', 'raw 1'):5.2f}x raw one-commit"
    )
    if 64 in concurrencies:
        checks = (
            ("2x the raw one-commit loop", ratio("async 64 True", "raw 1"), 2.0),
            ("3x the store's unbatched rate", ratio("async 64 True", "async 64 False"), 3.0),
            ("0.5x the raw 64-batched loop", ratio("async 64 True", "raw 64"), 0.5),
        )
        for name, value, target in checks:
            verdict = "met" if value >= target else "MISSED"
            print(f"target at 64 chats, {name}: {value:.2f} (>= {target}): {verdict}")


def median_of(rounds: int, measure: Callable[[int], float]) -> float:
    """The median of ``rounds`` measurements (``measure(round)``)."""
    return statistics.median(measure(r) for r in range(rounds))


def measure_postgres(dsn: str, args: argparse.Namespace, concurrencies: tuple[int, ...]) -> None:
    """The async store on PostgreSQL at the same concurrencies (the server's own group commit)."""
    try:
        import psycopg  # noqa: PLC0415  # the postgres extra is optional

        from hermes_sessions.backends.postgres import PostgresBackend  # noqa: PLC0415
    except ImportError:
        print("postgres: the postgres extra is not installed; skipped")
        return
    schema = f"bench_concurrent_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        settings = {
            name: admin.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("commit_delay", "commit_siblings", "synchronous_commit")
        }
    print(f"postgres server settings: {settings}")
    try:
        backend_options: dict[str, Any] = {"schema": schema}

        def open_store() -> SessionStore:
            return SessionStore(PostgresBackend(dsn, **backend_options), resets=NEVER)

        with open_store() as store:
            for number in range(max(concurrencies)):
                store.get_or_create(source(number))
        base = None
        for chats in concurrencies:
            rate = median_of(
                args.rounds, lambda r, c=chats: async_turns(open_store, c, args.turns, f"p{c}-{r}")
            )
            base = base or rate
            print(
                f"postgres AsyncSessionStore, {chats:>3} chats: {rate:8,.0f} turns/s; "
                f"{rate / base:5.2f}x one chat"
            )
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run (CI)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per figure (median)")
    parser.add_argument("--turns", type=int, default=None, help="turns per measurement")
    parser.add_argument("--pg-dsn", default=None, help="also measure this PostgreSQL server")
    parser.add_argument("--breakdown", action="store_true", help="CPU per turn by thread")
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.turns = args.turns or (128 if args.quick else 1_024)
    concurrencies = (1, 8, 64) if args.quick else (1, 8, 64, 256)
    with tempfile.TemporaryDirectory() as scratch:
        measure_sqlite(Path(scratch), args, concurrencies)
    dsn = (
        args.pg_dsn
        or os.environ.get("HERMES_SESSIONS_TEST_PG_DSN")
        or os.environ.get("HERMES_SESSIONS_DSN")
    )
    if dsn:
        measure_postgres(dsn, args, concurrencies)
    else:
        print("postgres: no DSN (HERMES_SESSIONS_TEST_PG_DSN or --pg-dsn); skipped")


if __name__ == "__main__":
    main()
