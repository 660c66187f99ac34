"""The options of :class:`SessionStore` besides its backend, and their defaults."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Final, TypedDict

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.keys import KeyPolicy
    from hermes_sessions.models import Message
    from hermes_sessions.policy import ResetPolicies
    from hermes_sessions.protocols import Clock
    from hermes_sessions.store._incognito import IncognitoPolicy
    from hermes_sessions.store._retention import RetentionPolicy

__all__ = ["DEFAULT_LEASE_TTL", "StoreOptions", "identity"]

DEFAULT_LEASE_TTL: Final = timedelta(minutes=10)


class StoreOptions(TypedDict, total=False):
    """The keyword arguments of :class:`SessionStore` besides its backend (for ``open``).

    .. versionadded:: 0.1.0
    """

    keys: KeyPolicy
    resets: ResetPolicies
    clock: Clock
    active_work: Callable[[str], bool] | None
    redact: Callable[[Message], Message]
    lease_ttl: timedelta
    retention: RetentionPolicy | None
    incognito: IncognitoPolicy | None
    ledger: bool


def identity(message: Message) -> Message:
    """The default ``redact``: the message as it is."""
    return message
