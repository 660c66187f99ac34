"""``apply`` / ``aapply`` with the turn ledger (issue 40): a new message accepted, once."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from hermes_sessions import LedgerUnavailableError, Message, SessionSource, SessionStore
from hermes_sessions.adapters import NewMessage, aapply, apply
from hermes_sessions.aio import AsyncSessionStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.protocols import Backend

SOURCE = SessionSource(platform="slack", chat_id="C1", user_id="U1", chat_type="channel")


def _event(text: str = "deploy?") -> NewMessage:
    message = Message(role="user", content=text, platform_message_id="C1:1700000000.000100")
    return NewMessage(source=SOURCE, message=message)


def test_apply_accepts_through_the_ledger(make_backend: Callable[[], Backend]) -> None:
    """With ``holder`` the message is accepted; Slack's retry is a duplicate in progress."""
    with SessionStore(make_backend(), ledger=True) as store:
        first = apply(store, _event(), holder="gw-1")
        assert first.acceptance is not None
        assert not first.acceptance.duplicate
        assert first.message is not None
        assert first.session_id == first.message.session_id
        retry = apply(store, _event("deploy? (retried)"), holder="gw-2")
        assert retry.acceptance is not None
        assert retry.acceptance.in_progress
        assert retry.session_id == first.session_id
        assert [m.content for m in store.transcript(first.session_id or "")] == ["deploy?"]


def test_apply_without_a_holder_is_unchanged(make_backend: Callable[[], Backend]) -> None:
    """No holder: no acceptance, the message appended as before; a holder needs the mode."""
    with SessionStore(make_backend()) as store:
        applied = apply(store, _event())
        assert applied.acceptance is None
        assert applied.message is not None
        with pytest.raises(LedgerUnavailableError):
            apply(store, _event(), holder="gw-1")


def test_aapply_accepts_through_the_ledger(make_backend: Callable[[], Backend]) -> None:
    """``aapply``'s twin: accepted once, then a duplicate."""

    async def scenario() -> None:
        async with AsyncSessionStore(SessionStore(make_backend(), ledger=True)) as store:
            first = await aapply(store, _event(), holder="gw-1")
            assert first.acceptance is not None
            assert not first.acceptance.duplicate
            again = await aapply(store, _event(), holder="gw-1")
            assert again.acceptance is not None
            assert again.acceptance.in_progress

    asyncio.run(scenario())
