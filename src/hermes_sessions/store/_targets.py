"""Resume targets: which session ``/resume <target>`` names, for whom.

A target is an exact id, a unique id prefix, or a title (an exact title wins; else the highest
numbered session of the title's lineage). Only sessions the requester may
resume are candidates; a compressed session resolves to its compression tip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeAlias

import attrs

from hermes_sessions.exceptions import AmbiguousSessionError, SessionNotFoundError
from hermes_sessions.keys import KeyPolicy
from hermes_sessions.models import SessionRecord, SessionSource
from hermes_sessions.protocols import Backend
from hermes_sessions.queries import SessionQuery, Visibility
from hermes_sessions.store._lineage import tip_in_backend
from hermes_sessions.titles import lineage_key

__all__ = ["ResumeFilter", "TargetResolver"]

TITLE_NUMBER_SEPARATOR: Final = " #"

ResumeFilter: TypeAlias = Callable[[SessionSource | None, SessionRecord], bool]
"""``allow(requester, record)``: whether ``requester`` may resume ``record``."""


@attrs.frozen(kw_only=True)
class TargetResolver:
    """Resolves resume targets of ``key`` for ``requester`` against ``backend``.

    ``allow(requester, record)`` replaces the default rule (same key, or same platform and user).
    """

    backend: Backend
    keys: KeyPolicy
    key: str
    requester: SessionSource | None
    allow: ResumeFilter | None

    def resolve(self, target: str) -> SessionRecord:
        """The session ``target`` names (id, id prefix, or title), at its compression tip."""
        target = target.strip()
        if not target:
            raise SessionNotFoundError(session_id=target, hint="give a session id or title")
        if not target.isascii() and _has_surrogate(target):
            raise SessionNotFoundError(
                session_id=target,
                hint="it holds a lone surrogate, which no stored id or title does; decode the "
                "text with errors='replace' or drop the character",
            )
        record = self._by_id_or_prefix(target)
        if record is None:
            record = self._by_title(target)
        if record is None:
            raise SessionNotFoundError(
                session_id=target,
                hint="no session you may resume has that id, id prefix or title; "
                "list_sessions shows the candidates",
            )
        return tip_in_backend(self.backend, record)

    def _candidates(self, query: SessionQuery) -> list[SessionRecord]:
        if self.allow is None:
            visibility = Visibility.for_requester(self.key, self.requester, keys=self.keys)
            query = attrs.evolve(query, visible_to=visibility)
        records = [item.record for item in self.backend.list_sessions(query).items]
        if self.allow is not None:
            records = [r for r in records if self.allow(self.requester, r)]
        return records

    def _by_id_or_prefix(self, target: str) -> SessionRecord | None:
        matches = self._candidates(SessionQuery(limit=None, id_prefix=target))
        exact = [r for r in matches if r.id == target]
        if exact:
            return exact[0]
        if len(matches) > 1:
            raise AmbiguousSessionError(target, sorted(r.id for r in matches))
        return matches[0] if matches else None

    def _by_title(self, target: str) -> SessionRecord | None:
        # An exact title wins (its compression tip is taken afterwards: that is the only
        # lineage a title follows by itself); "plan #2" of a branch is not "plan".
        exact = self._candidates(SessionQuery(limit=None, title=target))
        pool = exact or self._candidates(SessionQuery(limit=None, title_lineage=target))

        def number(record: SessionRecord) -> int:
            tail = (record.title or "").rpartition(TITLE_NUMBER_SEPARATOR)[2]
            same = lineage_key(record.title or "") == lineage_key(target)
            return int(tail) if tail.isdigit() and same else 1

        if not pool:
            return None
        best = max(number(r) for r in pool)
        top = [r for r in pool if number(r) == best]
        if len(top) > 1:
            raise AmbiguousSessionError(target, sorted(r.id for r in top))
        return top[0]


def _has_surrogate(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False
