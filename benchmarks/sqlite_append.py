"""Batch append throughput of SQLiteBackend against raw sqlite3 executemany into FTS5.

Every side writes the same generated messages (English, Chinese, Japanese, mixed) in batches of
100, one transaction per batch, to a fresh WAL database with synchronous=FULL:

* the backend: ``append_messages(session, batch)`` — models to JSON rows, idempotency lookups,
  counters, time bounds, and the CJK-aware token stream computed and indexed in FTS5;
* the raw baseline: ``executemany`` of the same rows (JSON bodies and token streams computed
  before the clock starts) into the same two tables — the messages table and the same FTS5
  table — then COMMIT. The ratio against it is the library's overhead; the target (DESIGN §11)
  is at least 0.5;
* for information, a naive raw table: the content in an FTS5 table with the default tokenizer.
  It writes far fewer index entries (a CJK run is one token, which is why it cannot find one or
  two characters inside a run), so it is not a like-for-like baseline.

The backend and the like-for-like baseline each run twice, alternating, on fresh files; the
faster round of each counts.

    python benchmarks/sqlite_append.py --quick   # 20,000 messages
    python benchmarks/sqlite_append.py           # 200,000 messages
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data.corpus import Corpus

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.sqlite._rows import message_body, to_us
from hermes_sessions.backends.sqlite._schema import message_tokens
from hermes_sessions.models import Message, SessionRecord

BATCH = 100


def batches(total: int) -> list[list[tuple[str, str, object]]]:
    """The messages to write, generated up front so neither side pays for generation."""
    corpus = Corpus()
    rows = [row for _n, _source, session in corpus.sessions(total) for row in session]
    rng = random.Random(1)
    rng.shuffle(rows)  # mix languages within every batch
    return [rows[start : start + BATCH] for start in range(0, len(rows), BATCH)]


def backend_rate(directory: Path, work: list[list[tuple[str, str, object]]]) -> float:
    """Messages per second through ``SQLiteBackend.append_messages``."""
    with SQLiteBackend(directory / "state.db") as backend:
        started_at = work[0][0][2]
        for number in range(len(work)):
            backend.create_session(
                SessionRecord(id=f"s{number}", source="telegram", started_at=started_at)
            )
        batches_of_messages = [
            [Message(role=role, content=body, timestamp=at) for role, body, at in batch]
            for batch in work
        ]
        started = time.perf_counter()
        for number, messages in enumerate(batches_of_messages):
            backend.append_messages(f"s{number}", messages)
        seconds = time.perf_counter() - started
    return sum(map(len, work)) / seconds


def _timed_batches(connection: sqlite3.Connection, statements: list[tuple[str, list]]) -> float:
    """Seconds to run each batch's executemany statements in one transaction."""
    started = time.perf_counter()
    for batch in statements:
        connection.execute("BEGIN IMMEDIATE")
        for sql, rows in batch:
            connection.executemany(sql, rows)
        connection.execute("COMMIT")
    return time.perf_counter() - started


def _raw_connection(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    return connection


def same_schema_rate(directory: Path, work: list[list[tuple[str, str, object]]]) -> float:
    """Messages per second with executemany into the backend's own tables, data precomputed."""
    with SQLiteBackend(directory / "schema.db"):
        pass  # creates the same tables
    connection = _raw_connection(directory / "schema.db")
    insert_message = (
        "INSERT INTO messages (id, session_seq, role, timestamp, active, tool_calls, body) "
        "VALUES (?, 1, ?, ?, 1, 0, ?)"
    )
    insert_document = "INSERT INTO messages_fts (rowid, tokens) VALUES (?, ?)"
    batches_of_rows = []
    next_id = 1
    for batch in work:
        messages, documents = [], []
        for role, body, at in batch:
            message = Message(role=role, content=body, timestamp=at)
            messages.append((next_id, role, to_us(at), message_body(message)))
            documents.append((next_id, message_tokens(body)))
            next_id += 1
        batches_of_rows.append([(insert_message, messages), (insert_document, documents)])
    seconds = _timed_batches(connection, batches_of_rows)
    connection.close()
    return sum(map(len, work)) / seconds


def naive_rate(directory: Path, work: list[list[tuple[str, str, object]]]) -> float:
    """Messages per second with a plain table plus FTS5 on the raw content (unicode61)."""
    connection = _raw_connection(directory / "naive.db")
    connection.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session TEXT, role TEXT, ts TEXT, "
        "content TEXT)"
    )
    connection.execute("CREATE VIRTUAL TABLE messages_fts USING fts5(content)")
    batches_of_rows = []
    next_id = 1
    for number, batch in enumerate(work):
        rows, documents = [], []
        for role, body, at in batch:
            rows.append((next_id, f"s{number}", role, at.isoformat(), body))
            documents.append((next_id, body))
            next_id += 1
        batches_of_rows.append(
            [
                ("INSERT INTO messages VALUES (?, ?, ?, ?, ?)", rows),
                ("INSERT INTO messages_fts (rowid, content) VALUES (?, ?)", documents),
            ]
        )
    seconds = _timed_batches(connection, batches_of_rows)
    connection.close()
    return sum(map(len, work)) / seconds


def main() -> None:
    """Run both sides on the same messages and print the rates and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 messages (CI smoke test)")
    parser.add_argument("--messages", type=int, help="how many messages (default 200,000)")
    args = parser.parse_args()
    total = args.messages or (20_000 if args.quick else 200_000)
    work = batches(total)
    ours = raw = 0.0
    with tempfile.TemporaryDirectory() as scratch:
        # Two alternating rounds on fresh files; the best round of each side counts, so a
        # burst of load from elsewhere on the machine does not decide the ratio.
        for round_number in range(2):
            directory = Path(scratch) / str(round_number)
            directory.mkdir()
            raw = max(raw, same_schema_rate(directory, work))
            ours = max(ours, backend_rate(directory, work))
        naive = naive_rate(Path(scratch), work)
    ratio = ours / raw
    verdict = "met" if ratio >= 0.5 else "MISSED"
    print(
        f"batch append ({total:,} messages, {BATCH} per transaction, synchronous=FULL): "
        f"{ours:,.0f} msg/s; raw executemany into FTS5 (same tables and tokens): {raw:,.0f} "
        f"msg/s; ratio {ratio:.2f} (target >= 0.5: {verdict})"
    )
    print(
        f"for information: raw executemany into FTS5 with the default tokenizer on raw text "
        f"(not CJK-aware, fewer index entries): {naive:,.0f} msg/s; ratio {ours / naive:.2f}"
    )


if __name__ == "__main__":
    main()
