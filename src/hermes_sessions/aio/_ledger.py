"""The turn ledger as coroutines: ``AsyncSessionStore.ledger`` (``ledger=True``).

Each method runs :class:`~hermes_sessions.store.Ledger`'s in a worker thread: ``answer``,
``fail`` and the marks with the async store's other writes (one commit for every call queued
meanwhile, on SQLite), ``accept`` and ``claim`` serialised per key like ``get_or_create``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import timedelta

    from hermes_sessions.aio._ownership import KeyLocks
    from hermes_sessions.aio._writers import WritePool
    from hermes_sessions.ledger import Inbound, Outbound
    from hermes_sessions.models import Message, SessionSource
    from hermes_sessions.store import Acceptance, Answer, Ledger
    from hermes_sessions.usage import Usage

__all__ = ["AsyncLedger"]


class AsyncLedger:
    """:class:`~hermes_sessions.store.Ledger`'s methods as coroutines (``store.ledger``).

    .. versionadded:: 0.1.0
    """

    def __init__(self, ledger: Ledger, writes: WritePool, keys: KeyLocks) -> None:
        self.ledger = ledger
        self.writes = writes
        self._keys = keys

    def __repr__(self) -> str:
        return f"<AsyncLedger of {self.ledger.store!r}>"

    async def accept(
        self,
        source: SessionSource,
        message: Message,
        *,
        holder: str,
        ttl: timedelta | None = None,
    ) -> Acceptance:
        """Async :meth:`Ledger.accept <hermes_sessions.store.Ledger.accept>`, serialised per key."""
        async with self._keys.hold(self.ledger.store.key_for(source)):
            return await self.writes.run(
                self.ledger.accept, source, message, holder=holder, ttl=ttl
            )

    async def claim(
        self,
        key: str,
        platform_message_id: str,
        *,
        holder: str,
        ttl: timedelta | None = None,
    ) -> Inbound | None:
        """Async :meth:`Ledger.claim <hermes_sessions.store.Ledger.claim>`."""
        return await self.writes.write(
            self.ledger.claim, key, platform_message_id, holder=holder, ttl=ttl
        )

    async def answer(
        self,
        key: str,
        platform_message_id: str,
        *replies: Message,
        holder: str,
        usage: Usage | None = None,
        send: bool = True,
        ttl: timedelta | None = None,
    ) -> Answer:
        """Async :meth:`Ledger.answer <hermes_sessions.store.Ledger.answer>` (one commit)."""
        return await self.writes.write(
            self.ledger.answer,
            key,
            platform_message_id,
            *replies,
            holder=holder,
            usage=usage,
            send=send,
            ttl=ttl,
        )

    async def fail(
        self, key: str, platform_message_id: str, *, holder: str, reason: str
    ) -> Inbound:
        """Async :meth:`Ledger.fail <hermes_sessions.store.Ledger.fail>`."""
        return await self.writes.write(
            self.ledger.fail, key, platform_message_id, holder=holder, reason=reason
        )

    async def get(self, key: str, platform_message_id: str) -> Inbound | None:
        """Async :meth:`Ledger.get <hermes_sessions.store.Ledger.get>`."""
        return await self.writes.read(self.ledger.get, key, platform_message_id)

    async def pending(self, *, key: str | None = None) -> list[Inbound]:
        """Async :meth:`Ledger.pending <hermes_sessions.store.Ledger.pending>`."""
        return await self.writes.read(self.ledger.pending, key=key)

    async def intent(self, idempotency_key: str) -> Outbound | None:
        """Async :meth:`Ledger.intent <hermes_sessions.store.Ledger.intent>`."""
        return await self.writes.read(self.ledger.intent, idempotency_key)

    async def intents(self, *, key: str | None = None, status: str | None = None) -> list[Outbound]:
        """Async :meth:`Ledger.intents <hermes_sessions.store.Ledger.intents>`."""
        return await self.writes.read(self.ledger.intents, key=key, status=status)

    async def unknown(self, *, key: str | None = None) -> list[Outbound]:
        """Async :meth:`Ledger.unknown <hermes_sessions.store.Ledger.unknown>`."""
        return await self.writes.read(self.ledger.unknown, key=key)

    async def reply(self, intent: Outbound) -> Message:
        """Async :meth:`Ledger.reply <hermes_sessions.store.Ledger.reply>`."""
        return await self.writes.read(self.ledger.reply, intent)

    async def retry(
        self, idempotency_key: str, *, holder: str, ttl: timedelta | None = None
    ) -> Outbound | None:
        """Async :meth:`Ledger.retry <hermes_sessions.store.Ledger.retry>`."""
        return await self.writes.write(self.ledger.retry, idempotency_key, holder=holder, ttl=ttl)

    async def mark_sent(
        self, idempotency_key: str, platform_message_id: str | None = None
    ) -> Outbound:
        """Async :meth:`Ledger.mark_sent <hermes_sessions.store.Ledger.mark_sent>`."""
        return await self.writes.write(self.ledger.mark_sent, idempotency_key, platform_message_id)

    async def mark_failed(self, idempotency_key: str, reason: str) -> Outbound:
        """Async :meth:`Ledger.mark_failed <hermes_sessions.store.Ledger.mark_failed>`."""
        return await self.writes.write(self.ledger.mark_failed, idempotency_key, reason)
