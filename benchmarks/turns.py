"""Full turns per second on the SQLite store as the number of keys grows.

A turn is what a gateway does for each inbound message: ``get_or_create(source)`` (a read while
the session is fresh) and one ``append`` of the user message and the reply (one write that also
records activity). A *checked* turn adds the redelivery check a gateway makes before calling
the model, ``seen(session_id, platform_message_id)`` (one more indexed read), and passes the
call's ``usage`` to the same append (still one commit). The baseline is a
raw ``sqlite3`` loop in the same run storing the same data per turn: one indexed read (two when
checked), then one ``BEGIN IMMEDIATE`` transaction inserting two messages and their FTS5 rows
(same index definition, same tokens), updating the session's counters and the routing row, with
the same durability. A *stateful* turn is a checked turn whose append also carries a
``state_delta`` (the session's step and the lane's model): still one commit, which the run
verifies by counting the ``COMMIT`` statements SQLite sees; its raw loop also upserts the two
state rows in its transaction.

A *ledger* turn is the same turn with the turn ledger on (``SessionStore(..., ledger=True)``,
issue 40): ``ledger.accept`` stores the question with its ledger row (one commit, which also
recognises every redelivery), ``ledger.answer`` the reply with the row's new status and the
reply's send intent (the second commit). It is printed beside the checked turn (the plain turn
that also recognises redeliveries and carries usage), with its commits counted the same way:
at most two (issue 40's target); the plain stateful turn stays at one.

Run ``python benchmarks/turns.py`` (1,000, 10,000 and 100,000 keys; several minutes, most of it
spent creating the keys) or ``--quick`` for a smoke run. Targets (DESIGN §11, issues 21 and 39):
at least 1,000 turns/s at 100,000 keys with ``full`` durability, flat as keys grow; the checked
turn at least 0.85 of the raw loop's rate at ``full`` and 0.7 at ``normal`` durability, in at
most 150 Python calls (printed with the SQL statements per turn). ``concurrent_turns.py``
measures many chats at once.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_sessions import (
    Message,
    ResetPolicies,
    ResetPolicy,
    SessionSource,
    SessionStore,
    StateScope,
    Usage,
    text,
)
from hermes_sessions.backends.sqlite import SQLiteBackend

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data.encryption import encrypted as encrypt

if TYPE_CHECKING:
    from collections.abc import Callable

NEVER = ResetPolicies(ResetPolicy(mode="none"))
FULL_TARGET = 0.85
"""The checked turn's share of the raw loop's rate at ``full`` durability (issue 39, item 1)."""
NORMAL_TARGET = 0.7
"""The same at ``normal`` durability (WAL without an fsync per commit)."""


def source(number: int) -> SessionSource:
    """The conversation of key ``number``."""
    return SessionSource(
        platform="telegram", chat_id=str(100_000_000 + number), user_id=str(number)
    )


def open_backend(path: Path, durability: str, *, encrypted: bool) -> Any:
    """The SQLite backend on ``path``, under the benchmark cipher if ``encrypted``."""
    backend = SQLiteBackend(path, durability=durability)
    return encrypt(backend) if encrypted else backend


def build(path: Path, keys: int, *, encrypted: bool = False) -> None:
    """Create ``keys`` conversations through the store (fast durability: setup only)."""
    with SessionStore(open_backend(path, "normal", encrypted=encrypted), resets=NEVER) as store:
        for number in range(keys):
            store.get_or_create(source(number))


WARM_UP = 50
"""Untimed turns first: caches, lazily compiled patterns and the page cache settle."""


def store_turns(
    path: Path,
    keys: int,
    turns: int,
    seed: int,
    *,
    checked: bool = False,
    stateful: bool = False,
    encrypted: bool = False,
    durability: str = "full",
) -> float:
    """Turns per second through the store (``full`` durability unless told otherwise).

    ``checked``: with ``seen`` and usage; ``stateful``: checked, and with a state delta;
    ``encrypted``: on an encrypted store (built with ``build(..., encrypted=True)``).
    """
    checked = checked or stateful
    rng = random.Random(seed)
    picks = [rng.randrange(keys) for _ in range(turns + WARM_UP)]
    backend = open_backend(path, durability, encrypted=encrypted)
    with SessionStore(backend, resets=NEVER) as store:
        start = time.perf_counter()
        for n, number in enumerate(picks):
            if n == WARM_UP:
                start = time.perf_counter()
            lookup = store.get_or_create(source(number))
            if checked and store.seen(lookup.session_id, f"{seed}-{n}") is not None:
                raise AssertionError("a fresh message was reported as seen")
            store.append(
                lookup.session_id,
                Message(
                    role="user",
                    content=f"question {n} about staging",
                    platform_message_id=f"{seed}-{n}",
                ),
                Message(role="assistant", content=f"answer {n}: restart the youer container"),
                usage=Usage(input=120, output=30, cost_usd=0.001) if checked else None,
                state_delta={
                    StateScope.session(lookup.session_id): {"step": n},
                    StateScope.lane(lookup.entry.session_key): {"model": "m-1"},
                }
                if stateful
                else None,
            )
        elapsed = time.perf_counter() - start
    return turns / elapsed


def commits_per_turn(path: Path, keys: int, turns: int, seed: int) -> float:
    """``COMMIT`` statements SQLite runs per stateful turn (untimed: tracing slows it)."""
    commits = 0
    connect = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        def trace(statement: str) -> None:
            nonlocal commits
            commits += statement.lstrip().upper().startswith(("COMMIT", "END"))

        connection = connect(*args, **kwargs)
        connection.set_trace_callback(trace)
        return connection

    sqlite3.connect = counting  # type: ignore[assignment]
    try:
        with SessionStore(SQLiteBackend(path, durability="normal"), resets=NEVER) as store:
            lookups = [store.get_or_create(source(n % keys)) for n in range(turns)]
            commits = 0
            for n, lookup in enumerate(lookups):
                store.append(
                    lookup.session_id,
                    Message(role="user", content="q", platform_message_id=f"c{seed}-{n}"),
                    usage=Usage(input=1),
                    state_delta={StateScope.session(lookup.session_id): {"step": n}},
                )
    finally:
        sqlite3.connect = connect  # type: ignore[assignment]
    return commits / turns


CALLS_TARGET = 150
"""Python calls per checked turn the store should stay within (issue 39, item 1)."""


def turn_costs(path: Path, keys: int, turns: int, seed: int) -> tuple[float, float]:
    """Python calls and SQL statements per checked turn (untimed: the hooks slow it).

    Calls are what a profile hook sees (Python functions and C functions, as ``cProfile``
    counts them); statements are those the store sends to SQLite, ``BEGIN`` and ``COMMIT``
    included (not the ones FTS5 runs on its own tables, which the raw loop causes too).
    Measured after a warm-up, at ``normal`` durability.
    """
    statements = 0
    connect = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        def trace(statement: str) -> None:
            nonlocal statements
            statements += not statement.startswith("--")  # not FTS5's own or a trigger's

        connection = connect(*args, **kwargs)
        connection.set_trace_callback(trace)
        return connection

    calls = 0

    def count(_frame: object, event: str, _arg: object) -> None:
        nonlocal calls
        calls += event in {"call", "c_call"}

    sqlite3.connect = counting  # type: ignore[assignment]
    try:
        with SessionStore(SQLiteBackend(path, durability="normal"), resets=NEVER) as store:
            for n in range(2 * turns):
                if n == turns:  # warmed up: count from here
                    calls = statements = 0
                    sys.setprofile(count)
                lookup = store.get_or_create(source(n % keys))
                store.seen(lookup.session_id, f"p{seed}-{n}")
                store.append(
                    lookup.session_id,
                    Message(role="user", content=f"q {n}", platform_message_id=f"p{seed}-{n}"),
                    Message(role="assistant", content=f"a {n}"),
                    usage=Usage(input=120, output=30, cost_usd=0.001),
                )
            sys.setprofile(None)
    finally:
        sys.setprofile(None)
        sqlite3.connect = connect  # type: ignore[assignment]
    return calls / turns, statements / turns


def ledger_turns(path: Path, keys: int, turns: int, seed: int) -> float:
    """Turns per second with the turn ledger: accept (one commit), answer (one commit)."""
    rng = random.Random(seed)
    picks = [rng.randrange(keys) for _ in range(turns + WARM_UP)]
    with SessionStore(
        open_backend(path, "full", encrypted=False), resets=NEVER, ledger=True
    ) as store:
        ledger = store.ledger
        start = time.perf_counter()
        for n, number in enumerate(picks):
            if n == WARM_UP:
                start = time.perf_counter()
            pmid = f"{seed}-{n}"
            question = Message(
                role="user", content=f"question {n} about staging", platform_message_id=pmid
            )
            accepted = ledger.accept(source(number), question, holder="bench")
            if accepted.inbound is None or accepted.duplicate:
                raise AssertionError("a fresh message was reported as a duplicate")
            ledger.answer(
                accepted.inbound.session_key,
                pmid,
                Message(role="assistant", content=f"answer {n}: restart the youer container"),
                holder="bench",
                usage=Usage(input=120, output=30, cost_usd=0.001),
            )
        elapsed = time.perf_counter() - start
    return turns / elapsed


def commits_per_ledger_turn(path: Path, keys: int, turns: int, seed: int) -> float:
    """``COMMIT`` statements per ledger turn (accept, then answer with its send intent)."""
    commits = 0
    connect = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        def trace(statement: str) -> None:
            nonlocal commits
            commits += statement.lstrip().upper().startswith(("COMMIT", "END"))

        connection = connect(*args, **kwargs)
        connection.set_trace_callback(trace)
        return connection

    sqlite3.connect = counting  # type: ignore[assignment]
    try:
        backend = SQLiteBackend(path, durability="normal")
        with SessionStore(backend, resets=NEVER, ledger=True) as store:
            for n in range(keys):
                store.get_or_create(source(n))
            commits = 0
            for n in range(turns):
                pmid = f"l{seed}-{n}"
                question = Message(role="user", content="q", platform_message_id=pmid)
                accepted = store.ledger.accept(source(n % keys), question, holder="bench")
                assert accepted.inbound is not None  # noqa: S101  # a fresh message
                reply = Message(role="assistant", content="a")
                store.ledger.answer(accepted.inbound.session_key, pmid, reply, holder="bench")
    finally:
        sqlite3.connect = connect  # type: ignore[assignment]
    return commits / turns


def raw_turns(
    path: Path,
    keys: int,
    turns: int,
    seed: int,
    *,
    checked: bool = False,
    stateful: bool = False,
    batch: int = 1,
    durability: str = "full",
) -> float:
    """Turns per second of a raw sqlite3 loop storing the same data with the same commits.

    ``batch``: turns per transaction (1: one commit per turn, like the store without company;
    more: the ideal a group commit approaches, used by ``concurrent_turns.py``).

    The same tables a turn needs (routing rows indexed by session, sessions with counters,
    messages with a JSON body and a unique platform id per session, and the same FTS5 index
    definition over the same token stream), written with plain statements. Message bodies and
    tokens are prepared before the clock starts, so the ratio is the library's whole overhead.
    """
    checked = checked or stateful
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={durability.upper()}")
    connection.executescript(
        """
        CREATE TABLE entries (key TEXT PRIMARY KEY, session_id TEXT, updated_at INTEGER);
        CREATE INDEX entries_session ON entries (session_id);
        CREATE TABLE sessions (id TEXT PRIMARY KEY, message_count INTEGER, last_active INTEGER,
                               input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,
                               role TEXT, timestamp INTEGER, platform_id TEXT, body TEXT);
        CREATE INDEX messages_session ON messages (session_id, id);
        CREATE UNIQUE INDEX messages_platform ON messages (session_id, platform_id)
            WHERE platform_id IS NOT NULL;
        CREATE VIRTUAL TABLE messages_fts USING fts5 (tokens, tokenize = 'ascii', prefix = '1');
        CREATE TABLE state (scope TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        """
    )
    connection.execute("BEGIN")
    connection.executemany(
        "INSERT INTO entries VALUES (?, ?, 0)", ((f"k{n}", f"s{n}") for n in range(keys))
    )
    connection.executemany(
        "INSERT INTO sessions VALUES (?, 0, 0, 0, 0)", ((f"s{n}",) for n in range(keys))
    )
    connection.execute("COMMIT")
    rng = random.Random(seed)
    picks = [rng.randrange(keys) for _ in range(turns + WARM_UP)]
    prepared = []
    for n in range(turns + WARM_UP):
        pair = []
        for role, content, platform_id in (
            ("user", f"question {n} about staging", f"{seed}-{n}"),
            ("assistant", f"answer {n}: restart the youer container", None),
        ):
            body = json.dumps({"role": role, "content": content, "timestamp": "2026-05-12T01:00Z"})
            tokens = " ".join(text.index_tokens(content))
            pair.append((role, platform_id, body, tokens))
        prepared.append(pair)
    start = time.perf_counter()
    for n, number in enumerate(picks):
        if n == WARM_UP:
            start = time.perf_counter()
        (session_id,) = connection.execute(
            "SELECT session_id FROM entries WHERE key = ?", (f"k{number}",)
        ).fetchone()
        if checked:
            connection.execute(
                "SELECT id FROM messages WHERE session_id = ? AND platform_id = ?",
                (session_id, prepared[n][0][1]),
            ).fetchone()
        if n % batch == 0:
            connection.execute("BEGIN IMMEDIATE")
        for role, platform_id, body, tokens in prepared[n]:
            cursor = connection.execute(
                "INSERT INTO messages (session_id, role, timestamp, platform_id, body) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, role, n, platform_id, body),
            )
            connection.execute(
                "INSERT INTO messages_fts (rowid, tokens) VALUES (?, ?)", (cursor.lastrowid, tokens)
            )
        connection.execute(
            "UPDATE sessions SET message_count = message_count + 2, last_active = ?, "
            "input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE id = ?",
            (n, 120 if checked else 0, 30 if checked else 0, session_id),
        )
        connection.execute(
            "UPDATE entries SET updated_at = max(updated_at, ?) WHERE session_id = ?",
            (n, session_id),
        )
        if stateful:
            _raw_state(connection, session_id, n)
        if (n + 1) % batch == 0 or n + 1 == len(picks):
            connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    return turns / elapsed


def _raw_state(connection: sqlite3.Connection, session_id: str, n: int) -> None:
    """The stateful turn's state rows: the session's step and the lane's model."""
    for scope, value in ((f"session|{session_id}", {"step": n}), (f"lane|k{session_id}", {})):
        (stored,) = connection.execute(
            "SELECT coalesce((SELECT value FROM state WHERE scope = ?), '{}')", (scope,)
        ).fetchone()
        merged = json.loads(stored) | (value or {"model": "m-1"})
        connection.execute(
            "INSERT INTO state VALUES (?, ?) "
            "ON CONFLICT (scope) DO UPDATE SET value = excluded.value",
            (scope, json.dumps(merged)),
        )


def paired(
    ours: Callable[[int], float], raw: Callable[[int], float], rounds: int
) -> tuple[float, float, float]:
    """Medians of the store's rate, the raw loop's and of their ratio, round by round.

    Each round measures the store, then the raw loop, back to back, so that the load of a
    shared machine hits both sides of a ratio alike.
    """
    pairs = [(ours(r), raw(r)) for r in range(rounds)]
    return (
        statistics.median(a for a, _ in pairs),
        statistics.median(b for _, b in pairs),
        statistics.median(a / b for a, b in pairs),
    )


def print_ledger_turn(db: Path, keys: int, turns: int, rounds: int) -> None:
    """The ledger turn beside the plain checked turn, on the same database (issue 40)."""
    ours, plain, ratio = paired(
        lambda r: ledger_turns(db, keys, turns, seed=keys + 70 + r),
        lambda r: store_turns(db, keys, turns, seed=keys + 80 + r, checked=True),
        rounds,
    )
    print(
        f"{keys:>7,} keys, ledger (accept; answer with the reply and its send intent): "
        f"{ours:7,.0f} turns/s; plain checked turn {plain:7,.0f}; ratio {ratio:.2f}"
    )


def print_commits() -> None:
    """Commits per stateful turn (target 1) and per ledger turn (target 2); exit 1 above them."""
    with tempfile.TemporaryDirectory() as scratch:
        per_turn = commits_per_turn(Path(scratch) / "state.db", 20, 200, seed=7)
        print(f"commits per stateful turn (state_delta + usage + messages): {per_turn:.2f}")
        per_ledger = commits_per_ledger_turn(Path(scratch) / "ledger.db", 20, 200, seed=7)
        print(f"commits per ledger turn (accept; answer): {per_ledger:.2f} (target <= 2)")
    if per_turn > 1 or per_ledger > 2:  # the targets printed above
        raise SystemExit("a turn took more commits than its target")


def main() -> None:
    """Build, measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke tests")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per figure (median)")
    parser.add_argument("--sizes", default=None, help="key counts, comma-separated")
    args = parser.parse_args()
    sizes = (100, 1_000) if args.quick else (1_000, 10_000, 100_000)
    if args.sizes:
        sizes = tuple(int(size) for size in args.sizes.split(","))
    turns = 300 if args.quick else 3_000
    rounds = args.rounds or (2 if args.quick else 5)
    rates: dict[int, float] = {}
    print(f"medians of {rounds} rounds; each ratio is the median of the rounds' ratios")
    with tempfile.TemporaryDirectory() as scratch:
        for keys in sizes:
            folder = Path(scratch) / f"k{keys}"
            folder.mkdir()
            started = time.perf_counter()
            build(folder / "state.db", keys)
            built = time.perf_counter() - started
            db = folder / "state.db"
            ours, raw, ratio = paired(
                lambda r, k=keys, db=db: store_turns(db, k, turns, seed=k + r),
                lambda r, k=keys, folder=folder: raw_turns(
                    folder / f"raw{r}.db", k, turns, seed=k + r
                ),
                rounds,
            )
            rates[keys] = ours
            print(
                f"{keys:>7,} keys: {ours:7,.0f} turns/s through the store; raw sqlite3 loop "
                f"{raw:7,.0f} turns/s; ratio {ratio:.2f} (target >= 0.7); "
                f"built in {built:.1f} s"
            )
            ours_c, raw_c, ratio_c = paired(
                lambda r, k=keys, db=db: store_turns(db, k, turns, seed=k + 10 + r, checked=True),
                lambda r, k=keys, folder=folder: raw_turns(
                    folder / f"rawc{r}.db", k, turns, seed=k + r, checked=True
                ),
                rounds,
            )
            mark = "pass" if ratio_c >= FULL_TARGET else "MISS"
            print(
                f"{keys:>7,} keys, checked (seen + append with usage): {ours_c:7,.0f} turns/s; raw "
                f"{raw_c:7,.0f}; ratio {ratio_c:.2f} (target >= {FULL_TARGET} at full): {mark}; "
                f"cost of the check {ours_c / ours:.2f}x the unchecked rate"
            )
            ours_n, raw_n, ratio_n = paired(
                lambda r, k=keys, db=db: store_turns(
                    db, k, turns, seed=k + 50 + r, checked=True, durability="normal"
                ),
                lambda r, k=keys, folder=folder: raw_turns(
                    folder / f"rawn{r}.db", k, turns, seed=k + r, checked=True, durability="normal"
                ),
                rounds,
            )
            mark = "pass" if ratio_n >= NORMAL_TARGET else "MISS"
            print(
                f"{keys:>7,} keys, checked, durability normal: {ours_n:7,.0f} turns/s; raw "
                f"{raw_n:7,.0f}; ratio {ratio_n:.2f} (target >= {NORMAL_TARGET}): {mark}"
            )
            ours_s, raw_s, ratio_s = paired(
                lambda r, k=keys, db=db: store_turns(db, k, turns, seed=k + 20 + r, stateful=True),
                lambda r, k=keys, folder=folder: raw_turns(
                    folder / f"raws{r}.db", k, turns, seed=k + r, stateful=True
                ),
                rounds,
            )
            print(
                f"{keys:>7,} keys, stateful (checked + state_delta): {ours_s:7,.0f} turns/s; raw "
                f"{raw_s:7,.0f}; ratio {ratio_s:.2f}; "
                f"{ours_s / ours_c:.2f}x the checked rate"
            )
            print_ledger_turn(db, keys, turns, rounds)
            sealed = folder / "encrypted.db"
            build(sealed, keys, encrypted=True)
            ours_e, plain_e, ratio_e = paired(
                lambda r, k=keys, db=sealed: store_turns(
                    db, k, turns, seed=k + 30 + r, stateful=True, encrypted=True
                ),
                lambda r, k=keys, db=db: store_turns(db, k, turns, seed=k + 40 + r, stateful=True),
                rounds,
            )
            print(
                f"{keys:>7,} keys, stateful, encrypted (AES-GCM + token hashes): {ours_e:7,.0f} "
                f"turns/s; plain {plain_e:7,.0f}; ratio {ratio_e:.2f}"
            )
    print_commits()
    with tempfile.TemporaryDirectory() as scratch:
        calls, statements = turn_costs(Path(scratch) / "state.db", 20, 50, seed=9)
        mark = "pass" if calls <= CALLS_TARGET else "MISS"
        print(
            f"per checked turn: {calls:.0f} Python calls (target <= {CALLS_TARGET}): {mark}; "
            f"{statements:.1f} SQL statements (the raw loop: 10)"
        )
    low, high = sizes[0], sizes[-1]
    print(
        f"flatness: {rates[high]:,.0f} turns/s at {high:,} keys vs {rates[low]:,.0f} at "
        f"{low:,} keys: ratio {rates[high] / rates[low]:.2f} (flat = about 1.0)"
    )
    if not args.quick and high >= 100_000:
        verdict = "met" if rates[high] >= 1_000 else "MISSED"
        print(f"target: >= 1,000 turns/s at {high:,} keys with full durability: {verdict}")


if __name__ == "__main__":
    main()
