"""Damage to every file a persistent backend keeps: a clear error or a report, never a silent start.

A small store is built and closed; then, for every file it left and every kind of damage
(cut to half, a flipped byte, cut to zero bytes, replaced by another program's file, a line
lost), a copy of the home is damaged and opened again. Each case must end one of three ways:
opening raises one of the library's errors; ``check()`` reports a problem; or the damage hit
nothing the store needs (a lock file, free space) and every transcript reads back exactly as
written. A store that opens, passes ``check()`` and reads back less than was written — the
silent empty start — fails the test, as does any error that is not the library's.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest
from reliability_support import open_store

from hermes_sessions import Message, SessionSource
from hermes_sessions.exceptions import HermesSessionsError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def half(data: bytes) -> bytes:
    """Truncated to half its length."""
    return data[: len(data) // 2]


def flipped(data: bytes) -> bytes:
    """One bit flipped in the middle."""
    if not data:
        return data
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x10]) + data[middle + 1 :]


def emptied(_data: bytes) -> bytes:
    """Zero bytes."""
    return b""


def foreign(_data: bytes) -> bytes:
    """Another program's file in its place."""
    return b"PK\x03\x04 not a file of ours\n" * 8


def line_lost(data: bytes) -> bytes:
    """The second line gone (a line-based file), else the first 512 bytes gone."""
    lines = data.splitlines(keepends=True)
    if len(lines) > 1:
        return b"".join(lines[:1] + lines[2:])
    return data[512:]


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "half": half,
    "flip": flipped,
    "zero": emptied,
    "foreign": foreign,
    "lost-line": line_lost,
}


def build(kind: str, home: Path) -> dict[str, list[str]]:
    """Three conversations of a few turns each; return each session's transcript."""
    written = {}
    with open_store(kind, home) as store:
        for chat in range(3):
            source = SessionSource(platform="telegram", chat_id=str(chat), user_id=str(chat))
            lookup = store.get_or_create(source)
            for n in range(4):
                store.append(
                    lookup.session_id,
                    Message(role="user", content=f"q {chat}.{n} 部署 staging"),
                    Message(role="assistant", content=f"a {chat}.{n}"),
                )
            written[lookup.session_id] = [
                str(m.content) for m in store.transcript(lookup.session_id)
            ]
    return written


def outcome(kind: str, home: Path, written: dict[str, list[str]]) -> str:
    """``refused``, ``reported`` or ``intact``; anything else fails the test."""
    try:
        with open_store(kind, home) as store:
            if not store.backend.check().ok:
                return "reported"
            found = {
                item.record.id: [str(m.content) for m in store.transcript(item.record.id)]
                for item in store.list_sessions(limit=None, include_compressed=True).items
            }
    except HermesSessionsError:
        return "refused"
    assert found == written, "the store opened, passed check() and lost data"
    return "intact"


@pytest.fixture(scope="module", params=["sqlite", "jsonl"])
def built(request, tmp_path_factory) -> tuple[str, Path, dict[str, list[str]]]:
    """A closed store of each file-based backend, and what it holds."""
    home = tmp_path_factory.mktemp(request.param) / "home"
    return request.param, home, build(request.param, home)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damage_to_any_file_is_refused_reported_or_harmless(built, damage, tmp_path):
    """Every file, this kind of damage: refused, reported, or the data intact."""
    kind, home, written = built
    files = sorted(p.relative_to(home) for p in home.rglob("*") if p.is_file())
    assert files
    outcomes = {}
    for relative in files:
        copy = tmp_path / str(relative).replace("/", "_")
        shutil.copytree(home, copy)
        target = copy / relative
        target.write_bytes(DAMAGE[damage](target.read_bytes()))
        outcomes[str(relative)] = outcome(kind, copy, written)
    data_files = [name for name in outcomes if name.endswith((".db", ".jsonl"))]
    assert data_files
    if damage != "flip":  # a flipped bit may land in free space; nothing else goes unnoticed
        assert all(outcomes[name] != "intact" for name in data_files), outcomes
