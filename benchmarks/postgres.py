"""PostgreSQL beside SQLite in one run: turns/s, search latency, turns/s with 1, 4 and 8 clients.

A turn is ``get_or_create(source)`` then one ``append`` of the user message and the reply (which
records activity), through ``SessionStore``, with each backend's default durability (SQLite
``full``: an fsync per commit; PostgreSQL: whatever the server does, ``fsync`` and
``synchronous_commit`` on by default). Search runs the same queries (Latin words, a phrase, CJK of
one, two and three characters, ``OR``, ``NOT``; ``rank`` order, 10 hits) on the same corpus.
The client scaling part starts 1, 4 and 8 processes (spawned, each with its own store) doing
turns on shared keys and reports the aggregate rate: PostgreSQL should scale with clients where
SQLite's single writer cannot (on a machine with few cores, both are bounded by the CPU).

It needs a server: the DSN comes from ``HERMES_SESSIONS_TEST_PG_DSN`` (CI sets it) or
``HERMES_SESSIONS_DSN``; without one (or without the ``postgres`` extra) it says so and exits 0.
It also counts the round trips to the server of a turn and of a checked turn (``seen`` and
usage too; target at most 11, issue 39), and compares the checked turn with a raw psycopg loop
making the same reads and writes (target 0.8 of its rate). Tables go into a fresh schema,
dropped at the end. ``--quick`` is a smoke run of a few seconds.

    python benchmarks/postgres.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_sessions import Message, ResetPolicies, ResetPolicy, SessionSource, SessionStore
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.queries import SearchQuery

NEVER = ResetPolicies(ResetPolicy(mode="none"))
QUERIES = [
    "staging",
    "restart container",
    '"youer container"',
    "部",
    "部署",
    "机器人",
    "redis OR helm",
    "docker -helm",
]
WORDS = "docker staging redis helm container restart deploy network youer config".split()
CJK = ["飞书机器人", "部署失败", "服务端配置", "修改youer服务端", "机器学习"]


def dsn_from_env() -> str | None:
    """The server to measure, or ``None``."""
    return os.environ.get("HERMES_SESSIONS_TEST_PG_DSN") or os.environ.get("HERMES_SESSIONS_DSN")


def source(number: int) -> SessionSource:
    """The conversation of key ``number``."""
    return SessionSource(platform="telegram", chat_id=str(100_000 + number), user_id=str(number))


def open_backend(kind: str, where: str) -> Any:
    """The backend ``kind`` on ``where`` (a database file, or ``dsn|schema``)."""
    if kind == "sqlite":
        return SQLiteBackend(Path(where))
    from hermes_sessions.backends.postgres import PostgresBackend  # noqa: PLC0415

    dsn, schema = where.split("|", 1)
    return PostgresBackend(dsn, schema=schema, min_size=1, max_size=2)


def turns(kind: str, where: str, work: tuple[int, int, int]) -> float:
    """Run ``work`` = (keys, count, seed): ``count`` turns on random keys; return the seconds."""
    keys, count, seed = work
    rng = random.Random(seed)
    with SessionStore(open_backend(kind, where), resets=NEVER) as store:
        for number in range(min(keys, 20)):  # warm-up: connections, caches, compiled patterns
            store.get_or_create(source(number))
        start = time.perf_counter()
        _turns(store, rng, keys, count, seed)
        return time.perf_counter() - start


def _turns(store: SessionStore, rng: random.Random, keys: int, count: int, seed: int) -> None:
    for n in range(count):
        lookup = store.get_or_create(source(rng.randrange(keys)))
        store.append(
            lookup.session_id,
            Message(
                role="user",
                content=f"question {n} about staging",
                platform_message_id=f"{seed}-{n}",
            ),
            Message(role="assistant", content=f"answer {n}: restart the youer container"),
        )


def client(kind: str, where: str, work: tuple[int, int, int], go: Any, times: Any) -> None:
    """One client process: warm up, wait for ``go``, run the turns, report (start, end)."""
    keys, count, seed = work
    rng = random.Random(seed)
    with SessionStore(open_backend(kind, where), resets=NEVER) as store:
        store.get_or_create(source(0))
        times.put(None)  # ready
        go.wait()
        start = time.perf_counter()
        _turns(store, rng, keys, count, seed)
        times.put((start, time.perf_counter()))


def clients(kind: str, where: str, keys: int, count: int, processes: int) -> float:
    """Aggregate turns/s of ``processes`` clients doing ``count`` turns each at the same time."""
    context = multiprocessing.get_context("spawn")
    go, times = context.Event(), context.Queue()
    workers = [
        context.Process(
            target=client, args=(kind, where, (keys, count, 1000 * processes + p), go, times)
        )
        for p in range(processes)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        times.get(timeout=120)
    go.set()
    spans = [times.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    if any(worker.exitcode for worker in workers):
        raise RuntimeError(f"a {kind} client failed")
    elapsed = max(end for _, end in spans) - min(start for start, _ in spans)
    return processes * count / elapsed


def corpus(store: SessionStore, messages: int) -> None:
    """Fill a store with ``messages`` mixed-language messages in sessions of 100."""
    rng = random.Random(7)
    for first in range(0, messages, 100):
        session_id = store.get_or_create(source(10_000 + first)).session_id
        batch = []
        for _ in range(min(100, messages - first)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
            words.insert(rng.randrange(len(words)), rng.choice(CJK))
            batch.append(Message(role=rng.choice(["user", "assistant"]), content=" ".join(words)))
        store.append(session_id, *batch)


def search_latency(store: SessionStore, repeats: int) -> dict[str, float]:
    """Median milliseconds of each query (rank order, 10 hits)."""
    result = {}
    for query in QUERIES:
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            store.backend.search(SearchQuery(text=query, limit=10))  # type: ignore[attr-defined]
            samples.append((time.perf_counter() - start) * 1000)
        result[query] = statistics.median(samples)
    return result


def drop(dsn: str, schema: str) -> None:
    """Drop the benchmark's schema."""
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


def report_turns(where: dict[str, str], keys: int, count: int) -> None:
    """Turns per second with one client, on both engines."""
    rates = {kind: count / turns(kind, place, (keys, count, 1)) for kind, place in where.items()}
    print(f"turns/s, 1 client, {keys} keys, {count} turns:")
    for kind, rate in rates.items():
        print(f"  {kind:8} {rate:9.0f}")
    print(f"  postgres/sqlite ratio: {rates['postgres'] / rates['sqlite']:.2f}")


ROUND_TRIPS_TARGET = 11
"""Round trips per checked PostgreSQL turn to stay within (issue 39, item 3)."""


def round_trips(where: str, keys: int, turns: int) -> tuple[float, float]:
    """Round trips to the server per turn and per checked turn (``seen`` and usage too).

    Every connection the backend opens traces its protocol messages (libpq's ``PQtrace``) into
    one file; a round trip is one ``ReadyForQuery`` the server sends, the point where the client
    waits for the server. Untimed.
    """
    import psycopg  # noqa: PLC0415

    from hermes_sessions import Usage  # noqa: PLC0415

    with tempfile.NamedTemporaryFile("a", suffix=".trace") as trace:
        connect = psycopg.Connection.connect

        def traced(*args: Any, **kwargs: Any) -> Any:
            connection = connect(*args, **kwargs)
            connection.pgconn.trace(trace.fileno())
            connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            return connection

        def waits() -> int:
            trace.flush()
            with open(trace.name, encoding="utf-8", errors="replace") as lines:  # noqa: PTH123
                return sum("\tReadyForQuery" in line for line in lines)

        psycopg.Connection.connect = traced  # type: ignore[method-assign]
        try:
            with SessionStore(open_backend("postgres", where), resets=NEVER) as store:
                for number in range(keys):
                    store.get_or_create(source(number))
                per_turn = []
                for checked in (False, True):
                    start = waits()
                    for n in range(turns):
                        lookup = store.get_or_create(source(n % keys))
                        pid = f"rt{int(checked)}-{n}"
                        if checked:
                            store.seen(lookup.session_id, pid)
                        store.append(
                            lookup.session_id,
                            Message(role="user", content=f"q {n}", platform_message_id=pid),
                            Message(role="assistant", content=f"a {n}"),
                            usage=Usage(input=120, output=30) if checked else None,
                        )
                    per_turn.append((waits() - start) / turns)
        finally:
            psycopg.Connection.connect = connect  # type: ignore[method-assign]
    return per_turn[0], per_turn[1]


def report_round_trips(where: str, keys: int, turns: int) -> None:
    """Print the round trips of a turn and of a checked turn, with the target's mark."""
    plain, checked = round_trips(where, keys, turns)
    mark = "pass" if checked <= ROUND_TRIPS_TARGET else "MISS"
    print(
        f"round trips to the server: {plain:.1f} per turn (get_or_create + append), "
        f"{checked:.1f} per checked turn (+ seen, usage; target <= {ROUND_TRIPS_TARGET}): {mark}"
    )


PG_RATIO_TARGET = 0.8
"""The checked PostgreSQL turn's share of the raw psycopg loop's rate (issue 39, item 3)."""

RAW_SCHEMA = """
CREATE TABLE {s}.entries (key text PRIMARY KEY, session_id text NOT NULL,
                          updated_at timestamptz NOT NULL);
CREATE TABLE {s}.sessions (seq bigserial PRIMARY KEY, id text UNIQUE NOT NULL,
                           message_count bigint NOT NULL DEFAULT 0,
                           next_message_id bigint NOT NULL DEFAULT 1,
                           last_active_at timestamptz, input_tokens bigint NOT NULL DEFAULT 0,
                           output_tokens bigint NOT NULL DEFAULT 0);
CREATE TABLE {s}.messages (session_seq bigint NOT NULL, id bigint NOT NULL, role text NOT NULL,
                           timestamp timestamptz, platform_message_id text, body text NOT NULL,
                           PRIMARY KEY (session_seq, id));
CREATE UNIQUE INDEX ON {s}.messages (session_seq, platform_message_id)
    WHERE platform_message_id IS NOT NULL;
CREATE TABLE {s}.message_text (session_seq bigint NOT NULL, message_id bigint NOT NULL,
                               tsv tsvector NOT NULL, PRIMARY KEY (session_seq, message_id));
CREATE INDEX ON {s}.message_text USING gin (tsv);
"""


def raw_checked_turns(dsn: str, schema: str, keys: int, count: int, seed: int) -> float:
    """Turns per second of a raw psycopg loop making the checked turn's reads and writes.

    Per turn: the routing row, the redelivery check, then one transaction locking the session
    row for two message ids, inserting both messages and their search rows (the library's
    tokens as an explicit ``tsvector``, prepared before the clock starts), adding the counters
    and usage, and moving the routing row's activity. Autocommit and no prepared statements,
    like the backend.
    """
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    from hermes_sessions import text  # noqa: PLC0415

    def q(template: str) -> str:
        return sql.SQL(template).format(s=sql.Identifier(schema)).as_string(None)

    rng = random.Random(seed)
    picks = [rng.randrange(keys) for _ in range(count)]
    prepared = []
    for n in range(count):
        pair = []
        for role, content in (("user", f"question {n} about staging"), ("assistant", f"a {n}")):
            lexemes = " ".join(
                f"'{token}':{place}" for place, token in enumerate(text.index_tokens(content), 1)
            )
            body = json.dumps({"role": role, "content": content, "timestamp": "2026-05-12T01Z"})
            pair.append((role, body, lexemes))
        prepared.append(pair)
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as connection:
        connection.execute(q(f"CREATE SCHEMA {{s}}; {RAW_SCHEMA}"))
        with connection.transaction():
            for number in range(keys):
                connection.execute(
                    q("INSERT INTO {s}.entries VALUES (%s, %s, now())"),
                    (f"k{number}", f"s{number}"),
                )
                connection.execute(q("INSERT INTO {s}.sessions (id) VALUES (%s)"), (f"s{number}",))
        entry = q("SELECT session_id FROM {s}.entries WHERE key = %s")
        seen = q(
            "SELECT m.id FROM {s}.messages AS m JOIN {s}.sessions AS s ON s.seq = m.session_seq "
            "WHERE s.id = %s AND m.platform_message_id = %s"
        )
        lock = q(
            "UPDATE {s}.sessions SET next_message_id = next_message_id + 2 WHERE id = %s "
            "RETURNING seq, next_message_id - 2"
        )
        insert = q(
            "INSERT INTO {s}.messages VALUES (%s, %s, %s, now(), %s, %s), "
            "(%s, %s, %s, now(), NULL, %s)"
        )
        index = q(
            "INSERT INTO {s}.message_text VALUES (%s, %s, %s::tsvector), (%s, %s, %s::tsvector)"
        )
        counters = q(
            "UPDATE {s}.sessions SET message_count = message_count + 2, last_active_at = now(), "
            "input_tokens = input_tokens + 120, output_tokens = output_tokens + 30 WHERE seq = %s"
        )
        touch = q(
            "UPDATE {s}.entries SET updated_at = greatest(updated_at, now()) WHERE session_id = %s"
        )
        start = time.perf_counter()
        for n, number in enumerate(picks):
            (session_id,) = connection.execute(entry, (f"k{number}",)).fetchone()  # type: ignore[misc]
            platform_id = f"{seed}-{n}"
            connection.execute(seen, (session_id, platform_id)).fetchone()
            (user_role, user_body, user_tsv), (reply_role, reply_body, reply_tsv) = prepared[n]
            with connection.transaction():
                seq, first = connection.execute(lock, (session_id,)).fetchone()  # type: ignore[misc]
                rows = (seq, first, user_role, platform_id, user_body)
                connection.execute(insert, (*rows, seq, first + 1, reply_role, reply_body))
                connection.execute(index, (seq, first, user_tsv, seq, first + 1, reply_tsv))
                connection.execute(counters, (seq,))
                connection.execute(touch, (session_id,))
        return count / (time.perf_counter() - start)


def store_checked_turns(where: str, keys: int, count: int, seed: int) -> float:
    """Turns per second of the checked turn through the store (``seen`` and usage too)."""
    from hermes_sessions import Usage  # noqa: PLC0415

    rng = random.Random(seed)
    with SessionStore(open_backend("postgres", where), resets=NEVER) as store:
        for number in range(keys):
            store.get_or_create(source(number))
        start = time.perf_counter()
        for n in range(count):
            lookup = store.get_or_create(source(rng.randrange(keys)))
            platform_id = f"{seed}-{n}"
            store.seen(lookup.session_id, platform_id)
            store.append(
                lookup.session_id,
                Message(
                    role="user",
                    content=f"question {n} about staging",
                    platform_message_id=platform_id,
                ),
                Message(role="assistant", content=f"a {n}"),
                usage=Usage(input=120, output=30),
            )
        return count / (time.perf_counter() - start)


def report_raw_ratio(dsn: str, keys: int, count: int, rounds: int) -> None:
    """The checked turn through the store against the raw psycopg loop, paired rounds."""
    ratios, ours, raws = [], [], []
    for round_ in range(rounds):
        names = [f"hs_bench_{secrets.token_hex(4)}_{kind}" for kind in ("store", "raw")]
        try:
            ours.append(store_checked_turns(f"{dsn}|{names[0]}", keys, count, seed=round_))
            raws.append(raw_checked_turns(dsn, names[1], keys, count, seed=round_))
        finally:
            for name in names:
                drop(dsn, name)
        ratios.append(ours[-1] / raws[-1])
    ratio = statistics.median(ratios)
    mark = "pass" if ratio >= PG_RATIO_TARGET else "MISS"
    print(
        f"checked turn, PostgreSQL, {keys} keys, medians of {rounds} paired rounds: store "
        f"{statistics.median(ours):.0f} turns/s, raw psycopg loop {statistics.median(raws):.0f}; "
        f"ratio {ratio:.2f} (target >= {PG_RATIO_TARGET}): {mark}"
    )


def report_search(where: dict[str, str], messages: int, repeats: int) -> None:
    """Median search latency per query class, on both engines over the same corpus."""
    latencies = {}
    for kind, place in where.items():
        with SessionStore(open_backend(kind, place), resets=NEVER) as store:
            corpus(store, messages)
            latencies[kind] = search_latency(store, repeats)
    print(f"search, median ms over {repeats} runs, {messages} messages, 10 hits by rank:")
    for query in QUERIES:
        pg, lite = latencies["postgres"][query], latencies["sqlite"][query]
        print(f"  {query!r:22} postgres {pg:7.2f}  sqlite {lite:7.2f}  ratio {pg / lite:5.2f}")
    ratio = statistics.geometric_mean(
        latencies["postgres"][q] / latencies["sqlite"][q] for q in QUERIES
    )
    print(f"  postgres/sqlite latency ratio (geometric mean): {ratio:.2f}")


def report_clients(where: dict[str, str], keys: int, scale_counts: dict[int, int]) -> None:
    """Turns per second with 1, 4 and 8 client processes on shared keys."""
    for kind, place in where.items():
        with SessionStore(open_backend(kind, place), resets=NEVER) as store:
            for number in range(keys):
                store.get_or_create(source(number))
    print(f"turns/s with several client processes ({os.cpu_count()} CPUs), {keys} shared keys:")
    scaled: dict[str, dict[int, float]] = {"sqlite": {}, "postgres": {}}
    for processes, per_client in scale_counts.items():
        for kind, place in where.items():
            scaled[kind][processes] = clients(kind, place, keys, per_client, processes)
        pg, lite = scaled["postgres"][processes], scaled["sqlite"][processes]
        pg_scale, lite_scale = pg / scaled["postgres"][1], lite / scaled["sqlite"][1]
        print(
            f"  {processes} clients: postgres {pg:7.0f}  sqlite {lite:7.0f}  "
            f"postgres/sqlite {pg / lite:5.2f}  postgres vs 1 client {pg_scale:5.2f}  "
            f"sqlite vs 1 client {lite_scale:5.2f}"
        )


def main() -> int:
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds (CI)")
    args = parser.parse_args()
    dsn = dsn_from_env()
    if dsn is None:
        print(
            "postgres benchmark skipped: set HERMES_SESSIONS_TEST_PG_DSN (or HERMES_SESSIONS_DSN)"
        )
        return 0
    try:
        import psycopg  # noqa: F401, PLC0415
    except ImportError:
        print("postgres benchmark skipped: install the 'postgres' extra (psycopg, psycopg_pool)")
        return 0
    keys, count, messages, repeats = (
        (50, 150, 2_000, 5) if args.quick else (1_000, 2_000, 50_000, 25)
    )
    scale_counts = {1: 60, 4: 30, 8: 20} if args.quick else {1: 1_000, 4: 500, 8: 300}
    with tempfile.TemporaryDirectory() as home:
        schemas = []

        def places(label: str) -> dict[str, str]:
            schema = f"hs_bench_{secrets.token_hex(4)}_{label}"
            schemas.append(schema)
            return {"sqlite": str(Path(home) / f"{label}.db"), "postgres": f"{dsn}|{schema}"}

        try:
            report_turns(places("turns"), keys, count)
            report_round_trips(places("trips")["postgres"], 20, 50)
            report_raw_ratio(dsn, keys, count // 2, 3 if args.quick else 5)
            report_search(places("search"), messages, repeats)
            report_clients(places("clients"), keys, scale_counts)
        finally:
            for schema in schemas:
                drop(dsn, schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())
