"""The words and checks shared by every configurable class: durability, timeouts, counts, sizes.

Backends and stores declare their options as attrs fields and validate them with the validators
here, so that the same kind of option is refused the same way everywhere: a value of the wrong
type raises ``TypeError``, a value out of range ``ValueError``, and both messages name the
option, the value given and what it accepts. ``bool`` is never taken for a number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from hermes_sessions.exceptions import InvalidArgumentError

if TYPE_CHECKING:
    import attrs

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DURABILITIES",
    "Durability",
    "durability",
    "non_negative_int",
    "optional_size",
    "positive_int",
    "positive_seconds",
    "seconds",
]

Durability: TypeAlias = Literal["full", "normal"]
"""How hard a persistent backend works to keep an acknowledged write.

``"full"``: it survives a power failure (data is synced to the disk before the call returns).
``"normal"``: it survives a crash of the process, not necessarily of the machine; faster.

.. versionadded:: 0.1.0
"""

DURABILITIES: Final[tuple[Durability, ...]] = ("full", "normal")
"""Every :data:`Durability`, in the order the documentation names them.

.. versionadded:: 0.1.0
"""


DEFAULT_MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""Every backend's ``max_message_bytes`` unless told otherwise: 16 MiB.

A message larger than this (its JSON form, in UTF-8 bytes) is refused with
:class:`~hermes_sessions.exceptions.MessageTooLargeError`; ``None`` turns the check off.

.. versionadded:: 0.1.0
"""


def durability(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Accept ``"full"`` or ``"normal"``; anything else is a ``ValueError``.

    .. versionadded:: 0.1.0
    """
    if value not in DURABILITIES:
        raise InvalidArgumentError(f"{attribute.name} must be 'full' or 'normal', got {value!r}")


def positive_int(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Accept an ``int`` of at least 1 (a limit or a threshold).

    .. versionadded:: 0.1.0
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise InvalidArgumentError(f"{attribute.name} must be at least 1, got {value}")


def non_negative_int(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Accept an ``int`` of 0 or more (a count of retries, say).

    .. versionadded:: 0.1.0
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(f"{attribute.name} must be 0 or more, got {value}")


def seconds(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Accept a number of seconds, 0 or more (``0``: try once, do not wait).

    .. versionadded:: 0.1.0
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{attribute.name} must be a number of seconds, got {value!r}")
    if not value >= 0:  # also refuses NaN
        raise InvalidArgumentError(f"{attribute.name} must be 0 or more seconds, got {value}")


def positive_seconds(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Accept a number of seconds greater than 0.

    .. versionadded:: 0.1.0
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{attribute.name} must be a number of seconds, got {value!r}")
    if not value > 0:  # also refuses NaN
        raise InvalidArgumentError(f"{attribute.name} must be more than 0 seconds, got {value}")


def optional_size(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Accept ``None`` (no limit) or a size in bytes of at least 1.

    .. versionadded:: 0.1.0
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{attribute.name} must be a number of bytes or None, got {type(value).__name__}"
        )
    if value < 1:
        raise InvalidArgumentError(f"{attribute.name} must be at least 1 byte or None, got {value}")
