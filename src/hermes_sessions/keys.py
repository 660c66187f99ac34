"""Session keys: which conversation an inbound message belongs to.

A key is ``agent:<namespace>:<platform>:<chat_type>`` followed by the components that identify the
conversation lane, joined with ``:``. For ids without ``:`` or ``%`` DM keys and the keys of
group members (or of a whole group) are byte-identical to the ones Hermes Agent builds, so
existing routing data keeps working.

DM keys use the chat id (plus the thread, if any); without a chat id they fall back to the
participant, then the thread. Other chat types use ``chat_id``, then the thread marker
``thread`` and the ``thread_id`` when there is a thread, and, when isolation applies, the
participant: group members are isolated by default (``group_sessions_per_user``), threads are
shared by default and isolated only when ``thread_sessions_per_user`` is also set.

The thread marker is where this library departs from Hermes, which wrote ``<chat>:<thread>``:
that is also the form of ``<chat>:<member>``, so a Telegram topic whose id equalled a member's
user id shared that member's lane. A component spelled exactly like the marker is written
``%74hread`` in the keys of shared chats, so a bare ``thread`` segment is always the marker and
a thread key never equals a member key.

Beyond Hermes: components containing ``:`` or ``%`` are percent-encoded (``%3A``, ``%25``) so a key
never gains segments by accident, :func:`parse_session_key` returns the parts back, and identities
are canonicalised per platform (WhatsApp's is built in).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions.exceptions import InvalidKeyError
from hermes_sessions.models import SLUG_PATTERN

if TYPE_CHECKING:
    from hermes_sessions.models import SessionSource

__all__ = [
    "Canonicalizer",
    "KeyPolicy",
    "ParsedSessionKey",
    "WhatsAppIdentity",
    "build_session_key",
    "is_private_lane",
    "parse_session_key",
    "session_key_parts",
]

Canonicalizer = Callable[[str], str]
"""Maps a raw platform identity (user id, DM chat id) to its canonical form.

.. versionadded:: 0.1.0
"""

KEY_PREFIX: Final = "agent"
THREAD_MARKER: Final = "thread"
"""The segment that precedes the thread id in the key of a shared chat."""
_ESCAPED_MARKER: Final = "%74hread"
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ENCODED = re.compile(r"%(25|3[Aa])")


def _encode(component: str) -> str:
    return component.replace("%", "%25").replace(":", "%3A")


def _encode_shared(component: str) -> str:
    """:func:`_encode`, and the marker's spelling escaped as in a shared chat's key."""
    return _ESCAPED_MARKER if component == THREAD_MARKER else _encode(component)


def _decode(component: str) -> str:
    if component == _ESCAPED_MARKER:
        return THREAD_MARKER
    return _ENCODED.sub(lambda m: "%" if m.group(1) == "25" else ":", component)


# -- identity canonicalisers -----------------------------------------------------------------------


def _whatsapp_bare(raw: str) -> str:
    """``+1 555...:12@s.whatsapp.net`` -> ``1555...``: drop ``+``, the device and the domain."""
    bare = raw.strip().removeprefix("+")
    for separator in (":", "@"):
        bare = bare.split(separator, 1)[0]
    return bare


def _alias_lookup(groups: Iterable[Iterable[str]]) -> Mapping[str, str]:
    """Merge overlapping alias groups and map every member to the group's canonical alias."""
    parent: dict[str, str] = {}

    def find(item: str) -> str:
        root = parent.setdefault(item, item)
        while root != parent[root]:
            root = parent[root]
        parent[item] = root
        return root

    for group in groups:
        members = [m for m in (_whatsapp_bare(raw) for raw in group) if m]
        for member in members:
            find(member)
        for member in members[1:]:
            parent[find(member)] = find(members[0])
    clusters: dict[str, list[str]] = {}
    for member in parent:
        clusters.setdefault(find(member), []).append(member)
    lookup: dict[str, str] = {}
    for members in clusters.values():
        canonical = min(members, key=lambda alias: (len(alias), alias))
        lookup.update(dict.fromkeys(members, canonical))
    return MappingProxyType(lookup)


def _alias_groups(groups: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(group) for group in groups)


@attrs.frozen
class WhatsAppIdentity:
    """Canonicalise WhatsApp identities so one person maps to one key.

    Strips a leading ``+``, the device suffix (from the first ``:``) and the JID/LID domain (from
    the first ``@``). With ``aliases`` (groups of ids known to be the same person, e.g. a phone
    number and its LID), every member maps to the shortest alias, then the lexicographically first.
    Overlapping groups are merged.

    >>> WhatsAppIdentity()("+15551234567:3@s.whatsapp.net")
    '15551234567'
    >>> WhatsAppIdentity([["15551234567", "207548392011@lid"]])("207548392011@lid")
    '15551234567'

    .. versionadded:: 0.1.0
    """

    aliases: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=_alias_groups)
    _lookup: Mapping[str, str] = attrs.field(init=False, eq=False, repr=False)

    @_lookup.default
    def _build_lookup(self) -> Mapping[str, str]:
        return _alias_lookup(self.aliases)

    def __call__(self, raw: str) -> str:
        """Return the canonical form of ``raw``."""
        bare = _whatsapp_bare(raw)
        return self._lookup.get(bare, bare)


DEFAULT_CANONICALIZERS: Final[Mapping[str, Canonicalizer]] = MappingProxyType(
    {"whatsapp": WhatsAppIdentity()}
)


def _merge_canonicalizers(
    given: Mapping[str, Canonicalizer | None],
) -> Mapping[str, Canonicalizer]:
    merged: dict[str, Canonicalizer] = dict(DEFAULT_CANONICALIZERS)
    for platform, canonicalizer in given.items():
        if canonicalizer is None:
            merged.pop(platform, None)
        elif not callable(canonicalizer):
            raise TypeError(f"the canonicalizer for {platform!r} must be callable")
        else:
            merged[platform] = canonicalizer
    return MappingProxyType(merged)


def _namespace(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or _NAMESPACE.fullmatch(value) is None:
        raise InvalidKeyError(
            str(value), "a namespace uses letters, digits, '_', '.', '-' (like 'main')"
        )


def _flag(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool")


@attrs.frozen(kw_only=True)
class KeyPolicy:
    """How session keys are built: a frozen value, so a host can keep several.

    Args:
        namespace: The profile namespace (``agent:<namespace>:...``), default ``main``.
        group_sessions_per_user: Give each member of a group their own session (default).
        thread_sessions_per_user: In threads, also isolate members (needs the group flag too);
            threads are shared by default.
        canonicalizers: Per-platform identity canonicalisers, merged over the built-in ones
            (WhatsApp); map a platform to ``None`` to remove a built-in one.

    .. versionadded:: 0.1.0
    """

    namespace: str = attrs.field(default="main", validator=_namespace)
    group_sessions_per_user: bool = attrs.field(default=True, validator=_flag)
    thread_sessions_per_user: bool = attrs.field(default=False, validator=_flag)
    canonicalizers: Mapping[str, Canonicalizer] = attrs.field(
        factory=dict, converter=_merge_canonicalizers, hash=False
    )

    def canonical(self, platform: str, identity: str | None) -> str | None:
        """Return ``identity`` in canonical form for ``platform`` (unchanged if none applies)."""
        if not identity:
            return None
        canonicalizer = self.canonicalizers.get(platform)
        if canonicalizer is None:
            return identity
        return canonicalizer(identity) or identity

    def build(self, source: SessionSource) -> str:
        """Return the session key of ``source`` under this policy."""
        return build_session_key(source, self)


DEFAULT_KEY_POLICY: Final = KeyPolicy()


def _lane(source: SessionSource, policy: KeyPolicy) -> tuple[list[str], int | None]:
    """The components after ``agent:<namespace>``, and the index of the thread marker, if any."""
    platform = source.platform
    participant = policy.canonical(platform, source.participant)
    thread = source.thread_id
    parts = [platform, source.chat_type]
    if source.chat_type == "dm":
        lead = policy.canonical(platform, source.chat_id) or participant
        if lead is not None:
            parts.append(lead)
        if thread is not None:
            parts.append(thread)
        return parts, None
    if source.chat_id is not None:
        parts.append(source.chat_id)
    marker = None
    if thread is not None:
        marker = len(parts)
        parts += [THREAD_MARKER, thread]
    isolated = policy.group_sessions_per_user and (
        thread is None or policy.thread_sessions_per_user
    )
    if isolated and participant is not None:
        parts.append(participant)
    return parts, marker


def session_key_parts(source: SessionSource, policy: KeyPolicy = DEFAULT_KEY_POLICY) -> list[str]:
    """Return the unencoded components of ``source``'s key after ``agent:<namespace>``.

    The first two are always the platform and chat type; see the module docstring for the rest.
    In a shared chat, a thread id is preceded by the marker component ``thread``.

    .. versionadded:: 0.1.0
    """
    return _lane(source, policy)[0]


def build_session_key(source: SessionSource, policy: KeyPolicy = DEFAULT_KEY_POLICY) -> str:
    """Return the session key for a message from ``source``.

    >>> from hermes_sessions.models import SessionSource
    >>> build_session_key(
    ...     SessionSource(
    ...         platform="feishu", chat_type="group", chat_id="oc_xxx", user_id="ou_user1"
    ...     )
    ... )
    'agent:main:feishu:group:oc_xxx:ou_user1'
    >>> build_session_key(
    ...     SessionSource(
    ...         platform="telegram", chat_type="supergroup", chat_id=-100, thread_id=42, user_id=42
    ...     )
    ... )
    'agent:main:telegram:group:-100:thread:42'

    .. versionadded:: 0.1.0
    """
    parts, marker = _lane(source, policy)
    if source.chat_type == "dm":
        encoded = [_encode(part) for part in parts]
    else:
        encoded = parts[:2] + [
            part if index == marker else _encode_shared(part)
            for index, part in enumerate(parts[2:], start=2)
        ]
    return ":".join([KEY_PREFIX, policy.namespace, *encoded])


@attrs.frozen(kw_only=True)
class ParsedSessionKey:
    """The parts of a session key, decoded.

    ``segments`` are the components after the chat type, the thread marker included. In a
    shared chat's key the marker (``thread``, at ``marker_index``) says which segment is the
    thread, so a thread key and a member key are told apart; whether a segment without it is a
    chat or a member depends on the source that built the key (``C`` may be a chat or, when the
    chat id was missing, a member), so segments are returned as they are rather than guessed at.

    .. versionadded:: 0.1.0
    """

    namespace: str
    platform: str
    chat_type: str
    segments: tuple[str, ...]
    marker_index: int | None = None
    """Where the thread marker is in ``segments`` (``None``: a DM key, or no thread)."""

    @property
    def is_dm(self) -> bool:
        """Whether this is a direct-message key."""
        return self.chat_type == "dm"

    @property
    def thread_id(self) -> str | None:
        """The thread of a shared chat's key (after the marker), or of a DM's ``<chat>:<thread>``.

        ``None`` for a member's or a whole chat's lane, and for a one-segment DM key (the
        chat, the sender or, without either, the thread: only the source can say).
        """
        if self.marker_index is not None:
            return self.segments[self.marker_index + 1]
        if self.is_dm and len(self.segments) == 2:  # noqa: PLR2004  # lead, thread
            return self.segments[1]
        return None

    @property
    def is_thread(self) -> bool:
        """Whether the key names a thread (see :attr:`thread_id`)."""
        return self.thread_id is not None

    def __str__(self) -> str:
        encode = _encode if self.is_dm else _encode_shared
        return ":".join(
            [KEY_PREFIX, self.namespace, self.platform, self.chat_type]
            + [
                segment if index == self.marker_index else encode(segment)
                for index, segment in enumerate(self.segments)
            ]
        )


def parse_session_key(key: str) -> ParsedSessionKey:
    """Split a session key into its decoded parts; raise :class:`InvalidKeyError` if malformed.

    >>> parse_session_key("agent:main:telegram:group:-100:17585").segments
    ('-100', '17585')
    >>> parse_session_key("agent:main:telegram:group:-100:thread:17585").thread_id
    '17585'

    .. versionadded:: 0.1.0
    """
    if not isinstance(key, str):
        raise InvalidKeyError(repr(key), "a session key is a string")
    raw = key.split(":")
    if len(raw) < 4 or raw[0] != KEY_PREFIX:  # noqa: PLR2004  # agent, namespace, platform, type
        raise InvalidKeyError(key, "expected 'agent:<namespace>:<platform>:<chat_type>[:...]'")
    _, namespace, platform, chat_type, *segments = raw
    if _NAMESPACE.fullmatch(namespace) is None:
        raise InvalidKeyError(key, f"bad namespace {namespace!r}")
    for name, value in (("platform", platform), ("chat type", chat_type)):
        if SLUG_PATTERN.fullmatch(value) is None:
            raise InvalidKeyError(key, f"bad {name} {value!r}: expected a lowercase slug")
    if any(segment == "" for segment in segments):
        raise InvalidKeyError(key, "empty component (two ':' in a row or a trailing ':')")
    marker = None
    if chat_type != "dm" and THREAD_MARKER in segments[:-1]:
        marker = segments.index(THREAD_MARKER)
    return ParsedSessionKey(
        namespace=namespace,
        platform=platform,
        chat_type=chat_type,
        segments=tuple(_decode(segment) for segment in segments),
        marker_index=marker,
    )


def is_private_lane(session_key: str) -> bool:
    """Whether a lane is private: only a key whose chat type is ``dm`` is.

    Every group, channel or thread key is *shared*, whether or not it isolates its members: the
    bot's answers there are read by everyone in the chat. A key that cannot be parsed counts as
    shared (the safe side). Resume and search from a shared lane see only that lane's own
    sessions; see ``docs/concepts.md``.

    >>> is_private_lane("agent:main:telegram:dm:42")
    True
    >>> is_private_lane("agent:main:feishu:group:oc_team:ou_lin")
    False

    .. versionadded:: 0.1.0
    """
    try:
        return parse_session_key(session_key).is_dm
    except InvalidKeyError:
        return False
