"""The "where you are talking" block of a system prompt, and whether a session is shared."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.keys import DEFAULT_KEY_POLICY, KeyPolicy

if TYPE_CHECKING:
    from hermes_sessions.models import SessionEntry, SessionSource

__all__ = [
    "CONTEXT_PROMPT_EN",
    "ContextPromptTemplates",
    "is_shared_session",
    "prefix_sender",
    "session_context_prompt",
]

PLATFORM_NAMES: Final = {
    "feishu": "Feishu (Lark)",
    "lark": "Lark",
    "telegram": "Telegram",
    "discord": "Discord",
    "slack": "Slack",
    "whatsapp": "WhatsApp",
    "signal": "Signal",
    "matrix": "Matrix",
    "wecom": "WeCom",
    "dingtalk": "DingTalk",
    "local": "the local command line",
    "cli": "the command line",
}
"""Display names of well-known platform slugs; others are shown as the slug."""


def is_shared_session(source: SessionSource, key_policy: KeyPolicy = DEFAULT_KEY_POLICY) -> bool:
    """Whether several people talk in the session of ``source``: its key has no sender in it.

    A DM is never shared. Any other chat is shared unless ``key_policy`` isolates its members
    (groups by default; threads only with both flags) and the source names a sender. Decided
    from the key itself, so it agrees with :func:`~hermes_sessions.keys.build_session_key` in
    every case (Hermes's own helper disagreed for threads with ``group_sessions_per_user`` off
    and ``thread_sessions_per_user`` on).

    >>> from hermes_sessions.models import SessionSource
    >>> is_shared_session(
    ...     SessionSource(
    ...         platform="slack", chat_type="thread", chat_id="C1", thread_id="t", user_id="u"
    ...     )
    ... )
    True

    .. versionadded:: 0.1.0
    """
    if source.chat_type == "dm":
        return False
    anonymous = attrs.evolve(source, user_id=None, user_id_alt=None)
    return key_policy.build(source) == key_policy.build(anonymous)


@attrs.frozen(kw_only=True)
class ContextPromptTemplates:
    """The sentences of :func:`session_context_prompt`; replace any with :func:`attrs.evolve`.

    Placeholders: ``{platform}``, ``{user}``, ``{chat}``, ``{thread}``, ``{topic}``, ``{example}``.

    .. versionadded:: 0.1.0
    """

    header: str = "## Where you are talking"
    platform: str = "Platform: {platform}."
    dm: str = "This is a private chat with {user}."
    dm_unknown: str = "This is a private chat."
    group: str = 'This is the {chat_type} "{chat}".'
    group_unnamed: str = "This is a {chat_type} chat."
    thread: str = 'You are replying in the thread "{thread}".'
    topic: str = "Topic: {topic}"
    shared: str = (
        "Several people take part in this conversation: every user message starts with the "
        'sender\'s name in brackets, like "{example}". Address people by name when it helps.'
    )
    speaker: str = "You are talking with {user}."
    sender_prefix: str = "[{user}] "
    unknown_user: str = "someone"


CONTEXT_PROMPT_EN: Final = ContextPromptTemplates()
"""English sentences (the default).

.. versionadded:: 0.1.0
"""


def _user(source: SessionSource, templates: ContextPromptTemplates) -> str:
    return source.user_name or source.participant or templates.unknown_user


def prefix_sender(
    text: str, source: SessionSource, templates: ContextPromptTemplates = CONTEXT_PROMPT_EN
) -> str:
    """``text`` with the sender's name in front, as the shared-session prompt promises.

    >>> from hermes_sessions.models import SessionSource
    >>> prefix_sender("hi", SessionSource(platform="discord", user_id="1", user_name="Ada"))
    '[Ada] hi'

    .. versionadded:: 0.1.0
    """
    return templates.sender_prefix.format(user=_user(source, templates)) + text


def session_context_prompt(
    source: SessionSource,
    entry: SessionEntry | None = None,
    *,
    key_policy: KeyPolicy = DEFAULT_KEY_POLICY,
    templates: ContextPromptTemplates = CONTEXT_PROMPT_EN,
    platform_names: dict[str, str] | None = None,
) -> str:
    """The block that tells the model where it is talking, for the system prompt.

    Names the platform; for a DM whom it talks with; for other chats the chat (``chat_name``,
    else the entry's ``display_name``), the thread and the topic; and, when the session is
    shared (:func:`is_shared_session`), that user messages start with the sender's name (see
    :func:`prefix_sender`). Stable for a session, so the prompt cache keeps working.

    >>> from hermes_sessions.models import SessionSource
    >>> print(
    ...     session_context_prompt(
    ...         SessionSource(
    ...             platform="feishu",
    ...             chat_type="group",
    ...             chat_id="oc_1",
    ...             chat_name="Ops",
    ...             thread_id="t1",
    ...             user_id="ou_1",
    ...             user_name="Li",
    ...         )
    ...     )
    ... )
    ## Where you are talking
    Platform: Feishu (Lark).
    This is the group "Ops".
    You are replying in the thread "t1".
    Several people take part in this conversation: ... like "[Li] hello". ...

    .. versionadded:: 0.1.0
    """
    names = {**PLATFORM_NAMES, **(platform_names or {})}
    lines = [
        templates.header,
        templates.platform.format(platform=names.get(source.platform, source.platform)),
    ]
    user = _user(source, templates)
    if source.chat_type == "dm":
        known = source.user_name or source.participant
        lines.append(templates.dm.format(user=known) if known else templates.dm_unknown)
    else:
        chat = source.chat_name or (entry.display_name if entry is not None else None)
        chat_type = source.chat_type
        lines.append(
            templates.group.format(chat_type=chat_type, chat=chat)
            if chat
            else templates.group_unnamed.format(chat_type=chat_type)
        )
    if source.thread_id is not None:
        lines.append(templates.thread.format(thread=source.thread_id))
    if source.chat_topic:
        lines.append(templates.topic.format(topic=source.chat_topic))
    if is_shared_session(source, key_policy):
        example = templates.sender_prefix.format(user=user) + "hello"
        lines.append(templates.shared.format(example=example))
    elif source.chat_type != "dm" and (source.user_name or source.participant):
        lines.append(templates.speaker.format(user=user))
    return "\n".join(lines)
