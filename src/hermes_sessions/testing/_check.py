"""Contract: ``check()`` reports a healthy store as ok, and the library's invariants broken."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from hermes_sessions.checks import CheckReport
from hermes_sessions.exceptions import BackendClosedError
from hermes_sessions.protocols import EntryWrite, RotationPlan, SupportsCheck
from hermes_sessions.testing._support import ContractBase, entry_for, minutes, record, say, seed

if TYPE_CHECKING:
    from hermes_sessions.protocols import Backend

KEY = "agent:main:telegram:dm:1"
OTHER = "agent:main:telegram:dm:2"


def _checkable(backend: Backend) -> SupportsCheck:
    if not isinstance(backend, SupportsCheck):
        pytest.skip("the backend does not implement SupportsCheck")
    return backend


def _in_use(backend: Backend) -> None:
    """A store after ordinary work: messages with tool calls, a rotation, a rewrite."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    seed(backend, "s1", KEY, say("hi"), say(None, role="assistant", tool_calls=[call]))
    seed(backend, "s2", OTHER, say("other"), session_key=OTHER)
    entry = backend.get_entry(KEY)
    assert entry is not None
    backend.apply(
        RotationPlan(
            at=minutes(5),
            end=[("s1", "idle")],
            create=record("s3", session_key=KEY, started_at=minutes(5)),
            messages=[say("again", timestamp=minutes(5))],
            entries=[
                EntryWrite(
                    entry=entry_for(KEY, "s3", at=minutes(5)), expected_revision=entry.revision
                )
            ],
        )
    )
    backend.append_messages("s2", [say("more"), say("and more")])
    first = backend.get_messages("s2")[0]
    assert first.id is not None
    backend.set_active("s2", [first.id], active=False)


def _contents(backend: Backend) -> object:
    sessions = sorted(s.id for s in (backend.get_session(i) for i in ("s1", "s2", "s3")) if s)
    return (
        backend.entries(),
        [backend.get_session(i) for i in sessions],
        [backend.get_messages(i, include_inactive=True) for i in sessions],
    )


class CheckContract(ContractBase):
    """``check()`` (optional, :class:`~hermes_sessions.protocols.SupportsCheck`)."""

    def test_an_empty_store_is_ok(self, backend: Backend) -> None:
        """A new store has nothing wrong."""
        report = _checkable(backend).check()
        assert isinstance(report, CheckReport)
        assert report.ok, report.problems
        assert report.sessions == 0

    def test_a_store_in_use_is_ok_and_check_changes_nothing(self, backend: Backend) -> None:
        """After rotations, tool calls and hidden messages, nothing is wrong; nothing changes."""
        checkable = _checkable(backend)
        _in_use(backend)
        before = _contents(backend)
        report = checkable.check()
        assert report.ok, report.problems
        assert report.sessions == 3
        assert _contents(backend) == before
        assert checkable.check() == report

    def test_a_live_session_left_behind_by_its_key_is_reported(self, backend: Backend) -> None:
        """A session not ended whose key points elsewhere, and no key at it, is a problem."""
        checkable = _checkable(backend)
        seed(backend, "s1", None, say("left"), session_key=KEY)
        seed(backend, "s2", KEY, say("current"), started_at=minutes(1))
        problems = checkable.check().problems
        assert [(p.kind, p.where) for p in problems] == [("live_sessions", KEY)]
        assert "s1" in problems[0].detail
        backend.end_session("s1", "idle", at=minutes(2))
        assert checkable.check().ok

    def test_a_closed_backend_refuses_check(self, backend: Backend) -> None:
        """After close, ``check()`` raises ``BackendClosedError`` like every other call."""
        checkable = _checkable(backend)
        backend.close()
        with pytest.raises(BackendClosedError):
            checkable.check()
