"""Lineage: how sessions descend from one another, and the tip of a compression chain.

A session's parent is the one it continues. A compressed parent (ended ``compression``) leads to
the child holding its summary; a branch (``/branch``) names its parent under
:data:`BRANCH_MARKER` in its ``model_config``. The newest session of a compression chain is its
*tip*: what a resume of a compressed session lands on and what a lineage reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import attrs

from hermes_sessions.exceptions import SessionNotFoundError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import SessionRecord
from hermes_sessions.queries import SessionQuery

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from hermes_sessions.protocols import Backend

__all__ = [
    "BRANCH_MARKER",
    "COMPRESSION",
    "Lineage",
    "LineageLink",
    "Relation",
    "compression_tip",
    "lineage_of",
    "relation",
    "root_id",
    "tip_in_backend",
]

BRANCH_MARKER: Final = "_branched_from"
"""Key in a branch's ``model_config`` naming the session it was copied from (as Hermes does)."""

COMPRESSION: Final = "compression"
"""The end reason of a compressed session, and the relation of its child."""

Relation: TypeAlias = Literal["root", "compression", "branch", "child"]


def relation(parent: SessionRecord | None, child: SessionRecord) -> Relation:
    """How ``child`` relates to ``parent`` (``root`` when it has none)."""
    if parent is None:
        return "root"
    if BRANCH_MARKER in child.model_config:
        return "branch"
    if parent.end_reason == COMPRESSION:
        return "compression"
    return "child"


def compression_tip(
    record: SessionRecord, children: Callable[[SessionRecord], Iterable[SessionRecord]]
) -> SessionRecord:
    """Follow ``record``'s compression children to the newest one.

    ``children(parent)`` lists the sessions whose parent is ``parent``; branches among them are
    skipped, and of several compression children the latest started wins.
    """
    seen = {record.id}
    while record.end_reason == COMPRESSION:
        candidates = [
            child
            for child in children(record)
            if relation(record, child) == "compression" and child.id not in seen
        ]
        if not candidates:
            break
        record = max(candidates, key=lambda r: (r.started_at, r.id))
        seen.add(record.id)
    return record


def _children(backend: Backend, parent_id: str) -> list[SessionRecord]:
    page = backend.list_sessions(
        SessionQuery(parent_session_id=parent_id, order="started", descending=False, limit=None)
    )
    return [item.record for item in page.items]


def tip_in_backend(backend: Backend, record: SessionRecord) -> SessionRecord:
    """The compression tip of ``record``, reading its descendants from ``backend``."""
    return compression_tip(record, lambda parent: _children(backend, parent.id))


@attrs.frozen(kw_only=True)
class LineageLink:
    """One session in a lineage and how it relates to its parent.

    ``relation`` is ``root``, ``compression`` (the parent was compressed into it), ``branch``
    (copied from the parent by ``/branch``) or ``child`` (any other parent link).

    .. versionadded:: 0.1.0
    """

    record: SessionRecord
    relation: Relation
    depth: int


@attrs.frozen(kw_only=True)
class Lineage:
    """A session's ancestors and descendants, root first, depth-first.

    .. versionadded:: 0.1.0
    """

    session_id: str
    links: tuple[LineageLink, ...]

    @property
    def root(self) -> SessionRecord:
        """The oldest ancestor."""
        return self.links[0].record

    @property
    def tip(self) -> SessionRecord:
        """The newest session of the compression chain that ``session_id`` belongs to."""
        records = [link.record for link in self.links]
        start = next(r for r in records if r.id == self.session_id)
        return compression_tip(
            start, lambda parent: [r for r in records if r.parent_session_id == parent.id]
        )


def _root_of(backend: Backend, record: SessionRecord) -> SessionRecord:
    seen = {record.id}
    while record.parent_session_id is not None:
        parent = backend.get_session(record.parent_session_id)
        if parent is None or parent.id in seen:
            break
        seen.add(parent.id)
        record = parent
    return record


def lineage_of(backend: Backend, session_id: str) -> Lineage:
    """The family of ``session_id``: its root and all the root's descendants, depth-first."""
    validate_session_id(session_id)
    record = backend.get_session(session_id)
    if record is None:
        raise SessionNotFoundError(session_id=session_id)
    links: list[LineageLink] = []
    visited: set[str] = set()

    def walk(node: SessionRecord, parent: SessionRecord | None, depth: int) -> None:
        if node.id in visited:
            return
        visited.add(node.id)
        links.append(LineageLink(record=node, relation=relation(parent, node), depth=depth))
        for child in _children(backend, node.id):
            walk(child, node, depth + 1)

    walk(_root_of(backend, record), None, 0)
    return Lineage(session_id=session_id, links=tuple(links))


def root_id(backend: Backend, record: SessionRecord, cache: dict[str, str]) -> str:
    """The id of ``record``'s lineage root; ``cache`` remembers the roots of every step."""
    path = [record.id]
    current = record
    while current.parent_session_id is not None and current.id not in cache:
        parent = backend.get_session(current.parent_session_id)
        if parent is None or parent.id in path:
            break
        path.append(parent.id)
        current = parent
    root = cache.get(current.id, current.id)
    for session_id in path:
        cache[session_id] = root
    return root
