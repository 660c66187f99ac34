"""The codec of an encrypted store: models in the clear ↔ the sealed models a backend stores.

The one seam of encryption at rest: every built-in backend stores sealed models exactly as it
stores plain ones, so nothing below this module knows about the cipher.

* A message keeps in the clear what backends filter and count on — ``role``, ``timestamp``,
  ``token_count``, ``finish_reason``, ``active``, its id and session, and *how many* tool calls
  it has (``[{}, ...]``). Everything else (content, reasoning, tool calls and their arguments,
  tool call id and name, sender, ``extra``) is one envelope in ``extra["hermes_sealed"]``. Its
  ``content`` is the blinded token stream of its searchable text (what the backend indexes) and
  its ``platform_message_id`` a keyed hash (redelivery still compares equal ids).
* A record keeps ids, source, user id, model, counters and times; its ``system_prompt`` is an
  envelope; ``metadata`` and ``model_config`` become ``{"hermes_sealed": envelope}`` (metadata
  also holds the title's envelope under ``hermes_title``); the stored ``title`` is
  ``<hash of the lineage base>`` plus the title's ``#N`` suffix, so the backend's own title
  comparisons (``title_key``, ``lineage_key`` of :mod:`hermes_sessions.titles`) keep titles
  unique and lineages together exactly as in the clear.
* An entry keeps key, session, revision, times, platform, chat type and flags; its origin is
  ``SessionSource(platform, chat_type, chat_id=envelope of the whole origin)``, its
  ``display_name`` and ``resume_reason`` envelopes.
* State values are envelopes of their JSON (keys stay: they are the backend's merge unit).

Every envelope is bound to its place (GCM's associated data, :meth:`Codec.context`): the store
id recorded at creation, the kind (``session``, ``message``, ``entry``, ``state``), the fixed id
(a session id, a session key, a scope id) and the field; a message is bound to its session, role
and timestamp. A ciphertext copied to another place does not open there (``DecryptionError``);
every copy the library makes (branch, compression, import, key migration) is sealed anew.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeAlias, cast

import attrs

from hermes_sessions import text
from hermes_sessions.cipher import ENVELOPE_PREFIX, envelope_key_id, is_envelope
from hermes_sessions.exceptions import DecryptionError, EncryptionKeyError, InvalidArgumentError
from hermes_sessions.models import Message, SessionEntry, SessionRecord, SessionSource
from hermes_sessions.serde import (
    compact_json,
    dump_datetime,
    message_dict,
    structure,
    unstructure,
)
from hermes_sessions.state import DELETE
from hermes_sessions.titles import lineage_key, title_key

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from hermes_sessions.backends.encrypted._userkeys import UserKeys
    from hermes_sessions.cipher import Cipher
    from hermes_sessions.models import JSONObject

__all__ = [
    "PLAIN_MESSAGE_FIELDS",
    "RESERVED_SCOPES",
    "SEALED",
    "STORE",
    "TITLE",
    "Codec",
    "Owner",
    "SessionOwner",
    "message_owner",
    "record_owner",
]

SEALED: Final = "hermes_sealed"
"""The key of the envelope in a sealed message's ``extra``, metadata and model config."""
TITLE: Final = "hermes_title"
STORE: Final = "hermes_store"
"""The key of the store id in a sealed record's metadata (clear: it recovers a lost marker)."""
"""The key of the title's envelope in a sealed record's metadata."""
Owner: TypeAlias = "tuple[str, str] | None"
"""``(platform, user id)`` whose per-user key seals a value, or ``None`` (the data key)."""
SessionOwner: TypeAlias = "tuple[str, str | None] | None"
"""A session's ``(platform, user id or None)``, or ``None`` when unknown."""
_USER_ENVELOPE: Final = f"{ENVELOPE_PREFIX}u-"
RESERVED_SCOPES: Final = ("store|",)
"""Prefixes of the scope ids the library keeps for itself (``cipher.STORE_SCOPE``)."""
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
PLAIN_MESSAGE_FIELDS: Final = frozenset(
    {"id", "session_id", "active", "role", "timestamp", "token_count", "finish_reason"}
)


class _Searchable(NamedTuple):
    """The fields :func:`text.searchable_text` reads, from a decrypted message payload."""

    content: Any
    tool_calls: Any
    tool_name: Any


def _sealable(values: Mapping[str, Any]) -> bool:
    """Whether the sealed fields of ``update_session`` values have the types they must have."""
    texts = all(isinstance(values.get(name), str | None) for name in ("title", "system_prompt"))
    objects = all(isinstance(values.get(name, {}), dict) for name in ("metadata", "model_config"))
    return texts and objects


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _instant(at: datetime | None) -> str:
    """A timestamp as whole microseconds since the epoch (the same in every time zone)."""
    if at is None:
        return "-"
    delta = at - _EPOCH
    return str((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


class Codec:
    """Seals and opens models with one cipher, for the store ``store_id``.

    With ``user_keys``, a value with an *owner* (``(platform, user id)``) is sealed under that
    user's key instead (``_userkeys``); its envelope names the key, so opening needs no owner.
    """

    def __init__(self, cipher: Cipher, store_id: str, user_keys: UserKeys | None = None) -> None:
        self.cipher = cipher
        self.store_id = store_id
        self.user_keys = user_keys

    def context(self, kind: str, fixed_id: str, field: str) -> str:
        """The associated data of one field: store, kind, field, then the fixed id (last: free)."""
        return f"{self.store_id}\x00{kind}\x00{field}\x00{fixed_id}"

    def seal(
        self, plaintext: str, kind: str, fixed_id: str, field: str, owner: Owner = None
    ) -> str:
        """The envelope of ``plaintext`` for its place (under ``owner``'s key, if any)."""
        context = self.context(kind, fixed_id, field)
        keys = self.user_keys
        if owner is not None and keys is not None and keys.cipher is not None:
            key = keys.for_user(*owner)
            if key is not None:
                return keys.cipher.encrypt(plaintext, context=context, key=key)
        return self.cipher.encrypt(plaintext, context=context)

    def open(self, envelope: Any, kind: str, fixed_id: str, field: str) -> str:
        """The text of an envelope sealed for this place; ``DecryptionError`` for anything else."""
        if not is_envelope(envelope):
            raise DecryptionError(None, "a field that should be encrypted is stored in the clear")
        context = self.context(kind, fixed_id, field)
        if envelope.startswith(_USER_ENVELOPE):
            keys = self.user_keys
            if keys is None or keys.cipher is None:
                raise EncryptionKeyError(
                    envelope_key_id(envelope),
                    "it is a per-user key: open the store with user_keys=",
                )
            return keys.cipher.decrypt(envelope, context=context)
        return self.cipher.decrypt(envelope, context=context)

    # -- strings -----------------------------------------------------------------------------------

    def seal_text(
        self, value: str | None, kind: str, fixed_id: str, field: str, owner: Owner = None
    ) -> str | None:
        """The envelope of a string field (``None`` stays ``None``)."""
        return None if value is None else self.seal(value, kind, fixed_id, field, owner)

    def open_text(self, value: str | None, kind: str, fixed_id: str, field: str) -> str | None:
        """The string inside an envelope field."""
        return None if value is None else self.open(value, kind, fixed_id, field)

    def seal_object(
        self, value: JSONObject, session_id: str, field: str, owner: Owner = None
    ) -> JSONObject:
        """``{"hermes_sealed": envelope}`` of a record's JSON object (an empty one stays empty)."""
        if not value:
            return {}
        return {SEALED: self.seal(_json(value), "session", session_id, field, owner)}

    def open_object(self, value: JSONObject, session_id: str, field: str) -> JSONObject:
        """The JSON object inside ``{"hermes_sealed": envelope}``."""
        sealed = value.get(SEALED)
        if sealed is None:
            if value:
                raise DecryptionError(None, f"a session's {field} is stored in the clear")
            return {}
        opened = json.loads(self.open(sealed, "session", session_id, field))
        assert isinstance(opened, dict)  # noqa: S101  # only objects are sealed
        return opened

    # -- titles and platform ids -------------------------------------------------------------------

    def title_form(self, title: str) -> str:
        """The stored title: the keyed hash of the lineage base, then the ``#N`` suffix if any."""
        base = lineage_key(title)
        suffix = title_key(title)[len(base) :]
        return self.cipher.blind(base, "lineage") + suffix

    def lineage_form(self, title: str) -> str:
        """What a stored title's lineage compares as, for a title lookup by lineage."""
        return self.cipher.blind(lineage_key(title), "lineage")

    def platform_id(self, value: str | None) -> str | None:
        """The keyed hash a platform message id is stored (and looked up) as."""
        return None if value is None else self.cipher.blind(value, "platform-id")

    # -- messages ----------------------------------------------------------------------------------

    @staticmethod
    def message_place(session_id: str | None, message: Message) -> str:
        """The fixed id a message is sealed for: its session, role and timestamp."""
        return f"{session_id}\x00{message.role}\x00{_instant(message.timestamp)}"

    def seal_message(
        self, message: Message, session_id: str, session: SessionOwner = None
    ) -> Message:
        """The sealed form of a message stored in ``session_id``.

        ``session`` is the session's ``(platform, user id)``: the message is its sender's
        (``sender_id``), else the session's user's, when per-user keys are on.
        """
        payload = message_dict(message, skip=PLAIN_MESSAGE_FIELDS)
        blinded = self.cipher.blind_tokens(text.index_tokens(text.searchable_text(message)))
        calls = len(message.tool_calls) if message.tool_calls else 0
        body = compact_json(payload, ascii_only=True)
        return Message(
            role=message.role,
            content=" ".join(blinded) or None,
            id=message.id,
            session_id=message.session_id,
            tool_calls=[{} for _ in range(calls)] or None,
            timestamp=message.timestamp,
            token_count=message.token_count,
            finish_reason=message.finish_reason,
            platform_message_id=self.platform_id(message.platform_message_id),
            active=message.active,
            extra={
                SEALED: self.seal(
                    body,
                    "message",
                    self.message_place(session_id, message),
                    "body",
                    message_owner(session, message),
                )
            },
        )

    def _message_payload(self, message: Message, session_id: str | None) -> dict[str, Any]:
        sealed = message.extra.get(SEALED)
        if not isinstance(sealed, str):
            raise DecryptionError(None, "a stored message carries no envelope")
        place = self.message_place(session_id or message.session_id, message)
        data: dict[str, Any] = json.loads(self.open(sealed, "message", place, "body"))
        return data

    def searchable_text(self, message: Message, session_id: str | None = None) -> str:
        """:func:`text.searchable_text` of a sealed message's clear form, without building it."""
        data = self._message_payload(message, session_id)
        probe = _Searchable(data.get("content"), data.get("tool_calls"), data.get("tool_name"))
        return text.searchable_text(cast("Message", probe))

    def open_message(self, message: Message, session_id: str | None = None) -> Message:
        """The message in the clear from its sealed form (of ``session_id``, else its own)."""
        data = self._message_payload(message, session_id)
        data["role"] = message.role
        for name in ("id", "session_id", "token_count", "finish_reason"):
            value = getattr(message, name)
            if value is not None:
                data[name] = value
        if message.timestamp is not None:
            data["timestamp"] = dump_datetime(message.timestamp)
        if not message.active:
            data["active"] = False
        return structure(data, Message)

    # -- records -----------------------------------------------------------------------------------

    def seal_metadata(
        self, metadata: JSONObject, title: str | None, session_id: str, owner: Owner = None
    ) -> JSONObject:
        """A record's stored metadata: its envelope and the title's."""
        sealed = self.seal_object(metadata, session_id, "metadata", owner)
        sealed[STORE] = self.store_id
        if title is not None:
            sealed[TITLE] = self.seal(title, "session", session_id, "title", owner)
        return sealed

    def seal_record(self, record: SessionRecord) -> SessionRecord:
        """The sealed form of a session record (under its user's key, if per-user keys are on)."""
        session_id, owner = record.id, record_owner(record)
        return attrs.evolve(
            record,
            title=None if record.title is None else self.title_form(record.title),
            system_prompt=self.seal_text(
                record.system_prompt, "session", session_id, "system_prompt", owner
            ),
            metadata=self.seal_metadata(record.metadata, record.title, session_id, owner),
            model_config=self.seal_object(record.model_config, session_id, "model_config", owner),
        )

    def open_record(self, record: SessionRecord) -> SessionRecord:
        """The record in the clear from its sealed form."""
        session_id = record.id
        title = record.metadata.get(TITLE)
        if record.title is not None and title is None:
            raise DecryptionError(None, "a session's title is stored in the clear")
        return attrs.evolve(
            record,
            title=None if title is None else self.open(title, "session", session_id, "title"),
            system_prompt=self.open_text(
                record.system_prompt, "session", session_id, "system_prompt"
            ),
            metadata=self.open_object(
                {k: v for k, v in record.metadata.items() if k not in (TITLE, STORE)},
                session_id,
                "metadata",
            ),
            model_config=self.open_object(record.model_config, session_id, "model_config"),
        )

    def seal_values(
        self, session_id: str, values: Mapping[str, Any], current: SessionRecord | None
    ) -> dict[str, Any]:
        """``update_session`` values in sealed form; ``current`` is the sealed record now stored.

        Title and metadata share the stored metadata, so setting one keeps the other's envelope.
        """
        sealed = dict(values)
        if not _sealable(values):
            return sealed  # the backend refuses the wrong types with its own error
        owner = None if current is None else record_owner(current)
        if "user_id" in values and current is not None:
            owner = record_owner(attrs.evolve(current, user_id=values["user_id"]))
        if "system_prompt" in values:
            sealed["system_prompt"] = self.seal_text(
                values["system_prompt"], "session", session_id, "system_prompt", owner
            )
        if "model_config" in values:
            sealed["model_config"] = self.seal_object(
                values["model_config"], session_id, "model_config", owner
            )
        if "title" in values or "metadata" in values:
            stored = {} if current is None else current.metadata
            title = values.get("title") if "title" in values else stored.get(TITLE)
            if "title" in values:
                sealed["title"] = None if title is None else self.title_form(title)
                title = self.seal_text(title, "session", session_id, "title", owner)
            if "metadata" in values:
                metadata = self.seal_object(values["metadata"], session_id, "metadata", owner)
            else:
                metadata = {key: value for key, value in stored.items() if key == SEALED}
            metadata[STORE] = self.store_id
            if title is not None:
                metadata[TITLE] = title
            sealed["metadata"] = metadata
        return sealed

    # -- entries -----------------------------------------------------------------------------------

    def seal_entry(self, entry: SessionEntry) -> SessionEntry:
        """The sealed form of a routing entry (bound to its session key; its user's key)."""
        origin, key = entry.origin, entry.session_key
        owner = (
            None if origin is None or origin.user_id is None else (origin.platform, origin.user_id)
        )
        return attrs.evolve(
            entry,
            origin=None
            if origin is None
            else SessionSource(
                platform=origin.platform,
                chat_type=origin.chat_type,
                chat_id=self.seal(_json(unstructure(origin)), "entry", key, "origin", owner),
            ),
            display_name=self.seal_text(entry.display_name, "entry", key, "display_name", owner),
            resume_reason=self.seal_text(entry.resume_reason, "entry", key, "resume_reason", owner),
        )

    def open_entry(self, entry: SessionEntry) -> SessionEntry:
        """The entry in the clear from its sealed form."""
        origin, key = entry.origin, entry.session_key
        if origin is not None and origin.chat_id is None and _has_clear_origin(origin):
            raise DecryptionError(None, "a routing entry's origin is stored in the clear")
        return attrs.evolve(
            entry,
            origin=None
            if origin is None or origin.chat_id is None
            else structure(
                json.loads(self.open(origin.chat_id, "entry", key, "origin")), SessionSource
            ),
            display_name=self.open_text(entry.display_name, "entry", key, "display_name"),
            resume_reason=self.open_text(entry.resume_reason, "entry", key, "resume_reason"),
        )

    # -- state -------------------------------------------------------------------------------------

    def seal_changes(
        self,
        changes: Mapping[str, Mapping[str, Any]] | None,
        owner_of: Callable[[str], Owner] | None = None,
    ) -> dict[str, dict[str, Any]] | None:
        """State changes with every value an envelope of its JSON (``DELETE`` stays).

        ``owner_of(scope id)`` names the user whose key seals a scope (per-user keys).
        """
        if changes is None:
            return None
        sealed: dict[str, dict[str, Any]] = {}
        for scope, scope_changes in changes.items():
            if scope.startswith(RESERVED_SCOPES):
                raise InvalidArgumentError(f"the state scope {scope!r} is the library's own")
            owner = None if owner_of is None or self.user_keys is None else owner_of(scope)
            sealed[scope] = {
                key: value
                if value is DELETE
                else self.seal(_json(value), "state", scope, key, owner)
                for key, value in scope_changes.items()
            }
        return sealed

    def open_state(self, state: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Scope values in the clear."""
        return {
            scope: {
                key: json.loads(self.open(value, "state", scope, key))
                for key, value in values.items()
            }
            for scope, values in state.items()
        }


def record_owner(record: SessionRecord) -> Owner:
    """Whose key seals a record: its user's on its platform (``None`` without a user)."""
    return None if record.user_id is None else (record.source, record.user_id)


def message_owner(session: SessionOwner, message: Message) -> Owner:
    """Whose key seals a message: its sender's, else its session's user's."""
    if session is None:
        return None
    platform, user_id = session
    if message.sender_id is not None:
        return platform, message.sender_id
    return None if user_id is None else (platform, user_id)


def _has_clear_origin(origin: SessionSource) -> bool:
    """Whether a stored origin holds more than platform and chat type (written in the clear)."""
    return origin != SessionSource(platform=origin.platform, chat_type=origin.chat_type)
