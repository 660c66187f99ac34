"""The in-memory building blocks shared by InMemoryBackend and JSONLBackend, on their own."""

from __future__ import annotations

import pytest

from hermes_sessions.backends.memtables import (
    EntryTable,
    MessageIndex,
    Transcript,
    resolve_plan,
    session_page,
)
from hermes_sessions.exceptions import ConflictError
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.queries import SearchQuery, SessionQuery
from hermes_sessions.testing._support import entry_for, minutes, record, say


def table_of(*entries):
    """An entry table holding ``entries`` as they are."""
    table = EntryTable()
    for entry in entries:
        table.put(entry)
    return table


def test_entry_table_keeps_its_reverse_map_exact():
    """Moving a key to another session updates both maps; the last key gone drops the session."""
    table = table_of(entry_for("k1", "a"), entry_for("k2", "a"))
    table.store(entry_for("k1", "b"), expected=None)
    assert (table.keys_of("a"), table.keys_of("b")) == ({"k2"}, {"k1"})
    table.delete("k2")
    assert table.keys_by_session == {"b": {"k1"}}
    assert [entry.session_key for entry in table.listing()] == ["k1"]


def test_entry_table_checks_revisions():
    """``store`` numbers revisions from the expected one; a stale expectation is a conflict."""
    table = EntryTable()
    first = table.store(entry_for("k", "a"), expected=None)
    second = table.store(entry_for("k", "b"), expected=first.revision)
    assert (first.revision, second.revision) == (1, 2)
    with pytest.raises(ConflictError):
        table.check_revision("k", 1)


def test_transcript_prepare_numbers_new_messages_and_reuses_known_ones():
    """Later known platform ids return the stored copy, repeats the first; nothing is stored."""
    transcript = Transcript(record("s"))
    transcript.add(transcript.prepare([say("stored", platform_message_id="p1")]).new)
    plan = transcript.prepare(
        [
            say("fresh", platform_message_id="p2"),
            say("again", platform_message_id="p1"),
            say("fresh twice", platform_message_id="p2"),
        ]
    )
    assert not plan.result.duplicate
    assert [m.content for m in plan.result] == ["fresh", "stored", "fresh"]
    assert [m.content for m in plan.result.existing] == ["stored"]
    assert [m.content for m in plan.result.stored] == ["fresh"]
    assert [(m.id, m.content) for m in plan.new] == [(2, "fresh")]
    assert (transcript.next_id, transcript.record.message_count) == (2, 1)


def test_transcript_prepare_treats_a_known_first_id_as_a_redelivery():
    """A batch whose first platform id is stored is a redelivery: nothing new, copies listed."""
    transcript = Transcript(record("s"))
    transcript.add(transcript.prepare([say("q", platform_message_id="p1")]).new)
    plan = transcript.prepare([say("note"), say("q again", platform_message_id="p1"), say("reply")])
    assert plan.result.duplicate
    assert plan.new == ()
    assert [m.content for m in plan.result] == ["q"]
    assert plan.result.existing == plan.result.messages
    assert plan.result.stored == ()


def test_transcript_refuses_to_give_a_platform_id_to_a_second_message():
    """Replacing a message with a platform id another message owns is a ValueError."""
    transcript = Transcript(record("s"))
    transcript.add(transcript.prepare([say("a", platform_message_id="p1"), say("b")]).new)
    with pytest.raises(ValueError, match="already belongs to message 1"):
        transcript.replace(2, say("b", platform_message_id="p1"))


def test_transcript_counts_only_active_messages():
    """Soft-deleting a message takes it out of the counts; restoring it puts it back."""
    transcript = Transcript(record("s"))
    transcript.add(transcript.prepare([say("a"), say("b")]).new)
    assert transcript.set_active([1, 1, 9], active=False) == [1]
    assert transcript.record.message_count == 1
    transcript.set_active([1], active=True)
    assert transcript.record.message_count == 2


def test_transcript_select_windows_from_either_end():
    """Bounds are exclusive and the limit counts from the start, or from the end with from_end."""
    transcript = Transcript(record("s"))
    transcript.add(transcript.prepare([say(str(n)) for n in range(5)]).new)

    def window(**options):
        options = {"after_id": None, "before_id": None, "limit": None} | options
        messages = transcript.select(include_inactive=False, **options)
        return [m.content for m in messages]

    assert window(after_id=1, before_id=5, limit=2, from_end=False) == ["1", "2"]
    assert window(limit=2, from_end=True) == ["3", "4"]
    assert window(limit=0, from_end=True) == []


def test_session_page_previews_the_first_active_user_message():
    """A listing shows each session with its first active user message as the preview."""
    transcript = Transcript(record("s"))
    transcript.add(transcript.prepare([say("hi", role="assistant"), say("question")]).new)
    page = session_page(SessionQuery(), [transcript])
    assert [(item.record.id, item.preview) for item in page.items] == [("s", "question")]


def test_message_index_forgets_removed_messages_and_replaces_edited_ones():
    """A removed message no longer matches, and re-adding an id keeps only the new text."""
    transcript = Transcript(record("s"))
    transcript.add(transcript.prepare([say("docker compose"), say("docker swarm")]).new)
    index = MessageIndex()
    for message in transcript.messages.values():
        index.add(message)
    index.remove("s", 1)
    edited = transcript.replace(2, say("kubernetes"))
    index.add(edited)

    def hits(text):
        found = index.search(SearchQuery(text=text), lambda _session_id: transcript)
        return [hit.message.id for hit in found]

    assert (hits("docker"), hits("kubernetes")) == ([], [2])


def test_resolve_plan_changes_nothing_and_ends_only_sessions_left_without_keys():
    """A plan is worked out on an overlay; a session still reached by a key is not ended."""
    table = table_of(entry_for("k1", "old"), entry_for("k2", "old"), entry_for("k3", "other"))
    records = {name: record(name) for name in ("old", "other")}
    plan = RotationPlan(
        at=minutes(5),
        create=record("new", started_at=minutes(5)),
        entries=[EntryWrite(entry=entry_for("k1", "new"), expected_revision=0)],
        end=[("old", "idle"), ("other", "idle")],
        repoint=[("other", "new")],
    )
    resolved = resolve_plan(plan, table, records.get)
    assert [(e.session_key, e.session_id) for e in resolved.written] == [
        ("k3", "new"),
        ("k1", "new"),
    ]
    assert resolved.end == [("other", "idle")]
    assert table.get("k1").session_id == "old"  # type: ignore[union-attr]
