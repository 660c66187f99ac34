"""The JSONL backend's search index: every message indexed, no transcript held for it.

The first search of a process reads every session file once and indexes its messages (the
index keeps the words and each message's session and id, not the messages); transcripts come
and go in the cache's bound meanwhile. A query then reads the transcripts of the sessions its
candidate messages belong to (to apply its filters and build the hits), holding them while it
runs only. Catching up keeps the index exact: each session's indexed message ids are kept, so
a session read again, rewritten or deleted is taken out of the index without its transcript.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hermes_sessions.backends.memtables import MessageIndex

if TYPE_CHECKING:
    from collections.abc import Callable

    from hermes_sessions.backends.memtables import Transcript
    from hermes_sessions.models import Message
    from hermes_sessions.queries import SearchHit, SearchQuery

__all__ = ["SearchIndex"]


@attrs.define(eq=False)
class SearchIndex:
    """A :class:`~hermes_sessions.backends.memtables.MessageIndex` and what it holds per session."""

    _index: MessageIndex = attrs.Factory(MessageIndex)
    _ids: dict[str, set[int]] = attrs.Factory(dict)

    def add(self, message: Message) -> None:
        """Index one stored message (replacing an earlier copy)."""
        assert message.session_id is not None  # noqa: S101  # stored messages have both
        assert message.id is not None  # noqa: S101
        self._index.add(message)
        self._ids.setdefault(message.session_id, set()).add(message.id)

    def add_all(self, transcript: Transcript) -> None:
        """Index every message of a transcript."""
        for message in transcript.messages.values():
            self.add(message)

    def drop(self, session_id: str) -> None:
        """Take every message of a session out of the index."""
        for message_id in self._ids.pop(session_id, ()):
            self._index.remove(session_id, message_id)

    def search(
        self, query: SearchQuery, transcript_of: Callable[[str], Transcript]
    ) -> list[SearchHit]:
        """Run ``query``; each session a candidate belongs to is read once while it runs."""
        seen: dict[str, Transcript] = {}

        def once(session_id: str) -> Transcript:
            transcript = seen.get(session_id)
            if transcript is None:
                transcript = seen[session_id] = transcript_of(session_id)
            return transcript

        return self._index.search(query, once)
