"""Erasure is scoped to one platform and leaves nothing behind in any file (issue 12)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from store_scenarios import user

from hermes_sessions import SessionSource, SessionStore
from hermes_sessions.backends.jsonl import JSONLBackend
from hermes_sessions.backends.sqlite import SQLiteBackend

if TYPE_CHECKING:
    from pathlib import Path

LIN = SessionSource(
    platform="feishu", chat_id="ou_lin", user_id="ou_lin", user_id_alt="on_lin", user_name="Lin"
)
LIN_THREAD = SessionSource(
    platform="feishu",
    chat_type="thread",
    chat_id="oc_team",
    thread_id="t1",
    user_id="ou_lin",
    user_id_alt="on_lin",
    user_name="Lin",
    chat_name="Team",
)
BOB_THREAD = SessionSource(
    platform="feishu", chat_type="thread", chat_id="oc_team", thread_id="t1", user_id="ou_bob"
)
# The same id on another platform is another person.
DISCORD_NAMESAKE = SessionSource(platform="discord", chat_id="1001", user_id="1001")
FEISHU_1001 = SessionSource(platform="feishu", chat_id="1001", user_id="1001")


def test_erasure_never_crosses_platforms(store):
    """Erasing feishu user 1001 leaves discord user 1001 alone."""
    feishu = store.get_or_create(FEISHU_1001).session_id
    discord = store.get_or_create(DISCORD_NAMESAKE).session_id
    store.append(feishu, user("feishu words", sender_id="1001"))
    store.append(discord, user("discord words", sender_id="1001"))
    report = store.erase_user("feishu", "1001")
    assert report.sessions == (feishu,)
    assert [m.content for m in store.transcript(discord)] == ["discord words"]
    assert store.entry(store.key_for(DISCORD_NAMESAKE)).session_id == discord


def test_every_id_given_is_matched_and_unknown_ones_reported(store):
    """Canonical and alternate ids both count; an id that matched nothing is listed."""
    lookup = store.get_or_create(LIN)
    store.append(lookup.session_id, user("hi", sender_id="on_lin"))
    report = store.erase_user("feishu", "on_lin", "ou_lin", "ou_nobody")
    assert report.sessions == (lookup.session_id,)
    assert report.unmatched == ("ou_nobody",)
    assert report.user_ids == ("on_lin", "ou_lin", "ou_nobody")


def test_a_shared_thread_they_started_forgets_them(store):
    """The thread stays for the others; its record and entry lose Lin's id and names."""
    thread = store.get_or_create(LIN_THREAD)
    store.append(thread.session_id, user("lin writes", sender_id="on_lin"))
    store.append(thread.session_id, user("bob writes", sender_id="ou_bob"))
    assert store.get_or_create(BOB_THREAD).session_id == thread.session_id
    report = store.erase_user("feishu", "on_lin", "ou_lin")
    assert report.sessions == ()
    assert report.messages == 1
    assert set(report.cleared) == {thread.session_id, thread.entry.session_key}
    assert store.session(thread.session_id).user_id is None
    entry = store.entry(thread.entry.session_key)
    assert entry.origin is not None
    assert (entry.origin.user_id, entry.origin.user_id_alt, entry.origin.user_name) == (
        None,
        None,
        None,
    )
    assert entry.display_name == "Team"
    assert [m.content for m in store.transcript(thread.session_id)] == ["bob writes"]


def test_a_dry_run_changes_nothing(store):
    """dry_run reports what would go."""
    lookup = store.get_or_create(LIN)
    store.append(lookup.session_id, user("hi", sender_id="on_lin"))
    report = store.erase_user("feishu", "on_lin", dry_run=True)
    assert report.dry_run
    assert report.sessions == (lookup.session_id,)
    assert not report.scrubbed
    assert store.session(lookup.session_id)


# -- nothing left in any file ----------------------------------------------------------------------

MARKERS = {
    "secret": "zqxsecretmarker",  # a message of Lin's own DM
    "title": "zqxtitlemarker",  # the DM's title
    "shared": "zqxsharedmarker",  # Lin's message in the shared thread
    "name": "Zqxnamemarker",  # Lin's display name in the thread's routing entry
}


def _files_containing(home: Path, marker: str) -> list[str]:
    needle = marker.encode()
    return sorted(
        str(path.relative_to(home))
        for path in home.rglob("*")
        if path.is_file() and needle in path.read_bytes()
    )


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_erased_text_is_in_no_file(kind, tmp_path):
    """Plant unique markers, erase, then byte-search every file under the home."""
    home = tmp_path / "home"
    home.mkdir()
    backend = (
        SQLiteBackend(home / "state.db") if kind == "sqlite" else JSONLBackend(home / "sessions")
    )
    thread_source = SessionSource(
        platform="feishu",
        chat_type="thread",
        chat_id="oc_team",
        thread_id="t1",
        user_id="ou_lin",
        user_id_alt="on_lin",
        user_name=MARKERS["name"],
    )
    with SessionStore(backend) as store:
        dm = store.get_or_create(LIN)
        store.set_title(dm.session_id, MARKERS["title"])
        store.append(dm.session_id, user(f"plan {MARKERS['secret']}", sender_id="on_lin"))
        store.reset(dm.entry.session_key)  # an ended session of Lin's too
        thread = store.get_or_create(thread_source)
        store.append(thread.session_id, user(f"hi {MARKERS['shared']}", sender_id="on_lin"))
        store.append(thread.session_id, user("bob stays", sender_id="ou_bob"))
        if kind == "jsonl":
            backend.compact()  # the snapshot now holds the names too
        before = {m: _files_containing(home, v) for m, v in MARKERS.items()}
        assert all(before.values()), before
        report = store.erase_user("feishu", "on_lin", "ou_lin")
        assert report.scrubbed, report.scrub_hint
        assert {m: _files_containing(home, v) for m, v in MARKERS.items()} == {
            m: [] for m in MARKERS
        }
        assert [m.content for m in store.transcript(thread.session_id)] == ["bob stays"]


def test_a_reader_holding_the_wal_leaves_the_scrub_unfinished(tmp_path):
    """A reader pinning old pages: the report says not scrubbed and how to finish."""
    import sqlite3  # noqa: PLC0415  # only this test reads the file behind the backend

    path = tmp_path / "state.db"
    with SessionStore(SQLiteBackend(path, busy_timeout=0.2)) as store:
        lookup = store.get_or_create(LIN)
        store.append(lookup.session_id, user("bye", sender_id="on_lin"))
        reader = sqlite3.connect(path)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM messages").fetchone()
            report = store.erase_user("feishu", "on_lin")
        finally:
            reader.close()
        assert report.sessions == (lookup.session_id,)
        assert not report.scrubbed
        assert report.scrub_hint is not None
        assert "optimize" in report.scrub_hint


def test_the_cli_finishes_an_unfinished_scrub(tmp_path, capsys):
    """`optimize --scrub`, the hint's advice, runs the backend's scrub."""
    from hermes_sessions.cli import main  # noqa: PLC0415

    home = tmp_path / "home"
    with SessionStore.open(home) as store:
        store.get_or_create(LIN)
    assert main(["--home", str(home), "optimize", "--scrub", "--json"]) == 0
    assert "scrub" in capsys.readouterr().out
