"""Helpers shared by the JSONL backend tests: keys, times and the paths of the files."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.testing._support import entry_for, minutes, record

KEY = "agent:main:telegram:dm:1"
SHARED_KEY = "agent:main:cli:group:shared"
START = datetime(2026, 6, 1, tzinfo=UTC)


def json_lines(path):
    """Every line of ``path`` decoded as plain JSON (no library code involved)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def session_file(directory, session_id):
    """Where a session's file lives."""
    return directory / "sessions" / f"{session_id}.jsonl"


def rotation(key, old, new, revision):
    """The plan of an idle reset of ``key`` from ``old`` to a new session ``new``."""
    at = minutes(60)
    return RotationPlan(
        at=at,
        create=record(new, started_at=at),
        entries=[EntryWrite(entry=entry_for(key, new, at=at), expected_revision=revision)],
        end=[(old, "idle")],
    )
