"""SQLite table statements beyond the conformance suite: edits, plans and damaged rows."""

from __future__ import annotations

import pytest

from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.protocols import EntryWrite, RotationPlan
from hermes_sessions.testing._support import entry_for, minutes, say, seed


def test_replace_message_refuses_a_platform_id_of_another_message(backend):
    """An edit may not take the platform id of another message in the session."""
    seed(backend, "s1")
    first, second = backend.append_messages(
        "s1", [say("a", platform_message_id="p1"), say("b", platform_message_id="p2")]
    )
    with pytest.raises(ValueError, match="already belongs"):
        backend.replace_message("s1", second.id, say("b2", platform_message_id="p1"))
    assert backend.find_message("s1", "p1") == first


def test_plan_repointing_and_writing_one_key_matches_the_reference(backend):
    """A plan that repoints a key and also writes it stores what the reference stores."""
    key = "agent:main:telegram:dm:1"
    reference = InMemoryBackend()
    results = []
    for target in (backend, reference):
        seed(target, "a", key)
        seed(target, "b")
        plan = RotationPlan(
            at=minutes(1),
            repoint=[("a", "b")],
            entries=[EntryWrite(entry=entry_for(key, "b", suspended=True), expected_revision=1)],
        )
        results.append(target.apply(plan))
    assert results[0] == results[1]
    assert backend.get_entry(key) == reference.get_entry(key)


def test_a_damaged_routing_row_is_a_corrupt_record(backend):
    """A routing row whose columns were damaged by hand raises CorruptRecordError, not garbage."""
    seed(backend, "s1", "agent:main:x:dm:1")
    connection = backend._connections.connection()
    connection.execute(
        "UPDATE entries SET revision = 'two' WHERE session_key = 'agent:main:x:dm:1'"
    )
    with pytest.raises(CorruptRecordError, match="malformed"):
        backend.get_entry("agent:main:x:dm:1")
    connection.execute(
        'UPDATE entries SET revision = 2, body = \'{"suspended": "yes"}\' '
        "WHERE session_key = 'agent:main:x:dm:1'"
    )
    with pytest.raises(CorruptRecordError):
        backend.get_entry("agent:main:x:dm:1")
