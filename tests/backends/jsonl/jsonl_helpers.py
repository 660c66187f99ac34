"""Helpers shared by the JSONL backend tests: keys, times and the paths of the files."""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime

from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.testing._support import entry_for, minutes, record

KEY = "agent:main:telegram:dm:1"
SHARED_KEY = "agent:main:cli:group:shared"
START = datetime(2026, 6, 1, tzinfo=UTC)


CRC_SUFFIX = len(b',"crc":"00000000"}')


def crc_ok(raw):
    """Whether one line (without its newline) ends with the CRC32 of the rest, as documented."""
    body = raw[:-CRC_SUFFIX] + b"}"
    return raw[-CRC_SUFFIX:] == b',"crc":"%08x"}' % zlib.crc32(body)


def signed(data):
    """``data`` as a checksummed line, written the documented way (no library code involved)."""
    return signed_bytes(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


def signed_bytes(body):
    """A JSON object's bytes as a checksummed line."""
    return body[:-1] + b',"crc":"%08x"}\n' % zlib.crc32(body)


def as_written(line):
    """A raw test line as the backend would frame it: JSON objects signed, anything else not."""
    try:
        data = json.loads(line)
    except ValueError:
        return line + b"\n"
    return signed(data) if isinstance(data, dict) else line + b"\n"


def edit_lines(path, old, new):
    """Replace ``old`` by ``new`` in every line of ``path`` holding it, signing it again.

    An edit by someone who knows the format: the checksums stay right, so what the backend
    finds wrong is the edited content itself.
    """
    out = []
    for line in path.read_bytes().splitlines():
        if old in line:
            body = line[:-CRC_SUFFIX] + b"}" if crc_ok(line) else line
            out.append(signed(json.loads(body.replace(old, new))))
        else:
            out.append(line + b"\n")
    path.write_bytes(b"".join(out))


def json_lines(path):
    """Every line of ``path`` decoded as plain JSON, its checksum checked and left out."""
    lines = []
    for raw in path.read_bytes().splitlines():
        assert crc_ok(raw), raw
        data = json.loads(raw)
        del data["crc"]
        lines.append(data)
    return lines


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
