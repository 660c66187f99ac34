"""Read a session key back into the source that built it, where the key says enough.

:meth:`SessionStore.migrate_keys` needs the :class:`~hermes_sessions.models.SessionSource` of
every routing entry. Entries keep it as ``origin``; entries rebuilt from records, imported from
elsewhere or partly erased do not. For those, :func:`read_session_key` reads the key itself, in
the forms it knows, and returns a source only when exactly one source shape fits:

* **hermes-sessions and Hermes Agent** (``agent:<namespace>:<platform>:<chat_type>:...``; the two
  build the same bytes for ids without ``:`` or ``%``). A DM key is the chat (or the sender) and
  an optional thread. Other chat types depend on the isolation flags of the policy that built
  the key: one segment is the chat; two are chat + thread when members were not isolated, and
  ambiguous otherwise (chat + thread or chat + member); three are chat + thread + member when
  both flags were on.
* **OpenClaw** (``agent:<agentId>:...``): ``<channel>:dm:<peer>`` (``per-channel-peer``),
  ``<channel>:<account>:dm:<peer>`` (``per-account-channel-peer``; the account becomes
  ``scope_id``), ``<channel>:group:<id>`` and ``<channel>:channel:<id>``, each optionally
  followed by ``:thread:<id>`` or ``:topic:<id>``. Its collapsed DM keys (``<agentId>:main``,
  ``dm:<peer>`` across channels) name no single chat: they are reported, never guessed.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import attrs

from hermes_sessions.exceptions import InvalidKeyError, InvalidValueError
from hermes_sessions.keys import DEFAULT_KEY_POLICY, KeyPolicy, parse_session_key
from hermes_sessions.models import SessionSource

__all__ = ["KeyForm", "ReadKey", "read_session_key"]

KeyForm: TypeAlias = Literal["hermes-sessions", "openclaw", "unknown"]
"""Which family of key forms a key was read as (``hermes-sessions`` covers Hermes Agent's).

.. versionadded:: 0.1.0
"""

_CONVENTIONAL: Final = frozenset({"dm", "group", "channel", "thread"})
_OPENCLAW_THREADS: Final = frozenset({"thread", "topic"})
_OPENCLAW_ROOMS: Final = frozenset({"group", "channel"})


@attrs.frozen(kw_only=True)
class ReadKey:
    """What :func:`read_session_key` made of a key.

    .. versionadded:: 0.1.0
    """

    key: str
    form: KeyForm
    namespace: str | None
    """The namespace (Hermes profile, OpenClaw agent id), when the key has one."""
    source: SessionSource | None
    """The source that builds this key, or ``None`` when the key does not say enough."""
    problem: str | None
    """Why ``source`` is ``None`` (``None`` when there is a source)."""


def _found(key: str, form: KeyForm, namespace: str, source: SessionSource) -> ReadKey:
    return ReadKey(key=key, form=form, namespace=namespace, source=source, problem=None)


def _unread(key: str, form: KeyForm, namespace: str | None, problem: str) -> ReadKey:
    return ReadKey(key=key, form=form, namespace=namespace, source=None, problem=problem)


def _openclaw(key: str, raw: list[str]) -> ReadKey | None:
    """Read the OpenClaw forms that differ from ours; ``None`` if ``raw`` is none of them."""
    namespace = raw[1]
    rest = raw[2:]
    if len(rest) == 1:
        return _unread(key, "openclaw", namespace, "OpenClaw's main key collapses every DM")
    if rest[0] == "dm":
        return _unread(key, "openclaw", namespace, "OpenClaw's per-peer key names no platform")
    if len(rest) == 4 and rest[2] == "dm" and rest[1] not in _CONVENTIONAL:  # noqa: PLR2004  # channel, account, dm, peer
        channel, account, _, peer = rest
        source = SessionSource(platform=channel, chat_type="dm", user_id=peer, scope_id=account)
        return _found(key, "openclaw", namespace, source)
    is_threaded = len(rest) == 5 and rest[3] in _OPENCLAW_THREADS  # noqa: PLR2004  # + :thread:<id>
    if is_threaded and rest[1] in _OPENCLAW_ROOMS:
        channel, chat_type, chat_id, _, thread_id = rest
        source = SessionSource(
            platform=channel, chat_type=chat_type, chat_id=chat_id, thread_id=thread_id
        )
        return _found(key, "openclaw", namespace, source)
    return None


def _ours(key: str, policy: KeyPolicy) -> ReadKey:
    """Read the form :func:`~hermes_sessions.keys.build_session_key` (and Hermes) writes."""
    parsed = parse_session_key(key)
    segments = parsed.segments
    namespace, platform, chat_type = parsed.namespace, parsed.platform, parsed.chat_type
    if not segments:
        return _unread(key, "hermes-sessions", namespace, "the key names no chat or sender")
    try:
        if chat_type == "dm" and len(segments) <= 2:  # noqa: PLR2004  # lead, thread
            thread = segments[1] if len(segments) == 2 else None  # noqa: PLR2004
            source = SessionSource(
                platform=platform, chat_type="dm", chat_id=segments[0], thread_id=thread
            )
            return _found(key, "hermes-sessions", namespace, source)
        shape = _shared_shape(len(segments), policy)
    except InvalidValueError as error:
        return _unread(key, "hermes-sessions", namespace, f"the key holds an invalid id: {error}")
    if shape is None:
        problem = (
            f"{len(segments)} segments after the chat type fit more than one source "
            f"under the isolation flags of the policy given"
        )
        return _unread(key, "hermes-sessions", namespace, problem)
    values = dict(zip(shape, segments, strict=True))
    source = SessionSource(platform=platform, chat_type=chat_type, **values)
    return _found(key, "hermes-sessions", namespace, source)


def _shared_shape(count: int, policy: KeyPolicy) -> tuple[str, ...] | None:
    """The fields a group/channel/thread key's segments hold, if only one reading fits."""
    if count == 1:
        return ("chat_id",)
    if count == 2 and not policy.group_sessions_per_user:  # noqa: PLR2004  # chat + thread
        return ("chat_id", "thread_id")
    both = policy.group_sessions_per_user and policy.thread_sessions_per_user
    if count == 3 and both:  # noqa: PLR2004  # chat + thread + member
        return ("chat_id", "thread_id", "user_id")
    return None


def read_session_key(key: str, policy: KeyPolicy = DEFAULT_KEY_POLICY) -> ReadKey:
    """Read ``key`` back into the :class:`SessionSource` that builds it, where it says enough.

    ``policy`` is the one the key was built under (its isolation flags decide how many
    segments a shared chat's key has). The source holds the ids as the key holds them: already
    canonical if ``policy`` canonicalised them. A key in no known form is ``unknown``.

    >>> read_session_key("agent:main:telegram:dm:42").source.chat_id
    '42'
    >>> read_session_key("agent:main:feishu:group:oc_1:ou_1").problem is not None
    True
    >>> read_session_key("agent:main:discord:channel:123:thread:987").source.thread_id
    '987'

    .. versionadded:: 0.1.0
    """
    raw = key.split(":")
    if len(raw) < 3 or raw[0] != "agent" or any(part == "" for part in raw):  # noqa: PLR2004  # agent, id, rest
        return _unread(key, "unknown", None, "not an 'agent:...' key")
    try:
        openclaw = _openclaw(key, raw)
    except InvalidValueError as error:
        return _unread(key, "openclaw", raw[1], f"the key holds an invalid id: {error}")
    if openclaw is not None:
        return openclaw
    try:
        return _ours(key, policy)
    except InvalidKeyError as error:
        return _unread(key, "unknown", raw[1], f"not a key form this library reads: {error}")
