"""The re-index loop of the backends that store tokens: batches until current, with progress.

A backend implements :class:`~hermes_sessions.protocols.SupportsReindex` with two pieces of its
own — where the store stands (``counts``) and one batch, a transaction of its own that returns
how many messages it rewrote and 0 once the index is current — and runs them with
:func:`run_reindex`, so that every backend checks ``batch_size`` and reports progress the same
way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.protocols import ReindexProgress

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["check_batch_size", "run_reindex"]


def check_batch_size(batch_size: object) -> int:
    """Return ``batch_size`` if it is an ``int`` of at least 1; raise otherwise.

    Raises:
        TypeError: if it is not an ``int`` (``bool`` included).
        ValueError: if it is less than 1.

    .. versionadded:: 0.1.0
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be at least 1, got {batch_size}")
    return batch_size


def run_reindex(
    batch: Callable[[], int],
    counts: Callable[[], tuple[int, int]],
    progress: Callable[[ReindexProgress], None] | None,
) -> int:
    """Run ``batch`` until it returns 0; report after each batch and at the end.

    ``counts`` gives ``(done, total)`` before the first batch. Returns how many messages the
    batches rewrote.

    .. versionadded:: 0.1.0
    """
    done, total = counts()
    rewritten = 0
    while count := batch():
        rewritten += count
        done += count
        total = max(total, done)  # messages that arrived meanwhile
        if progress is not None:
            progress(ReindexProgress(done=done, total=total))
    if progress is not None:
        final = max(done, total)
        progress(ReindexProgress(done=final, total=final))
    return rewritten
