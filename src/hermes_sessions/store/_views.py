"""The reading and housekeeping half of SessionStore.

Listing, lineage, search, resume targets, context windows, pruning, erasure and index rebuilds.

Kept apart from ``store.py`` so each file stays readable; :class:`StoreViews` is a mixin of
:class:`~hermes_sessions.store.SessionStore` and uses only its backend, key policy and clock.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from hermes_sessions import serde
from hermes_sessions.exceptions import AmbiguousSessionError, ConflictError, SessionNotFoundError
from hermes_sessions.ids import validate_session_id
from hermes_sessions.models import Message, SessionRecord
from hermes_sessions.queries import SearchHit, SearchQuery, SessionPage, SessionQuery, Visibility
from hermes_sessions.titles import lineage_key

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from hermes_sessions.keys import KeyPolicy
    from hermes_sessions.models import SessionEntry, SessionSource
    from hermes_sessions.protocols import Backend, Clock

__all__ = ["AnchoredView", "EraseReport", "Lineage", "LineageLink", "PruneReport", "StoreViews"]

COMPRESSED: Final = "compression"
_TITLE_NUMBER_SEPARATOR: Final = " #"


@attrs.frozen(kw_only=True)
class LineageLink:
    """One session in a lineage and how it relates to its parent.

    ``relation`` is ``root``, ``compression`` (the parent was compressed into it), ``branch``
    (copied from the parent by ``/branch``) or ``child`` (any other parent link).

    .. versionadded:: 0.1.0
    """

    record: SessionRecord
    relation: Literal["root", "compression", "branch", "child"]
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
        by_id = {link.record.id: link for link in self.links}
        current = by_id[self.session_id].record
        while current.end_reason == COMPRESSED:
            children = [
                link.record
                for link in self.links
                if link.record.parent_session_id == current.id and link.relation == COMPRESSED
            ]
            if not children:
                break
            current = max(children, key=lambda r: (r.started_at, r.id))
        return current


@attrs.frozen(kw_only=True)
class AnchoredView:
    """A hit in context: user/assistant messages around an anchor plus the session's edges.

    .. versionadded:: 0.1.0
    """

    session: SessionRecord
    anchor: Message
    before: tuple[Message, ...]
    after: tuple[Message, ...]
    head: tuple[Message, ...]
    """The first messages of the session, if they come before the window."""
    tail: tuple[Message, ...]
    """The last messages of the session, if they come after the window."""


@attrs.frozen(kw_only=True)
class PruneReport:
    """What :meth:`StoreViews.prune` deleted, or would delete with ``dry_run``.

    .. versionadded:: 0.1.0
    """

    dry_run: bool
    session_ids: tuple[str, ...]
    messages: int
    bytes: int
    """Approximate size of the deleted data (its JSON encoding)."""


@attrs.frozen(kw_only=True)
class EraseReport:
    """What :meth:`StoreViews.erase_user` removed.

    .. versionadded:: 0.1.0
    """

    user_id: str
    sessions: tuple[str, ...]
    """Sessions the user owned, deleted whole."""
    messages: int
    """Messages the user sent in other people's (shared) sessions, deleted."""
    entries: tuple[str, ...]
    """Routing keys removed."""


def _relation(parent: SessionRecord | None, child: SessionRecord) -> str:
    if parent is None:
        return "root"
    if "_branched_from" in child.model_config:
        return "branch"
    if parent.end_reason == COMPRESSED:
        return COMPRESSED
    return "child"


def _size(message: Message) -> int:
    return len(json.dumps(serde.unstructure(message), ensure_ascii=False).encode())


class StoreViews:
    """Reading and housekeeping operations of the session store."""

    backend: Backend
    keys: KeyPolicy
    clock: Clock
    active_work: Callable[[str], bool] | None

    # -- listing -----------------------------------------------------------------------------------

    def list_sessions(
        self,
        query: SessionQuery | None = None,
        *,
        include_compressed: bool = False,
        **filters: Any,
    ) -> SessionPage:
        """One page of sessions, most recently active first (see :class:`SessionQuery`).

        Pass a ``SessionQuery`` or its fields as keywords. A compressed conversation shows as
        its newest descendant: sessions ended by compression are left out unless
        ``include_compressed``.
        """
        query = query if query is not None else SessionQuery(**filters)
        if not include_compressed and COMPRESSED not in query.exclude_end_reasons:
            query = attrs.evolve(
                query, exclude_end_reasons=(*query.exclude_end_reasons, COMPRESSED)
            )
        return self.backend.list_sessions(query)

    def lineage(self, session_id: str) -> Lineage:
        """The session's family: its ancestors and all their descendants, root first."""
        validate_session_id(session_id)
        record = self.backend.get_session(session_id)
        if record is None:
            raise SessionNotFoundError(session_id=session_id)
        seen = {record.id}
        while record.parent_session_id is not None:
            parent = self.backend.get_session(record.parent_session_id)
            if parent is None or parent.id in seen:
                break
            seen.add(parent.id)
            record = parent
        links: list[LineageLink] = []
        visited: set[str] = set()

        def walk(node: SessionRecord, parent: SessionRecord | None, depth: int) -> None:
            if node.id in visited:
                return
            visited.add(node.id)
            relation: Any = _relation(parent, node)
            links.append(LineageLink(record=node, relation=relation, depth=depth))
            children = self.backend.list_sessions(
                SessionQuery(
                    parent_session_id=node.id, order="started", descending=False, limit=None
                )
            )
            for child in children.items:
                walk(child.record, node, depth + 1)

        walk(record, None, 0)
        return Lineage(session_id=session_id, links=tuple(links))

    # -- resume targets ----------------------------------------------------------------------------

    def _candidates(
        self,
        key: str,
        requester: SessionSource | None,
        allow: Callable[[SessionSource | None, SessionRecord], bool] | None,
        **filters: Any,
    ) -> list[SessionRecord]:
        visible_to = None
        if allow is None:
            visible_to = Visibility.for_requester(key, requester, keys=self.keys)
        page = self.backend.list_sessions(
            SessionQuery(limit=None, visible_to=visible_to, **filters)
        )
        records = [item.record for item in page.items]
        if allow is not None:
            records = [r for r in records if allow(requester, r)]
        return records

    def _resolve_target(
        self,
        key: str,
        target: str,
        requester: SessionSource | None,
        allow: Callable[[SessionSource | None, SessionRecord], bool] | None,
    ) -> SessionRecord:
        """Find the session ``target`` names for ``requester`` (id, id prefix, or title)."""
        target = target.strip()
        if not target:
            raise SessionNotFoundError(session_id=target, hint="give a session id or title")
        record = self._by_id_or_prefix(key, target, requester, allow)
        if record is None:
            record = self._by_title(key, target, requester, allow)
        if record is None:
            raise SessionNotFoundError(
                session_id=target,
                hint="no session you may resume has that id, id prefix or title; "
                "list_sessions shows the candidates",
            )
        return self._compression_tip(record)

    def _by_id_or_prefix(
        self,
        key: str,
        target: str,
        requester: SessionSource | None,
        allow: Callable[[SessionSource | None, SessionRecord], bool] | None,
    ) -> SessionRecord | None:
        matches = self._candidates(key, requester, allow, id_prefix=target)
        exact = [r for r in matches if r.id == target]
        if exact:
            return exact[0]
        if len(matches) > 1:
            raise AmbiguousSessionError(target, sorted(r.id for r in matches))
        return matches[0] if matches else None

    def _by_title(
        self,
        key: str,
        target: str,
        requester: SessionSource | None,
        allow: Callable[[SessionSource | None, SessionRecord], bool] | None,
    ) -> SessionRecord | None:
        exact = self._candidates(key, requester, allow, title=target)
        family = self._candidates(key, requester, allow, title_lineage=target)
        numbered = target.rpartition(_TITLE_NUMBER_SEPARATOR)[2].isdigit()
        pool = exact if (numbered and exact) or not family else family

        def number(record: SessionRecord) -> int:
            tail = (record.title or "").rpartition(_TITLE_NUMBER_SEPARATOR)[2]
            same = lineage_key(record.title or "") == lineage_key(target)
            return int(tail) if tail.isdigit() and same else 1

        if not pool:
            return None
        best = max(number(r) for r in pool)
        top = [r for r in pool if number(r) == best]
        if len(top) > 1:
            raise AmbiguousSessionError(target, sorted(r.id for r in top))
        return top[0]

    def _compression_tip(self, record: SessionRecord) -> SessionRecord:
        seen = {record.id}
        while record.end_reason == COMPRESSED:
            children = [
                item.record
                for item in self.backend.list_sessions(
                    SessionQuery(parent_session_id=record.id, limit=None)
                ).items
                if "_branched_from" not in item.record.model_config and item.record.id not in seen
            ]
            if not children:
                break
            record = max(children, key=lambda r: (r.started_at, r.id))
            seen.add(record.id)
        return record

    # -- search and context ------------------------------------------------------------------------

    def search(
        self,
        query: str | SearchQuery,
        *,
        group: Literal["lineage"] | None = None,
        **filters: Any,
    ) -> list[SearchHit]:
        """Full-text search across sessions (query language: ``docs/search.md``).

        Pass the query text with :class:`SearchQuery` fields as keywords, or a ``SearchQuery``.
        ``group="lineage"`` keeps only the best hit per lineage root, so a compressed
        conversation counts once.
        """
        if isinstance(query, str):
            query = SearchQuery(text=query, **filters)
        search = getattr(self.backend, "search", None)
        if search is None or not self.backend.capabilities().search:
            raise TypeError(f"{self.backend!r} cannot search; use a backend with search")
        if group is None:
            hits: list[SearchHit] = search(query)
            return hits
        return self._grouped(search, query)

    def _grouped(
        self, search: Callable[[SearchQuery], list[SearchHit]], query: SearchQuery
    ) -> list[SearchHit]:
        wanted = None if query.limit is None else query.offset + query.limit
        batch = None if wanted is None else max(4 * wanted, 50)
        roots: dict[str, str] = {}
        best: dict[str, SearchHit] = {}
        position = 0
        while True:
            hits = search(attrs.evolve(query, limit=batch, offset=position))
            for hit in hits:
                root = self._root(hit.session, roots)
                best.setdefault(root, hit)
            if batch is None or len(hits) < batch or (wanted is not None and len(best) >= wanted):
                break
            position += batch
        grouped = list(best.values())
        return grouped[query.offset : wanted]

    def _root(self, record: SessionRecord, cache: dict[str, str]) -> str:
        path = [record.id]
        current = record
        while current.parent_session_id is not None and current.id not in cache:
            parent = self.backend.get_session(current.parent_session_id)
            if parent is None or parent.id in path:
                break
            path.append(parent.id)
            current = parent
        root = cache.get(current.id, current.id)
        for session_id in path:
            cache[session_id] = root
        return root

    def messages_around(self, session_id: str, message_id: int, window: int = 5) -> list[Message]:
        """Up to ``window`` active messages on each side of a message, and the message itself."""
        validate_session_id(session_id)
        anchor = self.backend.get_message(session_id, message_id)
        if anchor is None:
            raise SessionNotFoundError(
                session_id=session_id, hint=f"it has no message {message_id}"
            )
        before = self.backend.get_messages(
            session_id, before_id=message_id, limit=window, from_end=True
        )
        after = self.backend.get_messages(session_id, after_id=message_id, limit=window)
        return [*before, anchor, *after]

    def anchored_view(
        self,
        session_id: str,
        message_id: int,
        *,
        window: int = 5,
        head: int = 2,
        tail: int = 2,
    ) -> AnchoredView:
        """A search hit in context, for a model or a person to read.

        ``window`` user/assistant messages on each side of the anchor, plus the first ``head``
        messages before that window and the last ``tail`` messages after it.
        """
        validate_session_id(session_id)
        record = self.backend.get_session(session_id)
        anchor = self.backend.get_message(session_id, message_id)
        if record is None or anchor is None:
            raise SessionNotFoundError(session_id=session_id, hint=f"no message {message_id}")
        before = self._dialogue(session_id, window, before_id=message_id)
        after = self._dialogue(session_id, window, after_id=message_id)
        start = (before[0] if before else anchor).id
        end = (after[-1] if after else anchor).id
        first = self.backend.get_messages(session_id, before_id=start, limit=head) if head else []
        last = []
        if tail:
            last = self.backend.get_messages(session_id, after_id=end, limit=tail, from_end=True)
        return AnchoredView(
            session=record,
            anchor=anchor,
            before=tuple(before),
            after=tuple(after),
            head=tuple(first),
            tail=tuple(m for m in last if m not in first),
        )

    def _dialogue(
        self,
        session_id: str,
        count: int,
        *,
        before_id: int | None = None,
        after_id: int | None = None,
    ) -> list[Message]:
        """Up to ``count`` user/assistant messages on one side of an anchor, in order."""
        found: list[Message] = []
        while len(found) < count:
            page = self.backend.get_messages(
                session_id,
                before_id=before_id,
                after_id=after_id,
                limit=4 * count,
                from_end=before_id is not None,
            )
            if not page:
                break
            if before_id is not None:
                found = [m for m in page if m.role in {"user", "assistant"}] + found
                before_id = page[0].id
            else:
                found += [m for m in page if m.role in {"user", "assistant"}]
                after_id = page[-1].id
        return found[-count:] if before_id is not None else found[:count]

    # -- housekeeping ------------------------------------------------------------------------------

    def prune(
        self,
        older_than: timedelta | datetime,
        *,
        dry_run: bool = True,
        sources: Sequence[str] | None = None,
    ) -> PruneReport:
        """Delete ended sessions last active before the cutoff (a dry run unless told otherwise).

        A session a key points to is never pruned (that covers suspended and active-work keys).
        Children of a pruned session are orphaned, not deleted.
        """
        cutoff = older_than if isinstance(older_than, datetime) else self.clock.now() - older_than
        page = self.backend.list_sessions(
            SessionQuery(
                ended=True,
                active_before=cutoff,
                sources=tuple(sources) if sources is not None else None,
                limit=None,
            )
        )
        doomed: list[str] = []
        messages = 0
        size = 0
        for item in page.items:
            if self.backend.entries(session_id=item.record.id):
                continue
            transcript = self.backend.get_messages(item.record.id, include_inactive=True)
            doomed.append(item.record.id)
            messages += len(transcript)
            size += sum(_size(m) for m in transcript)
            size += len(json.dumps(serde.unstructure(item.record), ensure_ascii=False).encode())
        if not dry_run:
            for session_id in doomed:
                self.backend.delete_session(session_id)
        return PruneReport(
            dry_run=dry_run, session_ids=tuple(doomed), messages=messages, bytes=size
        )

    def erase_user(self, user_id: str) -> EraseReport:
        """Remove everything of one user (right to erasure).

        Every session the user owns is deleted with the routing keys that point at it — unless
        other people also spoke in it (a shared thread the user started): there, as in every
        other session, only the messages the user sent (``sender_id``) are deleted and the
        user's id is cleared from the record. This reads every transcript, so it is slow on
        large stores. A backend that keeps deleted text in its files until maintenance offers a
        ``scrub()`` method (SQLite does: it merges the search index and truncates the
        write-ahead log); it is called at the end, so the erased text is gone from the files.
        """
        deleted_sessions: list[str] = []
        removed_keys: list[str] = []
        deleted_messages = 0
        for item in self.backend.list_sessions(SessionQuery(limit=None)).items:
            record = item.record
            transcript = self.backend.get_messages(record.id, include_inactive=True)
            senders = {m.sender_id for m in transcript} - {None, user_id}
            if record.user_id == user_id and not senders:
                for entry in self.backend.entries(session_id=record.id):
                    self._drop_entry(entry)
                    removed_keys.append(entry.session_key)
                self.backend.delete_session(record.id)
                deleted_sessions.append(record.id)
                continue
            sent = [m.id or 0 for m in transcript if m.sender_id == user_id]
            if sent:
                deleted_messages += self.backend.delete_messages(record.id, sent)
            if record.user_id == user_id:
                self.backend.update_session(record.id, values={"user_id": None})
        scrub = getattr(self.backend, "scrub", None)  # optional: make deleted text unrecoverable
        if callable(scrub):
            scrub()
        return EraseReport(
            user_id=user_id,
            sessions=tuple(sorted(deleted_sessions)),
            messages=deleted_messages,
            entries=tuple(sorted(removed_keys)),
        )

    def _drop_entry(self, entry: SessionEntry) -> None:
        current: SessionEntry | None = entry
        while current is not None:
            try:
                self.backend.delete_entry(current.session_key, expected_revision=current.revision)
            except ConflictError:
                current = self.backend.get_entry(current.session_key)
            else:
                return

    def rebuild_index(self) -> int:
        """Recreate missing routing entries from the ``session_key`` kept on session records.

        For each key without an entry, its most recently active *open* session becomes its
        session again (a key whose sessions all ended gets a fresh one on its next message).
        Existing entries are left alone. Returns how many entries were created.
        """
        best: dict[str, SessionRecord] = {}
        for item in self.backend.list_sessions(SessionQuery(ended=False, limit=None)).items:
            record = item.record
            if record.session_key is None:
                continue
            current = best.get(record.session_key)
            if current is None or record.last_active > current.last_active:
                best[record.session_key] = record
        created = 0
        for key, record in sorted(best.items()):
            if self.backend.get_entry(key) is not None:
                continue
            source = _rebuilt_source(key, record)
            entry = _entry(key, record, source)
            try:
                self.backend.put_entry(entry, expected_revision=None)
            except ConflictError:
                continue
            created += 1
        return created


def _rebuilt_source(key: str, record: SessionRecord) -> SessionSource:
    from hermes_sessions.keys import parse_session_key  # noqa: PLC0415
    from hermes_sessions.models import SessionSource  # noqa: PLC0415

    parsed = parse_session_key(key)
    return SessionSource(
        platform=parsed.platform, chat_type=parsed.chat_type, user_id=record.user_id
    )


def _entry(key: str, record: SessionRecord, source: SessionSource) -> SessionEntry:
    from hermes_sessions.models import SessionEntry  # noqa: PLC0415

    return SessionEntry(
        session_key=key,
        session_id=record.id,
        created_at=record.started_at,
        updated_at=record.last_active,
        origin=source,
        platform=source.platform,
        chat_type=source.chat_type,
    )
