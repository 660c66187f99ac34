"""Privacy after a realistic workload: everything created is private; erasure leaves no byte.

The workload goes beyond the unit tests of erasure and modes: a worker killed mid-write
(leaving whatever a crash leaves: WAL, journal, lock and temporary files), then branches
(which copy a transcript), compressions (a summary quoting it) and state in every scope the
user owns, all carrying unique markers. After ``erase_user`` a byte search of every file of the
store (SQLite, JSONL) — or of every live row of the schema (PostgreSQL, whose dead rows stay in
its pages until the server's own VACUUM, as the erasure report says) — finds none of them.
"""

from __future__ import annotations

import random
import stat
from typing import TYPE_CHECKING

import pytest
from reliability_support import KINDS, open_store, run_round

from hermes_sessions import Message, SessionSource, StateScope
from pg_support import schema_dump

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions import SessionStore

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin", user_name="Zqxlinname")
BOB = SessionSource(platform="feishu", chat_id="ou_bob", user_id="ou_bob")
MARKERS = {
    "message": "zqxmessagemarker",
    "title": "zqxtitlemarker",
    "summary": "zqxsummarymarker",
    "lane": "zqxlanemarker",
    "session": "zqxsessionmarker",
    "user": "zqxuserstatemarker",
    "name": "Zqxlinname",
}


def private_mode_problems(top: Path) -> list[str]:
    """Every path under ``top`` (and ``top``) that another user could read or enter."""
    return [
        f"{path} is {stat.S_IMODE(path.stat().st_mode):o}"
        for path in [top, *top.rglob("*")]
        if not path.is_symlink() and path.exists() and stat.S_IMODE(path.stat().st_mode) & 0o077
    ]


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_everything_left_by_a_crashed_workload_is_private(kind, tmp_path):
    """A home in missing parents, a worker killed mid-write, a reopen: every path is private."""
    top = tmp_path / "made"
    home = top / "by" / "us"
    chance = random.Random(kind)  # noqa: S311  # test data, not secrets
    for round_ in range(3):
        run_round(kind, home, round_, point=None, kill_after=chance.uniform(0.02, 0.2))
        assert private_mode_problems(top) == []
    with open_store(kind, home) as store:
        workload(store)
        assert private_mode_problems(top) == []
    assert private_mode_problems(top) == []


def workload(store: SessionStore) -> str:
    """Lin's sessions with every marker, a branch, a compression and state; Bob's beside."""
    lookup = store.get_or_create(LIN)
    store.set_title(lookup.session_id, MARKERS["title"])
    store.append(
        lookup.session_id,
        Message(role="user", content=f"plan {MARKERS['message']}"),
        Message(role="assistant", content="noted"),
        state_delta={
            StateScope.lane(lookup.entry.session_key): {"note": MARKERS["lane"]},
            StateScope.session(lookup.session_id): {"note": MARKERS["session"]},
            StateScope.user(store.keys.namespace, "feishu", "ou_lin"): {"note": MARKERS["user"]},
        },
    )
    branched = store.branch(lookup.entry.session_key)
    summary = Message(role="assistant", content=f"summary: {MARKERS['summary']}")
    store.compress(branched.session_id, [summary], holder="test")
    store.reset(lookup.entry.session_key)
    bob = store.get_or_create(BOB)
    store.append(bob.session_id, Message(role="user", content="bob stays"))
    return bob.session_id


def stored_bytes(kind: str, home: Path) -> bytes:
    """Everything the store keeps: its files' bytes, or every row of its PostgreSQL schema."""
    if kind != "postgres":
        return b"".join(path.read_bytes() for path in sorted(home.rglob("*")) if path.is_file())
    return schema_dump(home)


@pytest.mark.parametrize("kind", KINDS)
def test_erasure_leaves_no_byte_of_the_users_markers(kind, tmp_path):
    """Markers in messages, titles, copies, summaries, names and state: none survive erasure."""
    home = tmp_path / "home"
    with open_store(kind, home) as store:
        bob = workload(store)
        if kind == "jsonl":
            store.backend.compact()  # the snapshot holds names and state too
        before = stored_bytes(kind, home)
        assert all(marker.encode() in before for marker in MARKERS.values())
        report = store.erase_user("feishu", "ou_lin")
        if kind == "postgres":  # dead rows stay in the server's pages until its VACUUM
            assert not report.scrubbed
            assert "VACUUM" in str(report.scrub_hint)
        else:
            assert report.scrubbed, report.scrub_hint
        after = stored_bytes(kind, home)
        left = [name for name, marker in MARKERS.items() if marker.encode() in after]
        assert left == []
        assert [m.content for m in store.transcript(bob)] == ["bob stays"]
