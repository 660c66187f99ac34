"""The value types every part of hermes-sessions passes around.

All models are frozen attrs classes with keyword-only constructors and validators: a model that
exists is well-formed. Datetimes are always timezone-aware. JSON-shaped fields (message content
parts, tool calls, ``model_config``, ``metadata``, ``extra``) hold plain ``dict``/``list`` values;
treat them as read-only and build a new model with :func:`attrs.evolve` to change one.

One rule for odd values, so that every backend stores what a model holds and gives back the
same: text must be encodable as UTF-8 (a lone surrogate is refused; U+0000 is fine), and
JSON-shaped fields hold strict JSON only (string keys; no NaN or infinity; no sets, tuples,
bytes or other objects). A value breaking it raises
:class:`~hermes_sessions.exceptions.InvalidValueError` naming the field.

Conversion to and from JSON-able dicts lives in one place, :mod:`hermes_sessions.serde`.
"""

from __future__ import annotations

import math
import operator
import re
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

import attrs

from hermes_sessions.clock import require_aware
from hermes_sessions.exceptions import InvalidValueError
from hermes_sessions.ids import validate_session_id

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "CONVENTIONAL_CHAT_TYPES",
    "PLATFORM_CHAT_TYPES",
    "EndReason",
    "JSONObject",
    "Message",
    "MessageContent",
    "ResetDecision",
    "ResetReason",
    "RotateReason",
    "SessionEntry",
    "SessionRecord",
    "SessionSource",
]

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object: string keys, JSON-able values.

.. versionadded:: 0.1.0
"""

MessageContent: TypeAlias = str | list[JSONObject] | None
"""Message content: text, a list of multimodal parts (JSON objects), or nothing.

.. versionadded:: 0.1.0
"""

ResetReason: TypeAlias = Literal["idle", "daily", "suspended", "retention", "size"]
"""Why a session was reset automatically (``retention``: a retention pass deleted the key's old
live session, see ``docs/retention.md``; ``size``: it reached ``max_messages``/``max_tokens``).

.. versionadded:: 0.1.0
"""

EndReason: TypeAlias = Literal[
    "session_reset",
    "idle",
    "daily",
    "suspended",
    "session_switch",
    "compression",
    "branched",
    "pruned",
    "key_merged",
    "retention",
    "size",
]
"""Why the library ends a session (``key_merged``: a key migration merged it into another key's
history, see ``docs/key-migration.md``). Hosts may end sessions with reasons of their own, so
``SessionRecord.end_reason`` and the backends' ``end_session`` take any string.

.. versionadded:: 0.1.0
"""

RotateReason: TypeAlias = Literal[
    "created",
    "idle",
    "daily",
    "suspended",
    "session_reset",
    "session_switch",
    "branched",
    "compression",
    "retention",
    "size",
]
"""Why a key's session id changed (``RotateEvent.reason``): first contact, an automatic reset,
``/new``, ``/resume``, ``/branch`` or compression.

.. versionadded:: 0.1.0
"""

SLUG_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9_.-]*")

CONVENTIONAL_CHAT_TYPES: Final = frozenset({"dm", "group", "channel", "thread"})
"""The chat types keys, reset policies and the private-lane rule are written for.

.. versionadded:: 0.1.0
"""

PLATFORM_CHAT_TYPES: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "telegram": MappingProxyType({"private": "dm", "supergroup": "group"}),
        "feishu": MappingProxyType({"p2p": "dm", "topic_group": "group"}),
        "lark": MappingProxyType({"p2p": "dm", "topic_group": "group"}),
        # Slack's "group" (a private channel) is also a conventional name, so it stays "group".
        "slack": MappingProxyType({"im": "dm", "mpim": "group"}),
        # discord.py's ChannelType names.
        "discord": MappingProxyType(
            {
                "private": "dm",
                "text": "group",
                "voice": "group",
                "stage_voice": "group",
                "news": "channel",
                "forum": "channel",
                "media": "channel",
                "public_thread": "thread",
                "private_thread": "thread",
                "news_thread": "thread",
            }
        ),
        # The Stream API's conversationType: "1" one-to-one, "2" group.
        "dingtalk": MappingProxyType({"1": "dm", "2": "group"}),
    }
)
"""Per platform, its own chat-type names and the conventional type each one means.

A conventional name is never renamed (keys built with it stay as they are), so names a platform
shares with the conventions (Telegram ``group``, Slack ``channel``) need no entry.

.. versionadded:: 0.1.0
"""


# -- validators and converters shared by the models ------------------------------------------------


def _where(instance: object, attribute: attrs.Attribute[Any]) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


def _check_text(value: str, field: str) -> None:
    """Refuse text that cannot be written as UTF-8 (a lone surrogate), naming ``field``."""
    if value.isascii():
        return
    try:
        value.encode()
    except UnicodeEncodeError as error:
        raise InvalidValueError(
            field,
            f"holds a lone surrogate (U+{ord(value[error.start]):04X} at index {error.start}), "
            "which no UTF-8 file or database can store; decode the text with "
            "errors='replace' (U+FFFD) or drop the character",
        ) from None


_JSON_ADVICE: Final = "use dict (string keys), list, str, int, float, bool or None"


def check_json(value: object, field: str) -> None:
    """Refuse anything strict JSON cannot hold, naming where inside ``field`` it is."""
    stack: list[tuple[object, str]] = [(value, field)]
    while stack:
        item, where = stack.pop()
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidValueError(where, f"is {item!r}, and JSON has no NaN or infinity")
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise InvalidValueError(
                        where, f"has the key {key!r}: JSON object keys are strings"
                    )
                _check_text(key, where)
                stack.append((inner, f"{where}[{key!r}]"))
        elif isinstance(item, list):
            stack.extend((inner, f"{where}[{n}]") for n, inner in enumerate(item))
        else:
            raise InvalidValueError(
                where, f"is of type {type(item).__name__}, which is not JSON; {_JSON_ADVICE}"
            )


def _finite(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidValueError(
            _where(instance, attribute), f"is {value!r}, and JSON has no NaN or infinity"
        )


def _slug(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or SLUG_PATTERN.fullmatch(value) is None:
        raise InvalidValueError(
            _where(instance, attribute),
            f"must be a lowercase slug matching [a-z0-9][a-z0-9_.-]* (like 'telegram' or "
            f"'group'), got {value!r}",
        )


def _optional_slug(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _slug(instance, attribute, value)


def _aware(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    require_aware(value, attribute.name)


def _optional_aware(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _aware(instance, attribute, value)


def _session_id(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    validate_session_id(value)


def _optional_session_id(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _session_id(instance, attribute, value)


def _non_negative(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidValueError(_where(instance, attribute), f"must be >= 0, got {value}")


def _optional_non_negative(
    instance: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    if value is not None:
        _non_negative(instance, attribute, value)


def _json_object(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"{attribute.name} must be a dict with string keys (a JSON object)")
    check_json(value, _where(instance, attribute))


def _optional_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a str or None, got {type(value).__name__}")
    if not value.isascii():  # ASCII is always valid UTF-8: no field name to build
        _check_text(value, _where(instance, attribute))


def _bool(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool, got {type(value).__name__}")


def _id_text(value: str | int | None) -> str | None:
    """Normalise an external identifier: numbers become strings, empty means absent."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int):  # checked at run time too
        raise TypeError(f"identifiers must be str or int, got {type(value).__name__}")
    return str(value)


def _text_field() -> Any:
    return attrs.field(default=None, validator=_optional_str)


# -- where a message came from ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionSource:
    """Where an inbound message came from: the input to session-key building.

    Identifiers may be given as ``int`` (converted with ``str()``); an empty string means "absent"
    and is stored as ``None``. Only ``platform``, ``chat_type``, ``chat_id``, ``thread_id``,
    ``user_id`` and ``user_id_alt`` take part in the session key; the rest is descriptive.

    ``chat_type`` may be given in the platform's own words (Telegram ``private`` or
    ``supergroup``, Feishu ``p2p``, Slack ``im``, discord.py's ``public_thread``, DingTalk
    ``"1"``): it is normalised onto the conventional ``dm``/``group``/``channel``/``thread`` by
    :data:`PLATFORM_CHAT_TYPES` and the raw name is kept as ``platform_chat_type``. A name the
    table does not know is kept as given.

    .. versionadded:: 0.1.0
    """

    platform: str = attrs.field(validator=_slug)
    """Lowercase platform slug (``feishu``, ``telegram``, ``discord``, ``whatsapp``, ...)."""
    chat_id: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    """The chat (DM, group, channel) the message arrived in."""
    chat_type: str = attrs.field(default="dm", validator=_slug)
    """Conventionally ``dm``, ``group``, ``channel`` or ``thread``."""
    user_id: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    """The sender's platform id."""
    user_id_alt: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    """A stable alternate sender id (Feishu union_id, Signal UUID); preferred in keys."""
    thread_id: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    """Thread or forum topic within the chat."""
    chat_name: str | None = _text_field()
    user_name: str | None = _text_field()
    chat_topic: str | None = _text_field()
    scope_id: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    """Workspace, guild or tenant."""
    parent_chat_id: str | None = attrs.field(
        default=None, converter=_id_text, validator=_optional_str
    )
    message_id: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    """The platform's id of the message that produced this source."""
    platform_chat_type: str | None = _text_field()
    """The platform's own chat-type name when it differs from ``chat_type`` (``supergroup``).

    .. versionadded:: 0.1.0
    """

    def __attrs_post_init__(self) -> None:
        conventional = PLATFORM_CHAT_TYPES.get(self.platform, {}).get(self.chat_type)
        if conventional is None:
            return
        if self.platform_chat_type is None:
            object.__setattr__(self, "platform_chat_type", self.chat_type)
        object.__setattr__(self, "chat_type", conventional)

    @property
    def participant(self) -> str | None:
        """The sender id used in keys and ownership: ``user_id_alt`` if set, else ``user_id``."""
        return self.user_id_alt or self.user_id


# -- messages --------------------------------------------------------------------------------------


def _content(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, str):
        if not value.isascii():
            _check_text(value, _where(instance, attribute))
        return
    if isinstance(value, list) and all(isinstance(part, dict) for part in value):
        check_json(value, _where(instance, attribute))
        return
    raise TypeError(
        "content must be a str, None, or a list of multimodal parts (dicts), "
        f"got {type(value).__name__}"
    )


def _tool_calls(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not (isinstance(value, list) and all(isinstance(call, dict) for call in value)):
        raise TypeError("tool_calls must be None or a list of dicts")
    check_json(value, _where(instance, attribute))


def _role(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidValueError(
            _where(instance, attribute), f"must be a non-empty string such as 'user', got {value!r}"
        )
    if not value.isascii():
        _check_text(value, _where(instance, attribute))


def _extra(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _json_object(instance, attribute, value)
    assert isinstance(value, dict)  # noqa: S101  # narrowed by the check above
    clashes = sorted(MESSAGE_FIELDS.intersection(value))
    if clashes:
        raise InvalidValueError(
            _where(instance, attribute),
            f"must not repeat message fields {clashes}; set them as attributes instead",
        )


@attrs.frozen(kw_only=True)
class Message:
    """One message of a transcript.

    Construct new messages with just ``Message(role="user", content="hi")``: the backend assigns
    ``id`` and ``session_id`` and the store fills ``timestamp``. Any JSON field a host or provider
    adds that is not an attribute here (``reasoning_details``, provider items, ...) goes into
    ``extra`` and is stored and returned losslessly.

    .. versionadded:: 0.1.0
    """

    role: str = attrs.field(validator=_role)
    """``system``, ``user``, ``assistant``, ``tool``, or a host-defined role."""
    content: MessageContent = attrs.field(default=None, validator=_content)
    id: int | None = attrs.field(default=None, validator=_optional_non_negative)
    """Assigned by the backend; increases in insertion order."""
    session_id: str | None = attrs.field(default=None, validator=_optional_session_id)
    tool_calls: list[JSONObject] | None = attrs.field(default=None, validator=_tool_calls)
    tool_call_id: str | None = _text_field()
    tool_name: str | None = _text_field()
    timestamp: datetime | None = attrs.field(default=None, validator=_optional_aware)
    token_count: int | None = attrs.field(default=None, validator=_optional_non_negative)
    finish_reason: str | None = _text_field()
    reasoning: str | None = _text_field()
    platform_message_id: str | None = attrs.field(
        default=None, converter=_id_text, validator=_optional_str
    )
    """The platform's id; appends are idempotent on it within a session."""
    sender_id: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    """Who spoke, in shared sessions (used by ``erase_user``)."""
    sender_name: str | None = _text_field()
    active: bool = attrs.field(default=True, validator=_bool)
    """``False`` once soft-deleted (undo, retract); restorable."""
    extra: JSONObject = attrs.field(factory=dict, validator=_extra)
    """Every other JSON field, kept losslessly."""


MESSAGE_FIELDS: Final = frozenset(a.name for a in attrs.fields(Message)) - {"extra"}
"""Attribute names of :class:`Message` that are not free-form ``extra`` keys."""

_ALL_MESSAGE_FIELDS: Final = tuple(field.name for field in attrs.fields(Message))
_MESSAGE_VALUES: Final = operator.attrgetter(*_ALL_MESSAGE_FIELDS)
# The slots' own setters fill a copy of a frozen message without its validators (``stamped``).
_MESSAGE_SETTERS: Final = tuple(vars(Message)[name].__set__ for name in _ALL_MESSAGE_FIELDS)
_SET_MESSAGE_ID: Final = vars(Message)["id"].__set__
_SET_MESSAGE_SESSION: Final = vars(Message)["session_id"].__set__
_SET_MESSAGE_TIME: Final = vars(Message)["timestamp"].__set__


def entry_from_storage(**values: Any) -> SessionEntry:
    """A :class:`SessionEntry` from values a backend stored itself, without re-validating them.

    Reading an entry is on the path of every message. A backend validated the entry when it was
    written and checks what it reads back (types of its own columns, the JSON body through the
    converter), so running every validator again on each read is pure cost. Every field must
    be given. For library internals only.
    """
    entry = object.__new__(SessionEntry)
    for name in _ENTRY_FIELDS:
        object.__setattr__(entry, name, values[name])
    return entry


def stamped(
    message: Message,
    *,
    message_id: int | None = None,
    session_id: str | None = None,
    timestamp: datetime | None = None,
) -> Message:
    """``message`` with the fields the library assigns filled in, without re-validating it.

    ``attrs.evolve`` runs every validator again, a large share of the cost of an append. The
    message was validated when it was built, and the values set here come from the library
    itself (an id it assigned, a session id it stored, an aware time from its clock), so they
    are copied over directly. ``None`` leaves a field as it is. For library internals only.
    """
    new = object.__new__(Message)
    for setter, value in zip(_MESSAGE_SETTERS, _MESSAGE_VALUES(message), strict=True):
        setter(new, value)
    if message_id is not None:
        _SET_MESSAGE_ID(new, message_id)
    if session_id is not None:
        _SET_MESSAGE_SESSION(new, session_id)
    if timestamp is not None:
        _SET_MESSAGE_TIME(new, timestamp)
    return new


# -- routing entries and session records -----------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionEntry:
    """The routing entry of one session key: which session is current, plus a few flags.

    ``revision`` increases with every write; writes name the revision they read and fail with
    :class:`~hermes_sessions.exceptions.ConflictError` if it moved on (compare-and-swap).

    .. versionadded:: 0.1.0
    """

    session_key: str = attrs.field(validator=[attrs.validators.instance_of(str), _optional_str])
    session_id: str = attrs.field(validator=_session_id)
    created_at: datetime = attrs.field(validator=_aware)
    updated_at: datetime = attrs.field(validator=_aware)
    """Last activity; drives the reset policy."""
    origin: SessionSource | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.instance_of(SessionSource)),
    )
    """The source that created the entry."""
    display_name: str | None = _text_field()
    platform: str | None = attrs.field(default=None, validator=_optional_slug)
    chat_type: str | None = attrs.field(default=None, validator=_optional_slug)
    suspended: bool = attrs.field(default=False, validator=_bool)
    resume_pending: bool = attrs.field(default=False, validator=_bool)
    resume_reason: str | None = _text_field()
    last_prompt_tokens: int | None = attrs.field(default=None, validator=_optional_non_negative)
    previous_session_id: str | None = attrs.field(default=None, validator=_optional_session_id)
    """The session the key was pointed away from by its last reset, resume or branch."""
    pending_reset: ResetReason | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.in_(("retention",)))
    )
    """A reset done while the chat was silent (``retention``), told by the key's next lookup."""
    revision: int = attrs.field(default=0, validator=_non_negative)


_ENTRY_FIELDS: Final = tuple(field.name for field in attrs.fields(SessionEntry))


@attrs.frozen(kw_only=True)
class SessionRecord:
    """The metadata of one transcript (one session id).

    .. versionadded:: 0.1.0
    """

    id: str = attrs.field(validator=_session_id)
    source: str = attrs.field(validator=_slug)
    """Platform slug of the conversation (``cli``, ``telegram``, ``tool``, ...)."""
    started_at: datetime = attrs.field(validator=_aware)
    session_key: str | None = _text_field()
    """The key that created the session; lets the routing index be rebuilt from transcripts."""
    user_id: str | None = attrs.field(default=None, converter=_id_text, validator=_optional_str)
    title: str | None = _text_field()
    parent_session_id: str | None = attrs.field(default=None, validator=_optional_session_id)
    ended_at: datetime | None = attrs.field(default=None, validator=_optional_aware)
    end_reason: str | None = _text_field()
    """Why the session ended (:data:`EndReason`, or a host's own string); ``None`` while open."""
    last_active_at: datetime | None = attrs.field(default=None, validator=_optional_aware)
    """Time of the newest message (backends keep it; ``started_at`` until the first message)."""
    message_count: int = attrs.field(default=0, validator=_non_negative)
    """Active messages."""
    tool_call_count: int = attrs.field(default=0, validator=_non_negative)
    """Tool calls of active messages."""
    input_tokens: int = attrs.field(default=0, validator=_non_negative)
    output_tokens: int = attrs.field(default=0, validator=_non_negative)
    cache_read_tokens: int = attrs.field(default=0, validator=_non_negative)
    cache_write_tokens: int = attrs.field(default=0, validator=_non_negative)
    reasoning_tokens: int = attrs.field(default=0, validator=_non_negative)
    estimated_cost_usd: float | None = attrs.field(
        default=None,
        validator=attrs.validators.optional([attrs.validators.instance_of((int, float)), _finite]),
    )
    model: str | None = _text_field()
    model_config: JSONObject = attrs.field(factory=dict, validator=_json_object)
    system_prompt: str | None = _text_field()
    archived: bool = attrs.field(default=False, validator=_bool)
    metadata: JSONObject = attrs.field(factory=dict, validator=_json_object)
    """Free-form, descriptive host data (not state: see :mod:`hermes_sessions.state`)."""
    revision: int = attrs.field(default=0, validator=_non_negative)
    """Bumped by every change of the transcript or of the session's state (``if_revision=``)."""

    @property
    def is_ended(self) -> bool:
        """Whether the session has an end reason (a rotation or the host ended it)."""
        return self.end_reason is not None

    @property
    def last_active(self) -> datetime:
        """When the session was last active: its newest message, else its start."""
        return self.last_active_at or self.started_at


# -- outcomes --------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResetDecision:
    """Why a key's session was rotated automatically, for the host to tell the user.

    ``notify`` already applies the policy's ``notify`` flag and ``notify_exclude_platforms``.

    .. versionadded:: 0.1.0
    """

    reason: ResetReason = attrs.field(validator=attrs.validators.in_(get_args(ResetReason)))
    previous_session_id: str = attrs.field(validator=_session_id)
    notify: bool = attrs.field(validator=_bool)
