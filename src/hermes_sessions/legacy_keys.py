"""Read a session key back into the source that built it, where the key says enough.

:meth:`SessionStore.migrate_keys` needs the :class:`~hermes_sessions.models.SessionSource` of
every routing entry. Entries keep it as ``origin``; entries rebuilt from records, imported from
elsewhere or partly erased do not. For those, :func:`read_session_key` reads the key itself, in
the forms it knows, and returns a source only when exactly one source shape fits:

* **hermes-sessions and Hermes Agent** (``agent:<namespace>:<platform>:<chat_type>:...``; the two
  build the same bytes for DMs and members' lanes with ids without ``:`` or ``%``). A DM key is
  the chat (or the sender) and an optional thread. In other chat types a thread follows the
  marker ``thread`` (``<chat>:thread:<thread>[:<member>]``), so those keys read back whatever
  the flags. Without a marker, one segment is the chat; the rest depends on the isolation flags
  of the policy that built the key, because Hermes wrote threads without the marker (form
  ``hermes``): two segments are a Hermes chat + thread when members were not isolated, and
  ambiguous otherwise (a member's lane, or a Hermes thread); three are a Hermes chat + thread +
  member when both flags were on.
* **OpenClaw** (``agent:<agentId>:...``): ``<channel>:dm:<peer>`` (``per-channel-peer``),
  ``<channel>:<account>:dm:<peer>`` (``per-account-channel-peer``; the account becomes
  ``scope_id``), ``<channel>:group:<id>`` and ``<channel>:channel:<id>``, each optionally
  followed by ``:thread:<id>`` (this library's own thread form) or ``:topic:<id>``. Its
  collapsed DM keys (``<agentId>:main``, ``dm:<peer>`` across channels) name no single chat:
  they are reported, never guessed.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import attrs

from hermes_sessions.exceptions import InvalidKeyError, InvalidValueError
from hermes_sessions.keys import (
    DEFAULT_KEY_POLICY,
    KeyPolicy,
    parse_session_key,
    session_key_parts,
)
from hermes_sessions.models import SessionSource

__all__ = ["KeyForm", "ReadKey", "build_hermes_key", "marked_thread_key", "read_session_key"]

KeyForm: TypeAlias = Literal["hermes-sessions", "hermes", "openclaw", "unknown"]
"""Which family of key forms a key was read as.

``hermes-sessions`` covers Hermes Agent's keys too wherever the two agree; ``hermes`` is a
Hermes thread key (``<chat>:<thread>``, no marker), which this library no longer builds.

.. versionadded:: 0.1.0
"""

_CONVENTIONAL: Final = frozenset({"dm", "group", "channel", "thread"})
_OPENCLAW_THREADS: Final = frozenset({"topic"})  # OpenClaw's ':thread:<id>' is our own form
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
    is_threaded = len(rest) == 5 and rest[3] in _OPENCLAW_THREADS  # noqa: PLR2004  # + :topic:<id>
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
    form: KeyForm = "hermes-sessions"
    try:
        if chat_type == "dm" and len(segments) <= 2:  # noqa: PLR2004  # lead, thread
            thread = segments[1] if len(segments) == 2 else None  # noqa: PLR2004
            source = SessionSource(
                platform=platform, chat_type="dm", chat_id=segments[0], thread_id=thread
            )
            return _found(key, form, namespace, source)
        if parsed.marker_index is not None:
            values = _marked(parsed.segments, parsed.marker_index)
        else:
            shape = _shared_shape(len(segments), policy)
            if shape is not None and "thread_id" in shape:
                form = "hermes"
            values = None if shape is None else dict(zip(shape, segments, strict=True))
        if values is None:
            problem = (
                f"{len(segments)} segments after the chat type fit more than one source "
                f"under the isolation flags of the policy given"
            )
            return _unread(key, form, namespace, problem)
        source = SessionSource(platform=platform, chat_type=chat_type, **values)
    except InvalidValueError as error:
        return _unread(key, form, namespace, f"the key holds an invalid id: {error}")
    return _found(key, form, namespace, source)


def _marked(segments: tuple[str, ...], marker: int) -> dict[str, str] | None:
    """The fields of a shared chat's key with the thread marker: ``[chat]:thread:<id>[:member]``."""
    before, after = segments[:marker], segments[marker + 2 :]
    if len(before) > 1 or len(after) > 1:
        return None
    values = {"thread_id": segments[marker + 1]}
    values.update(zip(("chat_id",), before, strict=False))
    values.update(zip(("user_id",), after, strict=False))
    return values


def _shared_shape(count: int, policy: KeyPolicy) -> tuple[str, ...] | None:
    """The fields of an unmarked group/channel/thread key's segments, if only one reading fits."""
    if count == 1:
        return ("chat_id",)
    if count == 2 and not policy.group_sessions_per_user:  # noqa: PLR2004  # chat + thread
        return ("chat_id", "thread_id")
    both = policy.group_sessions_per_user and policy.thread_sessions_per_user
    if count == 3 and both:  # noqa: PLR2004  # chat + thread + member
        return ("chat_id", "thread_id", "user_id")
    return None


def build_hermes_key(source: SessionSource, policy: KeyPolicy = DEFAULT_KEY_POLICY) -> str:
    """The key Hermes Agent (and this library before the thread marker) built for ``source``.

    The same as :func:`~hermes_sessions.keys.build_session_key` but for threads in shared
    chats, which Hermes wrote as ``<chat>:<thread>`` (the form of a member's lane).
    :meth:`SessionStore.migrate_keys` and the Hermes importer use it to recognise those keys.

    >>> build_hermes_key(SessionSource(platform="x", chat_type="group", chat_id="c", thread_id="t"))
    'agent:main:x:group:c:t'

    .. versionadded:: 0.1.0
    """
    parts = session_key_parts(source, policy)
    if source.chat_type != "dm" and source.thread_id is not None:
        marker = 3 if source.chat_id is not None else 2
        del parts[marker]
    encoded = [part.replace("%", "%25").replace(":", "%3A") for part in parts]
    return ":".join(["agent", policy.namespace, *encoded])


def marked_thread_key(key: str, origin: SessionSource) -> str | None:
    """The key this library builds for a Hermes thread key, given the source that built it.

    ``None`` unless ``key`` is what Hermes built for ``origin`` (a thread in a shared chat)
    under some isolation flags; then the marked key under the same flags and namespace (every
    flag combination that fits gives the same one). The Hermes importer rewrites routing keys
    with it.

    .. versionadded:: 0.1.0
    """
    try:
        namespace = parse_session_key(key).namespace
    except InvalidKeyError:
        return None
    for group in (True, False):
        for thread in (False, True):
            policy = KeyPolicy(
                namespace=namespace, group_sessions_per_user=group, thread_sessions_per_user=thread
            )
            marked = policy.build(origin)
            if build_hermes_key(origin, policy) == key and marked != key:
                return marked
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
    >>> shared = KeyPolicy(group_sessions_per_user=False)
    >>> read_session_key("agent:main:feishu:group:oc_1:t_1", shared).form
    'hermes'

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
