"""Slack: Events API payloads as slack-bolt and slack-sdk deliver them (plain dicts).

:func:`convert` takes the whole event body (``{"type": "event_callback", "event": ...}``) or
just its ``event`` — what a bolt listener receives as ``body`` or ``event`` — and returns:

* a :class:`NewMessage` for ``message`` events (also ``file_share``, ``thread_broadcast`` and
  ``me_message``) and ``app_mention`` events;
* an :class:`Edit` for ``message_changed`` (unless only the thread's reply count changed) and a
  :class:`Retract` for ``message_deleted``;
* ``None`` for everything else: joins, topic changes, and messages from bots (``bot_id``) or
  from the bot itself (``bot_user_id``).

The conversation: ``channel_type`` (``im``, ``mpim``, ``channel``, ``group`` — a private
channel) is kept as ``platform_chat_type``; ``app_mention`` events do not carry it, so it is read
from the channel id's prefix (``D`` im, ``G`` group, ``C`` channel). The team is ``scope_id``.
A reply in a thread has ``thread_id`` = ``thread_ts``: a DM thread keeps the DM's key plus the
thread, a channel thread is one conversation shared by its members, and the message that
started the thread stays in the channel's conversation. Slack's ``ts`` is unique only per
channel, so ``platform_message_id`` is ``<channel>:<ts>``; ``extra["reply_to"]`` is the
thread's root in that form. ``<@BOT>`` mentions of ``bot_user_id`` are removed from the text
(``extra["mentions_bot"]``); other ``<@U…>`` mentions are kept as Slack wrote them. Files
become parts with their ``file_id``, ``name``, ``mime_type`` and ``url_private``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from hermes_sessions.adapters._events import Edit, InboundEvent, NewMessage, Retract
from hermes_sessions.adapters._payload import content_of, plain, qualified, text_or_none
from hermes_sessions.models import JSONObject, Message, MessageContent, SessionSource

__all__ = ["convert", "source_of"]

_PLAIN_SUBTYPES: Final = frozenset({None, "file_share", "thread_broadcast", "me_message"})
_PREFIX_TYPES: Final = {"D": "im", "G": "group", "C": "channel"}
_MIME_KINDS: Final = ("image", "audio", "video")


def convert(
    event: object, *, bot_user_id: str | None = None, platform: str = "slack"
) -> InboundEvent | None:
    """What a Slack event means for the transcript; ``None`` if nothing.

    .. versionadded:: 0.1.0
    """
    data = plain(event)
    if not isinstance(data, dict):
        return None
    body: Any = data.get("event", data)
    if not isinstance(body, dict) or body.get("type") not in {"message", "app_mention"}:
        return None
    team = body.get("team") or data.get("team_id")
    subtype = body.get("subtype")
    if subtype in {"message_changed", "message_deleted"}:
        return _changed(body, subtype, bot_user_id=bot_user_id, platform=platform, team=team)
    if subtype not in _PLAIN_SUBTYPES or _from_bot(body, bot_user_id):
        return None
    source = source_of(body, platform=platform, team=team)
    content, mentioned = _content(body, bot_user_id)
    if content is None or source.message_id is None:
        return None
    extra: JSONObject = {}
    thread = body.get("thread_ts")
    if thread and thread != body.get("ts"):
        extra["reply_to"] = qualified(body.get("channel"), thread)
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
    body: JSONObject, subtype: str, *, bot_user_id: str | None, platform: str, team: Any
) -> Edit | Retract | None:
    """``message_changed`` / ``message_deleted``: the message is nested in the event."""
    previous = body.get("previous_message")
    inner = body.get("message") if subtype == "message_changed" else previous
    if not isinstance(inner, dict) or _from_bot(inner, bot_user_id):
        return None
    merged = {**inner, "channel": body.get("channel"), "channel_type": body.get("channel_type")}
    source = source_of(merged, platform=platform, team=team)
    if subtype == "message_deleted":
        pmid = qualified(body.get("channel"), body.get("deleted_ts") or inner.get("ts"))
        return None if pmid is None else Retract(source=source, platform_message_id=pmid)
    content, _ = _content(inner, bot_user_id)
    unchanged = isinstance(previous, dict) and _content(previous, bot_user_id)[0] == content
    if source.message_id is None or unchanged:
        return None
    return Edit(source=source, platform_message_id=source.message_id, content=content)


def source_of(
    message: JSONObject, *, platform: str = "slack", team: str | None = None
) -> SessionSource:
    """The :class:`SessionSource` of a Slack message event (as JSON).

    .. versionadded:: 0.1.0
    """
    channel = str(message.get("channel") or "")
    raw_type = message.get("channel_type") or _PREFIX_TYPES.get(channel[:1], "channel")
    profile: JSONObject = message.get("user_profile") or {}
    return SessionSource(
        platform=platform,
        chat_id=channel,
        chat_type=raw_type,
        platform_chat_type=raw_type,
        user_id=message.get("user"),
        thread_id=message.get("thread_ts"),
        user_name=text_or_none(profile.get("display_name"))
        or text_or_none(profile.get("real_name")),
        scope_id=message.get("team") or team or message.get("user_team"),
        message_id=qualified(channel, message.get("ts")),
    )


def _from_bot(message: JSONObject, bot_user_id: str | None) -> bool:
    return bool(message.get("bot_id")) or (
        bot_user_id is not None and message.get("user") == bot_user_id
    )


def _content(message: JSONObject, bot_user_id: str | None) -> tuple[MessageContent, bool]:
    text = text_or_none(message.get("text"))
    mentioned = False
    if text is not None and bot_user_id:
        text, count = re.subn(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
        mentioned = count > 0
        text = " ".join(text.split()) or None
    parts = [_file_part(f) for f in message.get("files") or [] if isinstance(f, dict)]
    return content_of(text, parts), mentioned


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
