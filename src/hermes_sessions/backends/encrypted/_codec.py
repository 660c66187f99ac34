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
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

import attrs

from hermes_sessions import text
from hermes_sessions.cipher import is_envelope
from hermes_sessions.exceptions import DecryptionError
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
    from collections.abc import Mapping

    from hermes_sessions.cipher import Cipher
    from hermes_sessions.models import JSONObject

__all__ = ["PLAIN_MESSAGE_FIELDS", "SEALED", "TITLE", "Codec"]

SEALED: Final = "hermes_sealed"
"""The key of the envelope in a sealed message's ``extra``, metadata and model config."""
TITLE: Final = "hermes_title"
"""The key of the title's envelope in a sealed record's metadata."""
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


class Codec:
    """Seals and opens models with one cipher."""

    def __init__(self, cipher: Cipher) -> None:
        self.cipher = cipher

    # -- strings -----------------------------------------------------------------------------------

    def seal_text(self, value: str | None) -> str | None:
        """The envelope of a string field (``None`` stays ``None``)."""
        return None if value is None else self.cipher.encrypt(value)

    def open_text(self, value: str | None) -> str | None:
        """The string inside an envelope field."""
        if value is None:
            return None
        if not is_envelope(value):
            raise DecryptionError(None, "a field that should be encrypted is stored in the clear")
        return self.cipher.decrypt(value)

    def seal_object(self, value: JSONObject) -> JSONObject:
        """``{"hermes_sealed": envelope}`` of a JSON object (an empty one stays empty)."""
        return {SEALED: self.cipher.encrypt(_json(value))} if value else {}

    def open_object(self, value: JSONObject) -> JSONObject:
        """The JSON object inside ``{"hermes_sealed": envelope}``."""
        sealed = value.get(SEALED)
        if sealed is None:
            return {}
        opened = json.loads(self.cipher.decrypt(sealed))
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

    def seal_message(self, message: Message) -> Message:
        """The sealed form of a message."""
        payload = message_dict(message, skip=PLAIN_MESSAGE_FIELDS)
        blinded = self.cipher.blind_tokens(text.index_tokens(text.searchable_text(message)))
        calls = len(message.tool_calls) if message.tool_calls else 0
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
            extra={SEALED: self.cipher.encrypt(compact_json(payload, ascii_only=True))},
        )

    def searchable_text(self, message: Message) -> str:
        """:func:`text.searchable_text` of a sealed message's clear form, without building it."""
        sealed = message.extra.get(SEALED)
        if not isinstance(sealed, str):
            raise DecryptionError(None, "a stored message carries no envelope")
        data = json.loads(self.cipher.decrypt(sealed))
        probe = _Searchable(data.get("content"), data.get("tool_calls"), data.get("tool_name"))
        return text.searchable_text(cast("Message", probe))

    def open_message(self, message: Message) -> Message:
        """The message in the clear from its sealed form."""
        sealed = message.extra.get(SEALED)
        if not isinstance(sealed, str):
            raise DecryptionError(None, "a stored message carries no envelope")
        data = json.loads(self.cipher.decrypt(sealed))
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

    def seal_metadata(self, metadata: JSONObject, title: str | None) -> JSONObject:
        """A record's stored metadata: its envelope and the title's."""
        sealed = self.seal_object(metadata)
        if title is not None:
            sealed[TITLE] = self.cipher.encrypt(title)
        return sealed

    def seal_record(self, record: SessionRecord) -> SessionRecord:
        """The sealed form of a session record."""
        return attrs.evolve(
            record,
            title=None if record.title is None else self.title_form(record.title),
            system_prompt=self.seal_text(record.system_prompt),
            metadata=self.seal_metadata(record.metadata, record.title),
            model_config=self.seal_object(record.model_config),
        )

    def open_record(self, record: SessionRecord) -> SessionRecord:
        """The record in the clear from its sealed form."""
        title = record.metadata.get(TITLE)
        return attrs.evolve(
            record,
            title=None if title is None else self.cipher.decrypt(title),
            system_prompt=self.open_text(record.system_prompt),
            metadata=self.open_object(record.metadata),
            model_config=self.open_object(record.model_config),
        )

    def seal_values(
        self, values: Mapping[str, Any], current: SessionRecord | None
    ) -> dict[str, Any]:
        """``update_session`` values in sealed form; ``current`` is the sealed record now stored.

        Title and metadata share the stored metadata, so setting one keeps the other's envelope.
        """
        sealed = dict(values)
        if not _sealable(values):
            return sealed  # the backend refuses the wrong types with its own error
        if "system_prompt" in values:
            sealed["system_prompt"] = self.seal_text(values["system_prompt"])
        if "model_config" in values:
            sealed["model_config"] = self.seal_object(values["model_config"])
        if "title" in values or "metadata" in values:
            stored = {} if current is None else current.metadata
            title = values.get("title") if "title" in values else stored.get(TITLE)
            if "title" in values:
                sealed["title"] = None if title is None else self.title_form(title)
                title = None if title is None else self.cipher.encrypt(title)
            if "metadata" in values:
                metadata = self.seal_object(values["metadata"])
            else:
                metadata = {key: value for key, value in stored.items() if key == SEALED}
            if title is not None:
                metadata[TITLE] = title
            sealed["metadata"] = metadata
        return sealed

    # -- entries -----------------------------------------------------------------------------------

    def seal_entry(self, entry: SessionEntry) -> SessionEntry:
        """The sealed form of a routing entry."""
        origin = entry.origin
        return attrs.evolve(
            entry,
            origin=None
            if origin is None
            else SessionSource(
                platform=origin.platform,
                chat_type=origin.chat_type,
                chat_id=self.cipher.encrypt(_json(unstructure(origin))),
            ),
            display_name=self.seal_text(entry.display_name),
            resume_reason=self.seal_text(entry.resume_reason),
        )

    def open_entry(self, entry: SessionEntry) -> SessionEntry:
        """The entry in the clear from its sealed form."""
        origin = entry.origin
        return attrs.evolve(
            entry,
            origin=None
            if origin is None or origin.chat_id is None
            else structure(json.loads(self.cipher.decrypt(origin.chat_id)), SessionSource),
            display_name=self.open_text(entry.display_name),
            resume_reason=self.open_text(entry.resume_reason),
        )

    # -- state -------------------------------------------------------------------------------------

    def seal_changes(
        self, changes: Mapping[str, Mapping[str, Any]] | None
    ) -> dict[str, dict[str, Any]] | None:
        """State changes with every value an envelope of its JSON (``DELETE`` stays)."""
        if changes is None:
            return None
        return {
            scope: {
                key: value if value is DELETE else self.cipher.encrypt(_json(value))
                for key, value in scope_changes.items()
            }
            for scope, scope_changes in changes.items()
        }

    def open_state(self, state: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        """Scope values in the clear."""
        return {
            scope: {key: json.loads(self.cipher.decrypt(value)) for key, value in values.items()}
            for scope, values in state.items()
        }
