r"""Scoped memory: app notes, a profile per platform user, notes per lane; loading follows lanes.

A gateway serves many people, so one ``USER.md`` for everyone would put what Lin told the bot in a
DM into Bob's system prompt in a group. :class:`ScopedMemory` keeps memory in three scopes, each a
bounded, locked, crash-safe Markdown file under one directory:

============  ===========================================  =========================================
scope         file                                         holds
============  ===========================================  =========================================
app           ``MEMORY.md``                                the agent's own notes (everywhere)
user          ``users/<platform>/<user id>/USER.md``       one platform user's profile
lane          ``lanes/<session key>/MEMORY.md``            notes for one conversation key
============  ===========================================  =========================================

Every entry written through a :class:`MemoryContext` records where it was written — the lane key,
whether that lane is private, the user and the time — on a last line of its own,
``<!-- written-in: {...} -->``: a person editing the file sees it, the model never does (it is
cut before scanning and before the prompt). :meth:`ScopedMemory.snapshot` applies the loading rule
of ``docs/concepts.md``: in a private lane the user's whole profile, in a shared lane only the
entries of the profile written in shared lanes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from hermes_sessions import options
from hermes_sessions.clock import SystemClock
from hermes_sessions.exceptions import (
    IncognitoMemoryError,
    InvalidArgumentError,
    InvalidMemoryContentError,
    MemoryLimitError,
    MemoryScopeError,
)
from hermes_sessions.memory._format import (
    MemoryResult,
    MemorySnapshot,
    Outcome,
    TargetSnapshot,
    check_content,
    check_old_text,
    entries_usage,
    find_entry,
    snapshot_target,
)
from hermes_sessions.memory._scopes import (
    STAMP_MARK,
    MemoryContext,
    MemoryEntry,
    MemoryEraseReport,
    MemoryScope,
    WrittenIn,
)
from hermes_sessions.memory._storage import (
    TARGETS,
    BackendStorage,
    FileStorage,
    SupportsMemory,
)
from hermes_sessions.memory._store import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MEMORY_CHAR_LIMIT,
    DEFAULT_USER_CHAR_LIMIT,
)
from hermes_sessions.paths import memories_dir
from hermes_sessions.protocols import Clock
from hermes_sessions.threats import DEFAULT_SCANNER, ThreatScanner

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = ["DEFAULT_LANE_CHAR_LIMIT", "ScopedMemory"]

DEFAULT_LANE_CHAR_LIMIT: Final = 1375
"""Default character limit of one lane's notes.

.. versionadded:: 0.1.0
"""

_TITLES: Final = {
    "app": "MEMORY (your personal notes)",
    "user": "USER PROFILE (who the user is)",
    "lane": "CONVERSATION NOTES (this conversation only)",
}
_PRIVATE_HINT: Final = (
    "this conversation is private (a direct message), and app memory is shown in every "
    "conversation, groups included; keep the fact in scope 'lane' or in the user's profile"
)


def _scanner(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, ThreatScanner):
        raise TypeError(f"{attribute.name} must be a ThreatScanner or None, got {value!r}")


def _backend(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, SupportsMemory):
        raise TypeError(
            f"{type(value).__name__} does not store memory (SupportsMemory: PostgreSQL and the "
            "in-memory backend do); leave backend out to keep memory in files"
        )


def _directory(value: Path | str | None) -> Path:
    return memories_dir() if value is None else Path(value)


@attrs.define(repr=False, eq=False, on_setattr=attrs.setters.frozen)
class ScopedMemory:
    """Memory in three scopes under one directory, loaded by the lane rule (``docs/memory.md``).

    Args:
        directory: The memory directory; default ``<home>/memories``.
        app_char_limit, user_char_limit, lane_char_limit: The limit of each scope's file.
        scanner: The threat scanner for new content and snapshots (``None``: off).
        lock_timeout: Seconds a write waits for a file's lock.
        clock: The time stamps and backups are named by.
        tool_writes_app: Whether a ``memory`` tool call may write app memory (with
            ``scope="app"``); by default only the host does, through :meth:`add` without a
            context.
        widen_private: Whether a tool call from a private lane may write app memory too (a
            private fact would then show in every lane, groups included).

    .. versionadded:: 0.1.0
    """

    directory: Path = attrs.field(default=None, converter=_directory)
    app_char_limit: int = attrs.field(
        default=DEFAULT_MEMORY_CHAR_LIMIT, kw_only=True, validator=options.positive_int
    )
    user_char_limit: int = attrs.field(
        default=DEFAULT_USER_CHAR_LIMIT, kw_only=True, validator=options.positive_int
    )
    lane_char_limit: int = attrs.field(
        default=DEFAULT_LANE_CHAR_LIMIT, kw_only=True, validator=options.positive_int
    )
    scanner: ThreatScanner | None = attrs.field(
        default=DEFAULT_SCANNER, kw_only=True, validator=_scanner
    )
    lock_timeout: float = attrs.field(
        default=DEFAULT_LOCK_TIMEOUT, kw_only=True, validator=options.seconds
    )
    clock: Clock = attrs.field(factory=SystemClock, kw_only=True)
    tool_writes_app: bool = attrs.field(default=False, kw_only=True)
    widen_private: bool = attrs.field(default=False, kw_only=True)
    backend: SupportsMemory | None = attrs.field(default=None, kw_only=True, validator=_backend)
    _storage: FileStorage | BackendStorage = attrs.field(init=False, on_setattr=attrs.setters.NO_OP)

    def __attrs_post_init__(self) -> None:
        if self.backend is not None:
            self._storage = BackendStorage(self.backend)
        else:
            self._storage = FileStorage(self.directory, self.limit, self.lock_timeout, self.clock)

    def __repr__(self) -> str:
        return f"ScopedMemory(directory={str(self.directory)!r})"

    # -- where things live -------------------------------------------------------------------------

    def path(self, scope: MemoryScope) -> Path:
        """The file of ``scope`` (the path shows the scope); not for memory in a ``backend``."""
        if not isinstance(self._storage, FileStorage):
            raise InvalidArgumentError(
                f"memory lives in the backend's database (scope id {str(scope)!r}), not in a file"
            )
        return Path(self._storage.where(scope))

    def limit(self, scope: MemoryScope) -> int:
        """The character limit of ``scope``."""
        return {
            "app": self.app_char_limit,
            "user": self.user_char_limit,
            "lane": self.lane_char_limit,
        }[scope.kind]

    # -- reading -----------------------------------------------------------------------------------

    def entries(self, scope: MemoryScope) -> tuple[MemoryEntry, ...]:
        """Every entry of ``scope`` as it is on disk now, with where each was written."""
        if not isinstance(scope, MemoryScope):
            raise TypeError(f"scope must be a MemoryScope, got {type(scope).__name__}")
        return tuple(MemoryEntry.parse(entry) for entry in self._storage.read(scope))

    def snapshot(self, context: MemoryContext) -> MemorySnapshot:
        """What a conversation in ``context`` loads: app memory, the profile by the rule, notes.

        ``memory`` is app memory, ``user`` the asking user's profile (in a shared lane only its
        entries written in shared lanes), ``lane`` the lane's notes.
        """
        user_scope = context.user_scope
        parts = []
        for kind, scope in (("app", MemoryScope.app()), ("user", user_scope)):
            entries = () if scope is None else self._visible(scope, context)
            parts.append(self._section(kind, [e.text for e in entries]))
        lane = self._section("lane", [e.text for e in self._visible(context.lane_scope, context)])
        memory, user = parts
        return MemorySnapshot(
            memory=memory,
            user=user,
            lane=lane,
            prompt_block="\n\n".join(p.text for p in (memory, user, lane) if p.text),
        )

    def _section(self, kind: str, texts: Sequence[str]) -> TargetSnapshot:
        scope_limit = {
            "app": self.app_char_limit,
            "user": self.user_char_limit,
            "lane": self.lane_char_limit,
        }[kind]
        return snapshot_target(
            TARGETS[kind],
            texts,
            scope_limit,
            self.scanner,
            title=_TITLES[kind],
            file_name={"app": "MEMORY.md", "user": "USER.md", "lane": "the lane's MEMORY.md"}[kind],
        )

    def _visible(self, scope: MemoryScope, context: MemoryContext) -> tuple[MemoryEntry, ...]:
        return tuple(entry for entry in self.entries(scope) if context.sees(scope, entry))

    # -- writing -----------------------------------------------------------------------------------

    def add(
        self, scope: MemoryScope, content: str, *, context: MemoryContext | None = None
    ) -> MemoryResult:
        """Add an entry to ``scope``; with ``context``, as a tool call from that lane.

        Without a context the host writes: any scope, no stamp (an unstamped profile entry counts
        as written in private). With one, the entry is stamped and the write checked: see
        :meth:`check_write`.
        """
        self.check_write(scope, "add", context)
        target = TARGETS[scope.kind]
        text = self._content(content, scope, "add")
        entry = MemoryEntry(text=text, written_in=self._stamp(context))
        limit = self.limit(scope)

        def plan(raw: tuple[str, ...]) -> Outcome:
            entries = [MemoryEntry.parse(item) for item in raw]
            visible = self._seen(scope, entries, context)
            if any(e.text == text for e in visible):
                return Outcome(raw, changed=False, message="Entry already exists; nothing changed.")
            texts = [e.text for e in entries]
            if (needed := entries_usage([*texts, text])) > limit:
                raise MemoryLimitError(
                    target=target,
                    action="add",
                    entries=tuple(e.text for e in visible),
                    usage=entries_usage(texts),
                    limit=limit,
                    requested_usage=needed,
                )
            return Outcome((*raw, entry.render()), changed=True, message="Entry added.")

        return self._run(scope, "add", plan, context)

    def replace(
        self,
        scope: MemoryScope,
        old_text: str,
        content: str,
        *,
        context: MemoryContext | None = None,
    ) -> MemoryResult:
        """Replace the entry (among those ``context`` sees) containing ``old_text``.

        The new entry is stamped with ``context``: an entry replaced from a private lane becomes
        private; an entry written in private is never found from a shared lane.
        """
        self.check_write(scope, "replace", context)
        target = TARGETS[scope.kind]
        old = check_old_text(old_text, target=target, action="replace")
        text = self._content(content, scope, "replace")
        stamp = self._stamp(context)
        limit = self.limit(scope)

        def plan(raw: tuple[str, ...]) -> Outcome:
            entries = [MemoryEntry.parse(item) for item in raw]
            indices = [i for i, e in enumerate(entries) if self._sees(scope, e, context)]
            found = indices[find_entry([entries[i].text for i in indices], old, target, "replace")]
            texts = [e.text for e in entries]
            new_texts = [*texts[:found], text, *texts[found + 1 :]]
            usage = entries_usage(texts)
            if (needed := entries_usage(new_texts)) > limit and needed > usage:
                raise MemoryLimitError(
                    target=target,
                    action="replace",
                    entries=tuple(entries[i].text for i in indices),
                    usage=usage,
                    limit=limit,
                    requested_usage=needed,
                )
            if entries[found].text == text and entries[found].written_in == stamp:
                return Outcome(
                    raw, changed=False, message="Entry already reads so; nothing changed."
                )
            new = MemoryEntry(text=text, written_in=stamp).render()
            kept = tuple(dict.fromkeys((*raw[:found], new, *raw[found + 1 :])))
            return Outcome(kept, changed=True, message="Entry replaced.")

        return self._run(scope, "replace", plan, context)

    def remove(
        self, scope: MemoryScope, old_text: str, *, context: MemoryContext | None = None
    ) -> MemoryResult:
        """Remove the entry (among those ``context`` sees) containing ``old_text``."""
        self.check_write(scope, "remove", context)
        target = TARGETS[scope.kind]
        old = check_old_text(old_text, target=target, action="remove")

        def plan(raw: tuple[str, ...]) -> Outcome:
            entries = [MemoryEntry.parse(item) for item in raw]
            indices = [i for i, e in enumerate(entries) if self._sees(scope, e, context)]
            found = indices[find_entry([entries[i].text for i in indices], old, target, "remove")]
            return Outcome(
                (*raw[:found], *raw[found + 1 :]), changed=True, message="Entry removed."
            )

        return self._run(scope, "remove", plan, context)

    def check_write(self, scope: MemoryScope, action: str, context: MemoryContext | None) -> None:
        """Refuse a tool call's write the rule does not allow (the host, without context, may).

        From a lane a call writes only the asking user's profile, the lane's own notes, and app
        memory only when ``tool_writes_app`` (and, from a private lane, ``widen_private``).

        Raises:
            IncognitoMemoryError: the lane is incognito.
            MemoryScopeError: the scope is not the caller's to write.
        """
        if context is None:
            return
        target = TARGETS[scope.kind]
        if context.incognito:
            raise IncognitoMemoryError(context.session_key, target=target, action=action)
        if scope.kind == "app":
            if not self.tool_writes_app:
                raise MemoryScopeError(
                    "only the host writes app memory (shown in every conversation); keep the "
                    "note in scope 'lane' for this conversation",
                    scope=str(scope),
                    target=target,
                    action=action,
                )
            if context.private and not self.widen_private:
                raise MemoryScopeError(
                    _PRIVATE_HINT, scope=str(scope), target=target, action=action
                )
        elif scope.kind == "user" and scope != context.user_scope:
            raise MemoryScopeError(
                "a conversation writes only the profile of the user who is speaking",
                scope=str(scope),
                target=target,
                action=action,
            )
        elif scope.kind == "lane" and scope != context.lane_scope:
            raise MemoryScopeError(
                "a conversation writes only its own lane's notes",
                scope=str(scope),
                target=target,
                action=action,
            )

    # -- erasure -----------------------------------------------------------------------------------

    def erase_user(
        self,
        platform: str,
        *user_ids: str,
        lane_keys: Iterable[str] = (),
        dry_run: bool = False,
    ) -> MemoryEraseReport:
        """Remove the user's profiles, their entries in every scope, and the lanes' notes given.

        Entries stamped as written by one of ``user_ids`` of ``platform`` leave app memory and
        every lane's notes (each file rewritten under its lock); the profiles and the notes of
        ``lane_keys`` (the keys the session store erased) are deleted with their folders; drift
        backups of every file changed are deleted too, so no copy of an erased entry stays.
        """
        if not user_ids:
            raise InvalidArgumentError("erase_user needs at least one user id after the platform")
        ids = frozenset(user_ids)
        files: list[str] = []
        profiles: list[str] = []
        lanes: list[str] = []
        wholes = [MemoryScope.user(platform, user_id) for user_id in sorted(ids)]
        wholes += [MemoryScope.lane(key) for key in dict.fromkeys(lane_keys)]
        for scope in wholes:
            held = self._storage.holding(scope)
            if not held:
                continue
            (profiles if scope.kind == "user" else lanes).append(
                str(scope) if scope.kind == "user" else scope.session_key or ""
            )
            files.extend(held)
            if not dry_run:
                self._storage.delete(scope)
        removed = 0
        scopes = [MemoryScope.app()]
        scopes += [MemoryScope.lane(key) for key in self._storage.lanes() if key not in lanes]
        for scope in scopes:
            removed += self._erase_entries(scope, platform, ids, files, dry_run=dry_run)
        return MemoryEraseReport(
            entries=removed, profiles=tuple(profiles), lanes=tuple(lanes), files=tuple(files)
        )

    def _erase_entries(
        self,
        scope: MemoryScope,
        platform: str,
        ids: frozenset[str],
        files: list[str],
        *,
        dry_run: bool,
    ) -> int:
        """Remove the user's entries from one scope (and its drift backups); count them."""
        count = sum(1 for entry in self.entries(scope) if entry.by(platform, ids))
        if not count:
            return 0
        files.append(self._storage.where(scope))
        files.extend(self._storage.extras(scope))
        if dry_run:
            return count

        def plan(raw: tuple[str, ...]) -> Outcome:
            kept = tuple(r for r in raw if not MemoryEntry.parse(r).by(platform, ids))
            return Outcome(kept, changed=kept != raw, message="Entries erased.")

        self._storage.change(scope, "erase", plan)
        self._storage.drop_extras(scope)
        return count

    # -- internals ---------------------------------------------------------------------------------

    def _content(self, content: object, scope: MemoryScope, action: str) -> str:
        target = TARGETS[scope.kind]
        text = check_content(
            content, target=target, action=action, limit=self.limit(scope), scanner=self.scanner
        )
        if STAMP_MARK in text:
            raise InvalidMemoryContentError(
                f"'{STAMP_MARK}' marks where an entry was written and is set by the library; "
                "leave it out",
                target=target,
                action=action,
            )
        return text

    def _stamp(self, context: MemoryContext | None) -> WrittenIn | None:
        if context is None:
            return None
        return WrittenIn(
            session_key=context.session_key,
            private=context.private,
            platform=context.platform if context.user_id else None,
            user_id=context.user_id if context.platform else None,
            at=self.clock.now(),
        )

    @staticmethod
    def _sees(scope: MemoryScope, entry: MemoryEntry, context: MemoryContext | None) -> bool:
        return context is None or context.sees(scope, entry)

    def _seen(
        self, scope: MemoryScope, entries: Sequence[MemoryEntry], context: MemoryContext | None
    ) -> list[MemoryEntry]:
        return [e for e in entries if self._sees(scope, e, context)]

    def _run(
        self,
        scope: MemoryScope,
        action: str,
        plan: Callable[[tuple[str, ...]], Outcome],
        context: MemoryContext | None,
    ) -> MemoryResult:
        target = TARGETS[scope.kind]
        outcome = self._storage.change(scope, action, plan)
        entries = [MemoryEntry.parse(raw) for raw in outcome.entries]
        texts = [e.text for e in entries]
        return MemoryResult(
            target=target,
            action=action,
            message=outcome.message,
            changed=outcome.changed,
            entries=tuple(e.text for e in self._seen(scope, entries, context)),
            usage=entries_usage(texts),
            limit=self.limit(scope),
            scope=scope.kind,
        )
