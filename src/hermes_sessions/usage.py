"""Token and cost usage of a model call, added to a session's counters.

Pass it with the turn, ``store.append(session_id, question, reply, usage=Usage(...))``, and the
counters change in the same transaction as the messages (a turn stays one commit); usage that
arrives later goes through ``store.record_usage``.
"""

from __future__ import annotations

import math
from typing import Any, Final

import attrs

from hermes_sessions.exceptions import InvalidArgumentError

__all__ = ["Usage"]

_COUNTERS: Final = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
    "reasoning": "reasoning_tokens",
    "cost_usd": "estimated_cost_usd",
}
"""Usage field → the session record counter it adds to."""


def _count(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Usage.{attribute.name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(f"Usage.{attribute.name} must be >= 0, got {value}")


def _cost(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"Usage.{attribute.name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(
            f"Usage.{attribute.name} must be a finite number >= 0, got {value}"
        )


@attrs.frozen(kw_only=True)
class Usage:
    """What one model call used; every field is added to the session's counters.

    ``model``, when given, becomes the session's ``model``.

    .. versionadded:: 0.1.0
    """

    input: int = attrs.field(default=0, validator=_count)
    output: int = attrs.field(default=0, validator=_count)
    cache_read: int = attrs.field(default=0, validator=_count)
    cache_write: int = attrs.field(default=0, validator=_count)
    reasoning: int = attrs.field(default=0, validator=_count)
    cost_usd: float = attrs.field(default=0.0, validator=_cost)
    model: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )

    def values(self) -> dict[str, Any]:
        """The record fields it sets (``update_session(values=...)``)."""
        return {} if self.model is None else {"model": self.model}

    def increments(self) -> dict[str, int | float]:
        """The record counters it adds to (``update_session(increments=...)``), non-zero ones."""
        return {
            counter: getattr(self, name)
            for name, counter in _COUNTERS.items()
            if getattr(self, name)
        }
