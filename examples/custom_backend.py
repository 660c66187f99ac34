"""A custom backend written only against ``hermes_sessions.protocols``.

The one idea: anything that satisfies the ``Backend`` protocol can carry a ``SessionStore``.
``CountingBackend`` wraps any other backend and counts the writes that reach it (a metrics
layer a host might add); it passes the public conformance suite, which
``tests/test_examples.py`` runs on it with ``hermes_sessions.testing.BackendContract``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Self

from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.protocols import Backend

WRITES = frozenset({
    "put_entry", "delete_entry", "record_activity", "create_session", "update_session",
    "end_session", "reopen_session", "delete_session", "append_messages", "replace_message",
    "replace_messages", "set_active", "delete_messages", "apply",
})  # fmt: skip


class CountingBackend:
    """A ``Backend`` that forwards every call to ``inner`` and counts the write methods."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.writes: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        """Forward ``name`` to the wrapped backend, counting the call if it writes."""
        target = getattr(self.inner, name)
        if name not in WRITES:
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.writes[name] += 1
            return target(*args, **kwargs)

        return counted

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.inner.close()


def main() -> None:
    """Run one turn of a store on a counting backend and print what reached storage."""
    backend = CountingBackend(SessionStore.open(backend="memory").backend)
    print(f"satisfies Backend: {isinstance(backend, Backend)}")
    with SessionStore(backend) as store:  # type: ignore[arg-type]  # forwarded via __getattr__
        lookup = store.get_or_create(SessionSource(platform="cli", chat_id="demo"))
        store.append(lookup.session_id, Message(role="user", content="hello"))
        print(f"writes: {dict(sorted(backend.writes.items()))}")


if __name__ == "__main__":
    main()
