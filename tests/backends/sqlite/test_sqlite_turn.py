"""The statements of a turn's write on SQLite (issue 21, "a thinner turn").

A checked turn (messages with a platform id, usage, activity) is one transaction; its session
row is changed by one ``UPDATE`` that carries the counters, the activity and the usage.
"""

from __future__ import annotations

from hermes_sessions import Usage
from hermes_sessions.backends.sqlite import _group
from hermes_sessions.testing._support import minutes, say, seed


def traced(backend, run):
    """The statements SQLite runs on the writer connection during ``run()``."""
    statements: list[str] = []
    connection = backend._connections.writer()
    connection.set_trace_callback(statements.append)
    try:
        run()
    finally:
        connection.set_trace_callback(None)
    return statements


def test_a_turn_with_usage_updates_its_session_row_once(backend):
    """Counters, activity and usage go into the session row with one statement."""
    seed(backend, "s1", "agent:main:x:dm:1")
    usage = Usage(input=120, output=30, cost_usd=0.001, model="m-1")
    statements = traced(
        backend,
        lambda: backend.append_messages(
            "s1",
            [say("q", platform_message_id="p1"), say("a", role="assistant")],
            touch_at=minutes(5),
            usage=usage,
        ),
    )
    updates = [s for s in statements if s.lstrip().upper().startswith("UPDATE SESSIONS")]
    assert len(updates) == 1
    assert [s for s in statements if s.upper() in {"COMMIT", "END"}] == ["COMMIT"]
    record = backend.get_session("s1")
    assert (record.message_count, record.input_tokens, record.output_tokens) == (2, 120, 30)
    assert (record.estimated_cost_usd, record.model) == (0.001, "m-1")
    assert record.last_active_at == say("q").timestamp


def test_a_redelivered_turn_adds_no_usage(backend):
    """A duplicate batch stores nothing, so its usage is not counted twice."""
    seed(backend, "s1")
    for _ in range(2):
        backend.append_messages(
            "s1", [say("q", platform_message_id="p1")], usage=Usage(input=7, output=1)
        )
    record = backend.get_session("s1")
    assert (record.message_count, record.input_tokens, record.output_tokens) == (1, 7, 1)


def test_usage_adds_to_counters_set_before(backend):
    """Usage of later turns adds to what the session already counted, model replaced."""
    seed(backend, "s1")
    backend.append_messages("s1", [say("q1")], usage=Usage(input=1, model="m-1"))
    backend.append_messages("s1", [say("q2")], usage=Usage(input=2, reasoning=3, model="m-2"))
    backend.append_messages("s1", [say("q3")], usage=Usage())
    record = backend.get_session("s1")
    assert (record.input_tokens, record.reasoning_tokens, record.model) == (3, 3, "m-2")


def test_a_lone_writer_makes_no_event(backend, monkeypatch):
    """Without company a write leads at once: no Event is made for it to wait on."""
    members: list[_group.Member[object]] = []
    member_class = _group.Member

    def recording(work):
        member = member_class(work)
        members.append(member)
        return member

    monkeypatch.setattr(_group, "Member", recording)
    seed(backend, "s1")
    backend.append_messages("s1", [say("q")])
    assert members
    assert all(member.leads and member.done is None for member in members)
    assert backend.get_session("s1").message_count == 1


def test_a_turn_reads_once_before_writing(backend):
    """The session's row, the last id and the redelivery check are one statement."""
    seed(backend, "s1")
    batch = [say("q", platform_message_id="p1"), say("a", role="assistant")]
    statements = traced(backend, lambda: backend.append_messages("s1", batch))
    ours = [s for s in statements if "'main'." not in s]  # not FTS5's own statements
    selects = [s for s in ours if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 1
    again = traced(backend, lambda: backend.append_messages("s1", batch))
    assert [s for s in again if s.lstrip().upper().startswith("INSERT")] == []
    result = backend.append_messages("s1", batch)
    assert result.duplicate
    assert [m.content for m in result] == ["q"]
    assert backend.get_session("s1").message_count == 2
