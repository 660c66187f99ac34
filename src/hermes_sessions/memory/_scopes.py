"""The values of scoped memory: scopes, where an entry was written, who asks, erasure reports.

:class:`~hermes_sessions.memory.ScopedMemory` (``_scoped``) stores and loads them; this module
holds the pure parts: the stamp format, the loading rule (:meth:`MemoryContext.sees`) and the
folder names.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import quote

import attrs

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.keys import is_private_lane

if TYPE_CHECKING:
    from collections.abc import Collection

    from hermes_sessions.models import SessionSource

__all__ = [
    "MEMORY_SCOPES",
    "STAMP_MARK",
    "MemoryContext",
    "MemoryEntry",
    "MemoryEraseReport",
    "MemoryScope",
    "WrittenIn",
    "folder_name",
]

MEMORY_SCOPES: Final = ("app", "user", "lane")
"""The three scopes, from the widest: the agent's notes, a user's profile, one lane's notes.

.. versionadded:: 0.1.0
"""

STAMP_MARK: Final = "<!-- written-in:"
"""How the line recording where an entry was written starts (the library sets it)."""

# The stamp is a line of its own, normally the last; a person may have typed after it.
_STAMP: Final = re.compile(r"^<!-- written-in: (\{[^\n]*\}) -->[ \t]*$\n?", re.MULTILINE)


def folder_name(text: str) -> str:
    """One path component that shows ``text`` and cannot climb out (``.`` and ``..`` escaped)."""
    quoted = quote(text, safe="-_@+=,:")
    return quoted.replace(".", "%2E") if quoted in {".", ".."} else quoted


@attrs.frozen
class MemoryScope:
    """Where an entry lives: ``MemoryScope.app()``, ``.user(platform, user_id)``, ``.lane(key)``.

    .. versionadded:: 0.1.0
    """

    kind: Literal["app", "user", "lane"]
    platform: str | None = None
    user_id: str | None = None
    session_key: str | None = None

    def __attrs_post_init__(self) -> None:
        wanted = {"app": (), "user": ("platform", "user_id"), "lane": ("session_key",)}
        if self.kind not in wanted:
            raise InvalidArgumentError(
                f"unknown memory scope {self.kind!r}; use 'app', 'user' or 'lane'"
            )
        for name in ("platform", "user_id", "session_key"):
            value = getattr(self, name)
            if (name in wanted[self.kind]) != (isinstance(value, str) and value != ""):
                raise InvalidArgumentError(
                    f"a {self.kind} scope takes {', '.join(wanted[self.kind]) or 'no ids'}; "
                    f"use MemoryScope.{self.kind}(...)"
                )

    @classmethod
    def app(cls) -> MemoryScope:
        """The agent's own notes, loaded in every lane."""
        return cls("app")

    @classmethod
    def user(cls, platform: str, user_id: str) -> MemoryScope:
        """The profile of one user of one platform."""
        return cls("user", platform=platform, user_id=user_id)

    @classmethod
    def lane(cls, session_key: str) -> MemoryScope:
        """The notes of one conversation key."""
        return cls("lane", session_key=session_key)

    def __str__(self) -> str:
        if self.kind == "user":
            return f"user:{self.platform}:{self.user_id}"
        if self.kind == "lane":
            return f"lane:{self.session_key}"
        return "app"


@attrs.frozen(kw_only=True)
class WrittenIn:
    """Where an entry was written: the lane key, its privacy, the user, the time.

    .. versionadded:: 0.1.0
    """

    session_key: str | None
    private: bool
    platform: str | None = None
    user_id: str | None = None
    at: datetime | None = None

    def to_json(self) -> str:
        """The stamp's JSON, with ``-`` pairs and ``>`` escaped so it never ends the comment."""
        data: dict[str, Any] = {"lane": self.session_key, "private": self.private}
        if self.platform is not None:
            data["user"] = [self.platform, self.user_id]
        if self.at is not None:
            data["at"] = self.at.isoformat()
        text = json.dumps(data, ensure_ascii=False, separators=(", ", ": "))
        return text.replace(">", "\\u003e").replace("--", "-\\u002d")

    @classmethod
    def from_json(cls, text: str) -> WrittenIn | None:
        """Parse a stamp; ``None`` when it is not one (a hand edit broke it)."""
        try:
            data = json.loads(text)
            user = data.get("user") or [None, None]
            at = datetime.fromisoformat(data["at"]) if data.get("at") else None
            return cls(
                session_key=data.get("lane"),
                private=bool(data.get("private", True)),
                platform=user[0],
                user_id=user[1],
                at=at if at is None or at.tzinfo is not None else None,
            )
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None


@attrs.frozen(kw_only=True)
class MemoryEntry:
    """One entry: its text (what the model sees) and where it was written (``None``: unknown).

    .. versionadded:: 0.1.0
    """

    text: str
    written_in: WrittenIn | None = None

    @classmethod
    def parse(cls, raw: str) -> MemoryEntry:
        """Split a stored entry into its text and its stamp."""
        matches = list(_STAMP.finditer(raw))
        if not matches:
            return cls(text=raw)
        text = _STAMP.sub("", raw).strip()
        return cls(text=text, written_in=WrittenIn.from_json(matches[-1].group(1)))

    def render(self) -> str:
        """The entry as stored: the text, then the stamp on a line of its own."""
        if self.written_in is None:
            return self.text
        return f"{self.text}\n{STAMP_MARK} {self.written_in.to_json()} -->"

    def by(self, platform: str, user_ids: Collection[str]) -> bool:
        """Whether the entry was written by one of ``user_ids`` of ``platform``."""
        stamp = self.written_in
        if stamp is None or stamp.platform != platform or stamp.user_id is None:
            return False
        return stamp.user_id in user_ids


def _private_default(instance: MemoryContext) -> bool:
    return is_private_lane(instance.session_key)


@attrs.frozen(kw_only=True)
class MemoryContext:
    """Who asks, from which lane: decides what a snapshot loads and where a tool call writes.

    Args:
        session_key: The lane the conversation runs in.
        platform: The asking user's platform (``None``: no user known, no profile).
        user_id: The asking user's id there (the canonical one: ``SessionSource.participant``).
        private: Whether the lane is private; default ``is_private_lane(session_key)`` (only a
            ``dm`` key is).
        incognito: An incognito lane: every write is refused.

    .. versionadded:: 0.1.0
    """

    session_key: str = attrs.field(validator=attrs.validators.instance_of(str))
    platform: str | None = None
    user_id: str | None = None
    private: bool = attrs.field(default=attrs.Factory(_private_default, takes_self=True))
    incognito: bool = False

    @classmethod
    def of(
        cls, source: SessionSource, session_key: str, *, incognito: bool = False
    ) -> MemoryContext:
        """The context of a message from ``source`` in lane ``session_key`` (its speaker)."""
        return cls(
            session_key=session_key,
            platform=source.platform,
            user_id=source.participant,
            incognito=incognito,
        )

    @property
    def user_scope(self) -> MemoryScope | None:
        """The asking user's profile scope (``None`` without a user)."""
        if not self.platform or not self.user_id:
            return None
        return MemoryScope.user(self.platform, self.user_id)

    @property
    def lane_scope(self) -> MemoryScope:
        """This lane's notes."""
        return MemoryScope.lane(self.session_key)

    def sees(self, scope: MemoryScope, entry: MemoryEntry) -> bool:
        """The loading rule: whether ``entry`` of ``scope`` is loaded in this lane."""
        if scope.kind != "user" or self.private:
            return True
        return entry.written_in is not None and not entry.written_in.private


@attrs.frozen(kw_only=True)
class MemoryEraseReport:
    """What :meth:`ScopedMemory.erase_user` removed (or, on a dry run, would remove).

    .. versionadded:: 0.1.0
    """

    entries: int
    """Entries attributed to the user, removed from app and lane files."""
    profiles: tuple[str, ...]
    """The user profiles removed (``user:<platform>:<id>``)."""
    lanes: tuple[str, ...]
    """Lanes whose notes were removed whole (the keys the session store erased)."""
    files: tuple[str, ...]
    """Every file changed or deleted, backups included."""
