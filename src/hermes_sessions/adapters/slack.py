"""Slack: Events API payloads as slack-bolt and slack-sdk deliver them (plain dicts).

:func:`convert` takes the whole event body (``{"type": "event_callback", "event": ...}``) or
just its ``event`` — what a bolt listener receives as ``body`` or ``event`` — and returns:

* a :class:`NewMessage` for ``message`` events (also ``file_share``, ``thread_broadcast`` and
  ``me_message``) and ``app_mention`` events;
* an :class:`Edit` for ``message_changed`` (unless only the thread's reply count changed) and a
  :class:`Retract` for ``message_deleted``;
* ``None`` for everything else: joins, topic changes, and messages from bots (``bot_id``) or
  from the bot itself (``bot_user_id``).

The conversation: an IM (a ``D…`` channel) is a DM; every other conversation — public and
private channels, group DMs — keys as a ``channel``, because ``app_mention`` events carry no
``channel_type`` and a private channel's id may start with ``C`` like a public one's: one
channel has one key whichever event arrives first. ``channel_type`` (``im``, ``mpim``,
``channel``, ``group``), when the event has it, is kept as ``platform_chat_type``. The team is
``scope_id``. A reply in a thread has ``thread_id`` = ``thread_ts``: a DM thread keeps the DM's
key plus the thread, a channel thread is one conversation shared by its members, and the
message that started the thread (``thread_ts`` absent or equal to its ``ts``) stays in the
channel's conversation, its edits included. Slack's ``ts`` is unique only per
channel, so ``platform_message_id`` is ``<channel>:<ts>``; ``extra["reply_to"]`` is the
thread's root in that form. ``<@BOT>`` mentions of ``bot_user_id`` are removed from the text
(``extra["mentions_bot"]``); other ``<@U…>`` mentions are kept as Slack wrote them. Files
become parts with their ``file_id``, ``name``, ``mime_type`` and ``url_private``.
"""

from __future__ import annotations

import re
from typing import Any, Final

import attrs

from hermes_sessions.adapters._events import Edit, InboundEvent, NewMessage, React, Retract
from hermes_sessions.adapters._payload import (
    Fields,
    chat_lane,
    content_of,
    plain,
    qualified,
    text_or_none,
)
from hermes_sessions.models import JSONObject, Message, MessageContent, SessionSource

__all__ = ["convert", "interaction_source", "source_of"]

_PLAIN_SUBTYPES: Final = frozenset({None, "file_share", "thread_broadcast", "me_message"})
_MIME_KINDS: Final = ("image", "audio", "video")
_FIELDS: Final = Fields("slack")


def convert(
    event: object, *, bot_user_id: str | None = None, platform: str = "slack"
) -> InboundEvent | None:
    """What a Slack event means for the transcript; ``None`` if nothing.

    ``reaction_added`` / ``reaction_removed`` on a message are a
    :class:`~hermes_sessions.adapters.React` (``:name:``), looked for in the reactor's lane, the
    message author's (``item_user``) and the channel's. A message event without a field Slack
    always sends for it (``channel``, ``ts``, ``user``
    for a person's message; the nested ``message`` of an edit, the ``previous_message`` of a
    deletion) or with one of the wrong type raises :class:`~hermes_sessions.AdapterPayloadError`.

    .. versionadded:: 0.1.0
    """
    data = plain(event)
    if not isinstance(data, dict):
        return None
    at = ""
    body: Any = data
    if data.get("type") == "event_callback" or "event" in data:
        body, at = _FIELDS.need(data, "event", "dict"), "event"
    kind = _FIELDS.need(body, "type", "str", at=at)
    team = _FIELDS.get(body, "team", "str", at=at) or _FIELDS.get(data, "team_id", "str")
    if kind in {"reaction_added", "reaction_removed"}:
        own = bot_user_id is not None and body.get("user") == bot_user_id
        removed = kind == "reaction_removed"
        return None if own else _reaction(body, at, removed=removed, platform=platform, team=team)
    if kind not in {"message", "app_mention"}:
        return None
    subtype = _FIELDS.get(body, "subtype", "str", at=at)
    if subtype in {"message_changed", "message_deleted"}:
        return _changed(body, subtype, at, bot_user_id=bot_user_id, platform=platform, team=team)
    if subtype not in _PLAIN_SUBTYPES or _from_bot(body, bot_user_id, at):
        return None
    return _new(body, at, bot_user_id=bot_user_id, platform=platform, team=team)


def _new(
    body: JSONObject, at: str, *, bot_user_id: str | None, platform: str, team: str | None
) -> NewMessage | None:
    """A person's message (also ``app_mention``, ``file_share``, ``thread_broadcast``)."""
    source = _source(body, at, platform=platform, team=team)
    content, mentioned = _content(body, bot_user_id, at)
    if content is None or source.message_id is None:
        return None
    extra: JSONObject = {}
    if source.thread_id is not None:
        extra["reply_to"] = qualified(source.chat_id, source.thread_id)
    if mentioned:
        extra["mentions_bot"] = True
    return NewMessage(
        source=source,
        message=Message(
            role="user",
            content=content,
            platform_message_id=source.message_id,
            sender_id=source.participant,
            sender_name=source.user_name,
            extra=extra,
        ),
    )


def _changed(
    body: JSONObject,
    subtype: str,
    at: str,
    *,
    bot_user_id: str | None,
    platform: str,
    team: str | None,
) -> Edit | Retract | None:
    """``message_changed`` / ``message_deleted``: the message is nested in the event."""
    where = "message" if subtype == "message_changed" else "previous_message"
    inner: JSONObject = _FIELDS.need(body, where, "dict", at=at)
    previous: JSONObject | None = _FIELDS.get(body, "previous_message", "dict", at=at)
    nested = f"{at}.{where}" if at else where
    if _from_bot(inner, bot_user_id, nested):
        return None
    channel = _FIELDS.need(body, "channel", "str", at=at)
    channel_type = _FIELDS.get(body, "channel_type", "str", at=at)
    merged = {**inner, "channel": channel, "channel_type": channel_type}
    source = _source(merged, nested, platform=platform, team=team)
    if subtype == "message_deleted":
        deleted = _FIELDS.need(body, "deleted_ts", "str", at=at)
        return Retract(source=source, platform_message_id=f"{channel}:{deleted}")
    content, _ = _content(inner, bot_user_id, nested)
    if previous is not None:
        before, _ = _content(previous, bot_user_id, f"{at}.previous_message".lstrip("."))
        if before == content:
            return None
    if source.message_id is None:  # _source needs ts; this only narrows the type
        return None
    return Edit(source=source, platform_message_id=source.message_id, content=content)


def _reaction(
    body: JSONObject, at: str, *, removed: bool, platform: str, team: str | None
) -> React | None:
    """``reaction_added`` / ``reaction_removed`` on a message (reactions to files give ``None``)."""
    item: JSONObject = _FIELDS.need(body, "item", "dict", at=at)
    where = f"{at}.item".lstrip(".")
    if _FIELDS.need(item, "type", "str", at=where) != "message":
        return None
    channel = _FIELDS.need(item, "channel", "str", at=where)
    ts = _FIELDS.need(item, "ts", "str", at=where)
    emoji = f":{_FIELDS.need(body, 'reaction', 'str', at=at)}:"
    author = _FIELDS.get(body, "item_user", "str", at=at)
    source = SessionSource(
        platform=platform,
        chat_id=channel,
        chat_type="dm" if channel.startswith("D") else "channel",
        user_id=_FIELDS.need(body, "user", "str", at=at),
        scope_id=team,
    )
    lanes = () if author is None else (attrs.evolve(source, user_id=author),)
    return React(
        source=source,
        platform_message_id=f"{channel}:{ts}",
        added=() if removed else (emoji,),
        removed=(emoji,) if removed else (),
        also=(*lanes, *chat_lane(source)),
    )


def source_of(
    message: JSONObject, *, platform: str = "slack", team: str | None = None
) -> SessionSource:
    """The :class:`SessionSource` of a Slack message event (as JSON).

    Raises:
        AdapterPayloadError: ``channel``, ``ts`` or ``user`` is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    return _source(plain(message), "event", platform=platform, team=team)


def interaction_source(body: object, *, platform: str = "slack") -> SessionSource | None:
    """The conversation of the user who acted: a ``block_actions`` or ``message_action`` body.

    Takes the interaction payload (what a slack-bolt ``@app.action`` or ``@app.shortcut``
    listener receives as ``body``). The channel and the thread are those of the message acted
    on (a thread's root stays in the channel's lane); the sender is ``user``, the one who
    clicked, so in a channel it is their own lane. ``None`` for interactions outside a
    conversation (a modal, the App Home) and for other payload types.

    Raises:
        AdapterPayloadError: ``user`` or its ``id`` is missing or of the wrong type.

    .. versionadded:: 0.1.0
    """
    data = plain(body)
    if not isinstance(data, dict):
        return None
    if _FIELDS.need(data, "type", "str") not in {"block_actions", "message_action"}:
        return None
    user: JSONObject = _FIELDS.need(data, "user", "dict")
    user_id = _FIELDS.need(user, "id", "str", at="user")
    channel: JSONObject = _FIELDS.get(data, "channel", "dict") or {}
    container: JSONObject = _FIELDS.get(data, "container", "dict") or {}
    message: JSONObject = _FIELDS.get(data, "message", "dict") or {}
    channel_id = _FIELDS.get(channel, "id", "str", at="channel") or _FIELDS.get(
        container, "channel_id", "str", at="container"
    )
    if channel_id is None:
        return None
    ts = _FIELDS.get(container, "message_ts", "str", at="container") or _FIELDS.get(
        message, "ts", "str", at="message"
    )
    thread = _FIELDS.get(container, "thread_ts", "str", at="container") or _FIELDS.get(
        message, "thread_ts", "str", at="message"
    )
    team: JSONObject = _FIELDS.get(data, "team", "dict") or {}
    return SessionSource(
        platform=platform,
        chat_id=channel_id,
        chat_type="dm" if channel_id.startswith("D") else "channel",
        user_id=user_id,
        thread_id=thread if thread != ts else None,
        user_name=_FIELDS.get(user, "name", "str", at="user")
        or _FIELDS.get(user, "username", "str", at="user"),
        scope_id=_FIELDS.get(team, "id", "str", at="team")
        or _FIELDS.get(user, "team_id", "str", at="user"),
    )


def _source(message: JSONObject, at: str, *, platform: str, team: str | None) -> SessionSource:
    if not isinstance(message, dict):
        _FIELDS.refuse(at or "event", "must be an object")
    channel = _FIELDS.need(message, "channel", "str", at=at)
    raw_type = _FIELDS.get(message, "channel_type", "str", at=at)
    is_im = channel.startswith("D")
    if raw_type is not None and (raw_type == "im") != is_im:
        _FIELDS.refuse(
            f"{at}.channel_type".lstrip("."), f"is {raw_type!r} for the channel {channel!r}"
        )
    ts = _FIELDS.need(message, "ts", "str", at=at)
    thread = _FIELDS.get(message, "thread_ts", "str", at=at)
    profile: JSONObject = _FIELDS.get(message, "user_profile", "dict", at=at) or {}
    return SessionSource(
        platform=platform,
        chat_id=channel,
        chat_type="dm" if is_im else "channel",
        platform_chat_type=raw_type,
        user_id=_FIELDS.need(message, "user", "str", at=at),
        thread_id=thread if thread != ts else None,
        user_name=text_or_none(profile.get("display_name"))
        or text_or_none(profile.get("real_name")),
        scope_id=_FIELDS.get(message, "team", "str", at=at)
        or team
        or _FIELDS.get(message, "user_team", "str", at=at),
        message_id=qualified(channel, ts),
    )


def _from_bot(message: JSONObject, bot_user_id: str | None, at: str) -> bool:
    if _FIELDS.get(message, "bot_id", "str", at=at):
        return True
    return bot_user_id is not None and message.get("user") == bot_user_id


def _content(message: JSONObject, bot_user_id: str | None, at: str) -> tuple[MessageContent, bool]:
    text = _FIELDS.get(message, "text", "text", at=at) or None
    mentioned = False
    if text is not None and bot_user_id:
        text, count = re.subn(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
        mentioned = count > 0
        text = " ".join(text.split()) or None
    files = _FIELDS.items(message, "files", at=at)
    return content_of(text, [_file_part(f) for f in files]), mentioned


def _file_part(file: JSONObject) -> JSONObject:
    mime = str(file.get("mimetype") or "")
    kind = next((k for k in _MIME_KINDS if mime.startswith(f"{k}/")), "file")
    part: JSONObject = {"type": kind, "file_id": file.get("id")}
    for ours, theirs in (
        ("name", "name"),
        ("mime_type", "mimetype"),
        ("url_private", "url_private"),
    ):
        if file.get(theirs):
            part[ours] = file[theirs]
    return part
