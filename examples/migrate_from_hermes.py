"""Migrate a Hermes Agent profile into hermes-sessions.

The one idea: ``import_hermes`` reads a Hermes home (its ``state.db``, ``sessions.json`` and
memory files) into any store without writing to the profile, and a second run changes nothing.
This script builds a tiny profile first, so it runs anywhere.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hermes_sessions import MemoryStore, SessionStore
from hermes_sessions.interop import import_hermes

SESSION_ID = "20260512_092000_d3553b7a"


def make_profile(home: Path) -> None:
    """Write a minimal Hermes home: one session with two messages, its routing key, a memory."""
    (home / "sessions").mkdir(parents=True)
    (home / "memories").mkdir()
    (home / "memories" / "MEMORY.md").write_text("Staging runs on port 8443.\n", encoding="utf-8")
    db = sqlite3.connect(home / "state.db")
    db.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL,"
        " started_at REAL NOT NULL, title TEXT, end_reason TEXT);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT,"
        " content TEXT, timestamp REAL NOT NULL, active INTEGER NOT NULL DEFAULT 1);"
    )
    db.execute(
        "INSERT INTO sessions VALUES (?, 'telegram', 1778548800, '端口', NULL)", [SESSION_ID]
    )
    db.executemany(
        "INSERT INTO messages VALUES (?, ?, ?, ?, ?, 1)",
        [
            (1, SESSION_ID, "user", "端口冲突了", 1778548801),
            (2, SESSION_ID, "assistant", "先停旧容器", 1778548802),
        ],
    )
    db.commit()
    db.close()
    key = "agent:main:telegram:dm:42"
    routing = {
        key: {
            "session_key": key,
            "session_id": SESSION_ID,
            "created_at": "2026-05-12T09:20:00",
            "updated_at": "2026-05-12T09:21:00",
            "platform": "telegram",
            "chat_type": "dm",
        }
    }
    (home / "sessions" / "sessions.json").write_text(json.dumps(routing), encoding="utf-8")


def main() -> None:
    """Import the profile, show what came across, and import it again to show it is idempotent."""
    profile = Path("hermes-home")
    make_profile(profile)
    memory = MemoryStore(Path("memories"))
    with SessionStore.open() as store:
        report = import_hermes(profile, store, timezone="Asia/Shanghai", memory=memory)
        print(f"imported sessions: {list(report.sessions)}, keys: {list(report.entries)}")
        print(f"memory entries: {report.memory_entries}, problems: {list(report.problems)}")
        print(f"transcript: {[m.content for m in store.transcript(SESSION_ID)]}")
        print(f"search '冲突' finds: {store.search('冲突')[0].session.title}")
        again = import_hermes(profile, store, timezone="Asia/Shanghai")
        print(f"second import adds: {list(again.sessions)}")


if __name__ == "__main__":
    main()
