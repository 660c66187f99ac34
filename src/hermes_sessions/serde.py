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

from hermes_sessions.exceptions import CorruptRecordError, InvalidArgumentError
from hermes_sessions.models import (
    MESSAGE_FIELDS,
    Message,
    SessionEntry,
    SessionRecord,
    SessionSource,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    import cattrs

    from hermes_sessions.models import JSONObject

__all__ = [
    "compact_json",
    "converter",
    "dump_datetime",
    "entry_body_values",
    "load_datetime",
    "message_dict",
    "stored_message",
    "stored_messages",
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


_NEW: Final = object.__new__
_OPTIONAL_FIELDS: Final = (
    "tool_call_id",
    "tool_name",
    "token_count",
    "finish_reason",
    "reasoning",
    "platform_message_id",
    "sender_id",
    "sender_name",
)
_OPTIONAL_SET: Final = frozenset(_OPTIONAL_FIELDS)


def _setter(name: str) -> Callable[[Message, Any], None]:
    """The slot's own setter: fills a field of a frozen message (a third cheaper than setattr)."""
    setter: Callable[[Message, Any], None] = vars(Message)[name].__set__
    return setter


_SET_ROLE: Final = _setter("role")
_SET_CONTENT: Final = _setter("content")
_SET_ID: Final = _setter("id")
_SET_SESSION_ID: Final = _setter("session_id")
_SET_TOOL_CALLS: Final = _setter("tool_calls")
_SET_TIMESTAMP: Final = _setter("timestamp")
_SET_ACTIVE: Final = _setter("active")
_SET_EXTRA: Final = _setter("extra")
_OPTIONAL_SETTERS: Final = tuple((name, _setter(name)) for name in _OPTIONAL_FIELDS)
_COLUMN_KEYS: Final = frozenset({"id", "session_id", "active"})
_CONTENT_TYPES: Final = (str, list, type(None))
_from_iso: Final = datetime.fromisoformat


def _drop_columns(data: dict[str, Any]) -> None:
    for name in _COLUMN_KEYS:
        data.pop(name, None)


def stored_message(
    data: dict[str, Any],
    message_id: int,
    session_id: str,
    active: bool = True,  # noqa: FBT001, FBT002
) -> Message:
    """A :class:`Message` from the JSON body a backend wrote itself, without re-validating it.

    Reading the context window is on the path of every turn, and running every validator of
    every field of 40 messages again costs most of the read. The body was made by
    :func:`message_dict` from a message validated when it was appended, so only what decoding
    needs is checked: the body is an object, ``role`` is text, ``content`` text, a list or null,
    ``tool_calls`` a list or null, and ``timestamp`` an aware ISO 8601 time. Anything else
    raises ``TypeError`` or ``ValueError``, which the backends' row decoders turn into
    :class:`~hermes_sessions.exceptions.CorruptRecordError` naming the row. ``data`` is consumed
    (it becomes the message's ``extra``). Backends that read input from outside the library
    (bundles, imports) use :func:`structure` instead. For library internals only.


    .. versionadded:: 0.1.0
    """
    if type(data) is not dict:
        raise TypeError(f"a message must be a JSON object, got {type(data).__name__}")
    take = data.pop
    role = take("role", None)
    if type(role) is not str:
        raise TypeError(f"a message role must be text, got {type(role).__name__}")
    content = take("content", None)
    if not isinstance(content, _CONTENT_TYPES):
        raise TypeError(f"message content must be text, a list or null, not {content!r:.40}")
    tool_calls = take("tool_calls", None)
    if tool_calls is not None and type(tool_calls) is not list:
        raise TypeError(f"tool_calls must be a list, got {type(tool_calls).__name__}")
    timestamp = take("timestamp", None)
    if timestamp is not None:
        timestamp = _from_iso(timestamp)
        if timestamp.tzinfo is not UTC:
            if timestamp.tzinfo is None:
                raise InvalidArgumentError(f"datetime {timestamp} has no UTC offset")
            timestamp = timestamp.astimezone(UTC)
    if not _COLUMN_KEYS.isdisjoint(data):  # kept in columns; a body never repeats them
        _drop_columns(data)
    message = _NEW(Message)
    _SET_ROLE(message, role)
    _SET_CONTENT(message, content)
    _SET_ID(message, message_id)
    _SET_SESSION_ID(message, session_id)
    _SET_TOOL_CALLS(message, tool_calls)
    _SET_TIMESTAMP(message, timestamp)
    _SET_ACTIVE(message, active)
    present = _OPTIONAL_SET.intersection(data)
    for name, setter in _OPTIONAL_SETTERS:
        setter(message, take(name) if name in present else None)
    _SET_EXTRA(message, data)
    return message


_SCAN: Final = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set in __init__


def stored_messages(rows: Iterable[Sequence[Any]], session_id: str) -> list[Message]:
    """Messages from ``(id, active, body)`` rows the library wrote (see :func:`stored_message`).

    The read of a context window: each body is decoded by the JSON scanner directly (a stored
    body is one compact object). A damaged row raises ``ValueError`` or ``TypeError`` without
    saying which; backends then decode the rows one by one to name it. For library internals.


    .. versionadded:: 0.1.0
    """
    scan = _SCAN
    out: list[Message] = []
    append = out.append
    try:
        for message_id, active, body in rows:
            data, end = scan(body, 0)
            if end != len(body):
                raise InvalidArgumentError("extra data after the JSON object")
            append(stored_message(data, message_id, session_id, bool(active)))
    except StopIteration as error:
        raise InvalidArgumentError(
            f"a message body is not JSON (at character {error.value})"
        ) from None
    return out


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


_PLAIN_MODELS: Final[dict[type[Any], tuple[tuple[str, Any, Any], ...]]] = {
    cls: tuple(
        (field.name, field.default, getattr(field.default, "factory", None))
        for field in attrs.fields(cls)
    )
    for cls in (SessionSource, SessionEntry, SessionRecord)
}


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
    import cattrs  # noqa: PLC0415  # loaded on first need: storing and reading turns do not

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


def _plain(value: Any) -> Any:
    """``value`` as the converter unstructures it, for the types models hold (no cattrs)."""
    kind = type(value)
    if kind in _PLAIN_MODELS:
        return _model_dict(value)
    if kind is datetime:
        return dump_datetime(value)
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [_plain(item) for item in value]
    if kind is Message:
        return message_dict(value)
    return value


def _model_dict(obj: Any) -> JSONObject:
    """A source, entry or record as a dict leaving out default fields (as ``_omit_defaults``)."""
    out: JSONObject = {}
    for name, plain_default, factory in _PLAIN_MODELS[type(obj)]:
        value = getattr(obj, name)
        default = plain_default if factory is None else factory()
        if value is default or (value == default and type(value) is type(default)):
            continue
        out[name] = _plain(value)
    return out


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ENTRY_COLUMN_FIELDS: Final = frozenset(
    {"session_key", "session_id", "created_at", "updated_at", "last_prompt_tokens", "revision"}
)
_SOURCE_FIELDS: Final = frozenset(field.name for field in attrs.fields(SessionSource))
_ENTRY_BODY_FIELDS: Final = (
    frozenset(field.name for field in attrs.fields(SessionEntry)) - _ENTRY_COLUMN_FIELDS
)


def entry_body_values(data: object) -> SessionEntry:
    """A routing entry holding the fields of a stored entry body (the rest are placeholders).

    Backends keep an entry's key, session, times, tokens and revision in columns and the rest
    (``origin``, display name, flags, ...) in a JSON body; this checks such a body through the
    models' own validators, without building the converter (on the first turn of a process).
    Raises ``TypeError`` or ``ValueError`` on a body the library did not write.


    .. versionadded:: 0.1.0
    """
    if type(data) is not dict:
        raise TypeError(f"an entry body must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - _ENTRY_BODY_FIELDS)
    if unknown:
        raise InvalidArgumentError(f"unknown entry fields {unknown}")
    values = dict(data)
    origin = values.get("origin")
    if origin is not None:
        if type(origin) is not dict:
            raise TypeError(f"an entry origin must be a JSON object, got {type(origin).__name__}")
        extra = sorted(set(origin) - _SOURCE_FIELDS)
        if extra:
            raise InvalidArgumentError(f"unknown source fields {extra}")
        values["origin"] = SessionSource(**origin)
    return SessionEntry(
        session_key="", session_id="x", created_at=_EPOCH, updated_at=_EPOCH, **values
    )


def unstructure(obj: Any) -> JSONObject:
    """Turn a model into a JSON-able dict.

    Sources, entries, records and messages are turned by hand (the same dicts the converter
    makes), so storing them does not build the converter: it is only needed on first use of
    another type, which keeps the first turn of a process cheap.

    .. versionadded:: 0.1.0
    """
    if type(obj) in _PLAIN_MODELS:
        return _model_dict(obj)
    if type(obj) is Message:
        return message_dict(obj)
    result = converter().unstructure(obj)
    assert isinstance(result, dict)  # noqa: S101  # every model unstructures to an object
    return result


def structure(
    data: object, cls: type[T], *, path: Path | str | None = None, line: int | None = None
) -> T:
    """Build a ``cls`` model from a JSON-able dict, or raise :class:`CorruptRecordError`.

    .. versionadded:: 0.1.0
    """
    import cattrs  # noqa: PLC0415  # loaded with the converter (see make_converter)

    try:
        return converter().structure(data, cls)
    except cattrs.BaseValidationError as error:
        reason = "; ".join(cattrs.transform_error(error, path=cls.__name__))
        raise CorruptRecordError(reason, path=path, line=line) from error
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise CorruptRecordError(
            f"{cls.__name__}: {type(error).__name__}: {error}", path=path, line=line
        ) from error
