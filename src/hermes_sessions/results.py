"""What an append returns: the batch as stored, and whether it was a redelivery."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import overload

import attrs

from hermes_sessions.models import Message

__all__ = ["AppendResult"]


def _message_tuple(messages: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(messages)


@attrs.frozen
class AppendResult(Sequence[Message]):
    """What an append did: the batch's messages as the store now holds them.

    A batch whose first message carrying a ``platform_message_id`` is already in the session is
    a *redelivery* (a webhook sent twice): nothing of it is stored, ``duplicate`` is true, and
    the result holds the stored copies of the batch's messages that have one. Otherwise the
    result has one message per input, in order — new ones with their ids, and in place of a
    later message whose platform id was already stored, that stored copy (listed in
    ``existing`` too).

    .. versionadded:: 0.1.0
    """

    messages: tuple[Message, ...] = attrs.field(converter=_message_tuple)
    duplicate: bool = attrs.field(default=False, kw_only=True)
    """True when the batch was a redelivery and nothing was stored."""
    existing: tuple[Message, ...] = attrs.field(default=(), converter=_message_tuple, kw_only=True)
    """The messages of the batch that were already stored (skipped)."""
    revision: int | None = attrs.field(default=None, kw_only=True)
    """The session's revision after this append (unchanged by a redelivery): the value to pass
    as ``if_revision=`` next. ``None`` only from a backend that does not report it."""

    @property
    def stored(self) -> tuple[Message, ...]:
        """The messages this append wrote (empty for a redelivery)."""
        seen = {m.id for m in self.existing}
        written: list[Message] = []
        for message in self.messages:
            if message.id not in seen:
                seen.add(message.id)
                written.append(message)
        return tuple(written)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...
    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        return self.messages[index]

    def __len__(self) -> int:
        return len(self.messages)
