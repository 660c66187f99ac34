"""The one cattrs converter: models to JSON-able dicts and back.

Rules:

* datetimes become ISO 8601 strings in UTC (``2026-05-12T01:20:00.124181Z``); reading accepts any
  ISO 8601 offset and rejects naive values;
* ``None`` fields and default flags are left out, so stored records stay small;
* a :class:`~hermes_sessions.models.Message` is one flat object: its ``extra`` fields sit beside the
  known ones, and any field we do not know lands back in ``extra`` when read;
* anything malformed raises :class:`~hermes_sessions.exceptions.CorruptRecordError` (never a bare
  ``KeyError`` or cattrs error), carrying ``path``/``line`` when the caller supplies them.
"""

from __future__ import annotations

import functools
import json
import operator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import cattrs

from hermes_sessions.exceptions import CorruptRecordError, InvalidArgumentError
from hermes_sessions.models import (
    MESSAGE_FIELDS,
    Message,
    SessionEntry,
    SessionRecord,
    SessionSource,
)

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_sessions.models import JSONObject

__all__ = [
    "compact_json",
    "converter",
    "dump_datetime",
    "load_datetime",
    "message_dict",
    "structure",
    "unstructure",
]

T = TypeVar("T")

_COMPACT: Final = {
    (ascii_only, finite): json.JSONEncoder(
        ensure_ascii=ascii_only, allow_nan=not finite, separators=(",", ":")
    )
    for ascii_only in (False, True)
    for finite in (False, True)
}


def compact_json(value: object, *, ascii_only: bool = False, finite: bool = False) -> str:
    """``value`` as JSON with no spaces: the library's one encoder, for every stored line and row.

    Non-ASCII text stays readable unless ``ascii_only`` (then it is written as JSON escapes,
    which can also carry lone surrogates; UTF-8 cannot). ``finite`` refuses NaN and the
    infinities with ``ValueError``, as strict JSON readers require. The encoders are built once:
    this is on the path of every stored message.

    .. versionadded:: 0.1.0
    """
    return _COMPACT[ascii_only, finite].encode(value)


def dump_datetime(value: datetime) -> str:
    """Render an aware datetime as ISO 8601 in UTC with a ``Z`` suffix.

    .. versionadded:: 0.1.0
    """
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def load_datetime(value: object) -> datetime:
    """Parse an ISO 8601 string with an offset into an aware datetime (UTC).

    .. versionadded:: 0.1.0
    """
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 string, got {type(value).__name__}")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise InvalidArgumentError(f"datetime {value!r} has no UTC offset")
    return parsed.astimezone(UTC)


def _structure_message(data: object, _: object) -> Message:
    if not isinstance(data, dict):
        raise TypeError(f"a message must be a JSON object, got {type(data).__name__}")
    known: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, value in data.items():
        if name in MESSAGE_FIELDS:
            known[name] = value
        else:
            extra[name] = value
    if "timestamp" in known and known["timestamp"] is not None:
        known["timestamp"] = load_datetime(known["timestamp"])
    return Message(**known, extra=extra)


def message_dict(message: Message, *, skip: frozenset[str] = frozenset()) -> JSONObject:
    """The flat JSON object of a message, leaving out the fields named in ``skip``.

    The converter's hook for :class:`Message`; storage backends call it directly (with the
    fields they keep in columns skipped), since it is on the path of every append.

    .. versionadded:: 0.1.0
    """
    out: JSONObject = {}
    for name, value in zip(_MESSAGE_FIELD_ORDER, _MESSAGE_VALUES(message), strict=True):
        if value is None or name in skip:
            continue
        if name == "timestamp":
            out[name] = dump_datetime(value)
        elif name != "active" or value is not True:
            out[name] = value
    out.update(message.extra)
    return out


def _unstructure_message(message: Message) -> JSONObject:
    return message_dict(message)


_MESSAGE_FIELD_ORDER = tuple(a.name for a in attrs.fields(Message) if a.name != "extra")
_MESSAGE_VALUES = operator.attrgetter(*_MESSAGE_FIELD_ORDER)


def _omit_defaults(cls: type[Any], conv: cattrs.Converter) -> None:
    """Unstructure ``cls`` leaving out fields equal to their default (``None``, ``0``, ...)."""
    fields = attrs.fields(cls)

    def unstructure_hook(obj: Any) -> JSONObject:
        out: JSONObject = {}
        for field in fields:
            value = getattr(obj, field.name)
            default = field.default
            factory = getattr(default, "factory", None)  # an attrs.Factory
            if factory is not None:
                default = factory()
            if value is default or (value == default and type(value) is type(default)):
                continue
            out[field.name] = conv.unstructure(value)
        return out

    conv.register_unstructure_hook(cls, unstructure_hook)


def _strict(*kinds: type[Any]) -> Any:
    """A structure hook that checks the JSON type; never coerce (``bool("false")`` is true)."""

    def hook(value: object, _: object) -> object:
        if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
            return value
        expected = " or ".join(kind.__name__ for kind in kinds)
        raise TypeError(f"expected {expected}, got {type(value).__name__}")

    return hook


def make_converter() -> cattrs.Converter:
    """Build the converter; the library uses the single instance :func:`converter` returns."""
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict(str))
    conv.register_structure_hook(int, _strict(int))
    conv.register_structure_hook(bool, _strict(bool))
    conv.register_structure_hook(float, _strict(int, float))
    conv.register_unstructure_hook(datetime, dump_datetime)
    conv.register_structure_hook(datetime, lambda value, _: load_datetime(value))
    conv.register_structure_hook(Message, _structure_message)
    conv.register_unstructure_hook(Message, _unstructure_message)
    for cls in (SessionSource, SessionEntry, SessionRecord):
        _omit_defaults(cls, conv)
    return conv


@functools.cache
def converter() -> cattrs.Converter:
    """Return the library's converter (built on first use, so importing stays cheap).

    .. versionadded:: 0.1.0
    """
    return make_converter()


def unstructure(obj: Any) -> JSONObject:
    """Turn a model into a JSON-able dict.

    .. versionadded:: 0.1.0
    """
    result = converter().unstructure(obj)
    assert isinstance(result, dict)  # noqa: S101  # every model unstructures to an object
    return result


def structure(
    data: object, cls: type[T], *, path: Path | str | None = None, line: int | None = None
) -> T:
    """Build a ``cls`` model from a JSON-able dict, or raise :class:`CorruptRecordError`.

    .. versionadded:: 0.1.0
    """
    try:
        return converter().structure(data, cls)
    except cattrs.BaseValidationError as error:
        reason = "; ".join(cattrs.transform_error(error, path=cls.__name__))
        raise CorruptRecordError(reason, path=path, line=line) from error
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise CorruptRecordError(
            f"{cls.__name__}: {type(error).__name__}: {error}", path=path, line=line
        ) from error
