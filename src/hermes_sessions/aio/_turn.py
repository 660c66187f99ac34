"""The chat of one inbound message, held for the block of :meth:`AsyncSessionStore.turn`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions.aio._ledger import AsyncLedger
from hermes_sessions.exceptions import InvalidArgumentError, LedgerUnavailableError
from hermes_sessions.models import SessionEntry
from hermes_sessions.store import Acceptance, SessionLookup

if TYPE_CHECKING:
    from hermes_sessions.ledger import Inbound
    from hermes_sessions.models import Message, ResetDecision, SessionSource
    from hermes_sessions.store import Answer
    from hermes_sessions.usage import Usage

__all__ = ["Turn", "accepted_turn"]


@attrs.define(eq=False)
class Turn:
    """The chat of one inbound message, held for the block of :meth:`AsyncSessionStore.turn`.

    ``entry`` (and ``session_id``) follow rotations made inside the block — ``/new``, resume,
    branch, compression — so a reply appended after ``/new`` lands in the new session. ``lookup``
    is what the block started with.

    .. versionadded:: 0.1.0
    """

    key: str
    lookup: SessionLookup
    entry: SessionEntry
    acceptance: Acceptance | None = attrs.field(default=None, kw_only=True)
    """With the turn ledger (``turn(source, message=..., holder=...)``): what accepting did.

    .. versionadded:: 0.1.0
    """
    holder: str | None = attrs.field(default=None, kw_only=True)
    """The worker that holds the message, with the turn ledger."""
    _ledger: AsyncLedger | None = attrs.field(default=None, kw_only=True, alias="ledger")

    @property
    def session_id(self) -> str:
        """The key's session now."""
        return self.entry.session_id

    @property
    def created(self) -> bool:
        """Whether the lookup at the start created (or rotated into) the session."""
        return self.lookup.created

    @property
    def reset(self) -> ResetDecision | None:
        """Why the lookup at the start reset the session automatically, if it did."""
        return self.lookup.reset

    @property
    def redelivered(self) -> Message | None:
        """The stored copy, when the turn's message is a redelivery (then nothing rotated)."""
        return self.lookup.redelivered

    @property
    def duplicate(self) -> bool:
        """A redelivery: accepted before (with the turn ledger), or already stored."""
        if self.acceptance is not None:
            return self.acceptance.duplicate
        return self.lookup.redelivered is not None

    @property
    def in_progress(self) -> bool:
        """With the turn ledger: a redelivery of a message another turn is answering now."""
        return self.acceptance is not None and self.acceptance.in_progress

    def _accepted(self) -> tuple[AsyncLedger, Inbound, str]:
        acceptance, ledger, holder = self.acceptance, self._ledger, self.holder
        if acceptance is None or ledger is None or holder is None:
            raise LedgerUnavailableError(
                "this turn was not accepted by the ledger; pass message= and holder= to turn()"
            )
        if acceptance.duplicate or acceptance.inbound is None:
            raise LedgerUnavailableError(
                "the turn's message is a redelivery: acknowledge it and drop it, do not answer"
            )
        return ledger, acceptance.inbound, holder

    async def answer(
        self, *replies: Message, usage: Usage | None = None, send: bool = True
    ) -> Answer:
        """Store the replies, mark the message answered, record the send intents: one commit.

        The replies go to the session the message was accepted into. Send each
        ``answer.intents[n]`` (its ``idempotency_key``), then ``store.ledger.mark_sent``.
        """
        ledger, inbound, holder = self._accepted()
        return await ledger.answer(
            self.key, inbound.platform_message_id, *replies, holder=holder, usage=usage, send=send
        )

    async def fail(self, reason: str) -> Inbound:
        """Mark the message failed with ``reason`` (it leaves ``pending``)."""
        ledger, inbound, holder = self._accepted()
        return await ledger.fail(
            self.key, inbound.platform_message_id, holder=holder, reason=reason
        )


async def accepted_turn(
    ledger: AsyncLedger, key: str, source: SessionSource, message: Message, holder: str | None
) -> Turn:
    """The :class:`Turn` of ``turn(source, message=..., holder=...)``: the message accepted first.

    A redelivery rotates nothing: its turn looks the key up as ``get_or_create`` does with the
    message's platform id (the stored copy is ``turn.redelivered``).
    """
    if holder is None:
        raise InvalidArgumentError(
            "turn(message=...) needs holder=: the name of the worker that answers the message"
        )
    acceptance = await ledger.accept(source, message, holder=holder)
    lookup = acceptance.lookup
    if lookup is None:
        store = ledger.ledger.store
        pmid = message.platform_message_id
        lookup = await ledger.writes.read(store.get_or_create, source, platform_message_id=pmid)
    return Turn(
        key=key,
        lookup=lookup,
        entry=lookup.entry,
        acceptance=acceptance,
        holder=holder,
        ledger=ledger,
    )
