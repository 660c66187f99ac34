"""The shared invariants of ``check()``, on damage no backend lets a caller write."""

from __future__ import annotations

import attrs

from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.checks import CheckProblem, CheckReport, invariant_problems, make_report
from hermes_sessions.exceptions import CorruptRecordError
from hermes_sessions.testing._support import entry_for, say, seed

KEY = "agent:main:telegram:dm:1"


class _Damaged(InMemoryBackend):
    """An in-memory backend whose reads show the damage a storage medium can hold."""

    ghost_key: str | None = None
    stale_counts: bool = False
    unreadable: str | None = None

    def entries(self, *, session_id=None):
        found = super().entries(session_id=session_id)
        if self.ghost_key is not None and session_id is None:
            found.append(entry_for(self.ghost_key, "ghost"))
        return found

    def list_sessions(self, query):
        page = super().list_sessions(query)
        if not self.stale_counts:
            return page
        items = [
            attrs.evolve(s, record=attrs.evolve(s.record, message_count=9)) for s in page.items
        ]
        return attrs.evolve(page, items=items)

    def get_messages(self, session_id, **options):
        if session_id == self.unreadable:
            raise CorruptRecordError("bad JSON", path="state.db", table="messages", row=7)
        return super().get_messages(session_id, **options)


def test_a_key_pointing_at_a_missing_session_is_reported():
    """An entry whose session is gone is a ``dangling_key`` problem naming the key."""
    backend = _Damaged()
    seed(backend, "s1", KEY, say("hi"))
    backend.ghost_key = "agent:main:telegram:dm:9"
    problems, sessions = invariant_problems(backend)
    assert [(p.kind, p.where) for p in problems] == [("dangling_key", backend.ghost_key)]
    assert "ghost" in problems[0].detail
    assert sessions == 1


def test_counters_that_disagree_with_the_transcript_are_reported():
    """A record counting other messages than its transcript holds is a ``counters`` problem."""
    backend = _Damaged()
    seed(backend, "s1", KEY, say("hi"), say("there"))
    backend.stale_counts = True
    problems, _ = invariant_problems(backend)
    assert [(p.kind, p.where) for p in problems] == [("counters", "s1")]
    assert "9 messages" in problems[0].detail
    assert "has 2 and 0" in problems[0].detail


def test_an_unreadable_transcript_is_reported_not_raised():
    """A record that cannot be decoded is a ``corrupt`` problem naming file, table and row."""
    backend = _Damaged()
    seed(backend, "s1", KEY, say("hi"))
    backend.unreadable = "s1"
    report = make_report(backend, [CheckProblem("storage", "state.db", "a bad page")])
    assert not report.ok
    assert [(p.kind, p.where) for p in report.problems] == [
        ("storage", "state.db"),
        ("corrupt", "state.db messages row 7"),
    ]
    assert str(report.problems[1]) == "corrupt: state.db messages row 7: bad JSON"


def test_a_report_without_problems_is_ok():
    """``ok`` is true exactly when there are no problems."""
    assert CheckReport([], sessions=2).ok
    assert not CheckReport([CheckProblem("index", "fts", "stale")]).ok
