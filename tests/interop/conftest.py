"""Building small Hermes profiles from the schema facts of DESIGN §9."""

from __future__ import annotations

import json
import sqlite3

import pytest

SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0, cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0, cwd TEXT, estimated_cost_usd REAL, title TEXT,
    api_call_count INTEGER DEFAULT 0, rewind_count INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
    content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL,
    token_count INTEGER, finish_reason TEXT, reasoning TEXT, reasoning_content TEXT,
    reasoning_details TEXT, codex_reasoning_items TEXT, codex_message_items TEXT,
    platform_message_id TEXT, observed INTEGER DEFAULT 0, active INTEGER NOT NULL DEFAULT 1);
INSERT INTO schema_version VALUES (16);
"""


class Profile:
    """A Hermes home under construction."""

    def __init__(self, root):
        """Create the directories and the v16 schema."""
        self.root = root
        (root / "sessions").mkdir(parents=True)
        (root / "memories").mkdir()
        self.db = sqlite3.connect(root / "state.db")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def session(self, session_id, *, source="telegram", started=1_778_548_800.0, **columns):
        """Insert one sessions row."""
        values = {"id": session_id, "source": source, "started_at": started, **columns}
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        sql = f"INSERT INTO sessions ({names}) VALUES ({marks})"  # noqa: S608  # test's own columns
        self.db.execute(sql, list(values.values()))
        self.db.commit()

    def message(self, session_id, role, content, *, timestamp=1_778_548_801.0, **columns):
        """Insert one messages row."""
        values = {
            "session_id": session_id,
            "role": role,
            "content": content,
            "timestamp": timestamp,
            **columns,
        }
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        sql = f"INSERT INTO messages ({names}) VALUES ({marks})"  # noqa: S608  # test's own columns
        self.db.execute(sql, list(values.values()))
        self.db.commit()

    def routing(self, entries):
        """Write sessions/sessions.json."""
        (self.root / "sessions" / "sessions.json").write_text(
            json.dumps(entries, ensure_ascii=False), encoding="utf-8"
        )

    def jsonl(self, session_id, lines, *, tail=b""):
        """Write a legacy transcript, optionally with a torn tail."""
        body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        (self.root / "sessions" / f"{session_id}.jsonl").write_bytes(body.encode() + tail)

    def memory(self, name, entries):
        """Write a memory file."""
        (self.root / "memories" / name).write_text("\n§\n".join(entries), encoding="utf-8")

    def close(self):
        """Close the database."""
        self.db.close()


@pytest.fixture
def profile(tmp_path):
    """An empty Hermes profile to fill."""
    built = Profile(tmp_path / "hermes")
    yield built
    built.close()
