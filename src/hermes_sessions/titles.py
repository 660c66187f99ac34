"""Session titles: sanitising user input and numbering a lineage (``X``, ``X #2``, ``X #3``).

Titles come from users and models, so they are cleaned before they are stored or compared:
control characters go (tab, CR and LF become spaces), zero-width and bidi controls go, runs of
whitespace collapse, and what is left must fit in 100 characters. Titles are compared after NFC
normalisation and case folding (:func:`title_key`), so ``Café`` and ``CAFÉ`` clash.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Final

from hermes_sessions.exceptions import InvalidTitleError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hermes_sessions.models import SessionRecord

__all__ = [
    "MAX_TITLE_LENGTH",
    "lineage_key",
    "next_title_in_lineage",
    "sanitize_title",
    "title_holder",
    "title_key",
    "title_owner",
]

MAX_TITLE_LENGTH: Final = 100
"""The longest title, in characters after cleaning; longer ones raise ``InvalidTitleError``.

.. versionadded:: 0.1.0
"""

_SPACE_CONTROLS: Final = dict.fromkeys(map(ord, "\t\r\n\v\f"), " ")
_INVISIBLE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0 and C1 controls (tab/CR/LF were turned into spaces first)
    "\u200b-\u200f"  # zero-width space/joiners, LRM/RLM
    "\u2028-\u202e"  # line/paragraph separators, bidi embeddings and overrides
    "\u2060-\u2069"  # word joiner, invisible operators, bidi isolates
    "\ufeff"  # zero-width no-break space / BOM
    "\ufff9-\ufffb\ufffc"  # interlinear annotation controls, object replacement character
    "]"
)
_LINEAGE_SUFFIX: Final = re.compile(r"^(?P<base>.*?) #(?P<number>[0-9]+)$", re.DOTALL)


def sanitize_title(title: str | None) -> str | None:
    r"""Clean a user-supplied title; return ``None`` when nothing is left.

    Raises:
        InvalidTitleError: if the cleaned title is longer than 100 characters (a ``ValueError``).

    >>> sanitize_title("  my\tproject\u200b  ")
    'my project'

    .. versionadded:: 0.1.0
    """
    if title is None:
        return None
    if not isinstance(title, str):
        raise TypeError(f"a title must be a str, got {type(title).__name__}")
    cleaned = " ".join(_INVISIBLE.sub("", title.translate(_SPACE_CONTROLS)).split())
    if not cleaned:
        return None
    if len(cleaned) > MAX_TITLE_LENGTH:
        raise InvalidTitleError(
            cleaned,
            f"it is {len(cleaned)} characters long after cleaning; the limit is {MAX_TITLE_LENGTH}",
        )
    return cleaned


def title_key(title: str) -> str:
    """The form titles are compared in: NFC-normalised and case-folded.

    .. versionadded:: 0.1.0
    """
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", title).casefold())


def _split_lineage(title: str) -> tuple[str, int | None]:
    match = _LINEAGE_SUFFIX.match(title)
    if match is None:
        return title, None
    return match["base"], int(match["number"])


def lineage_key(title: str) -> str:
    """The comparison form of a title's lineage: ``X``, ``x #2`` and ``X #17`` share one.

    >>> lineage_key("My Project #3") == lineage_key("my project")
    True

    .. versionadded:: 0.1.0
    """
    return title_key(_split_lineage(title)[0])


def next_title_in_lineage(title: str, existing_titles: Iterable[str]) -> str:
    """Return the next free title in ``title``'s lineage.

    A ``#N`` suffix on ``title`` is stripped first. If the base is not taken it is returned as
    is; otherwise the result is ``base #(max+1)``, where max is the highest number in use (the
    bare base counting as 1). Comparison uses :func:`title_key`; wildcard characters such as
    ``%`` and ``_`` are plain text.

    >>> next_title_in_lineage("my project", {"my project"})
    'my project #2'
    >>> next_title_in_lineage("my project #2", {"my project", "my project #2", "My Project #5"})
    'my project #6'

    .. versionadded:: 0.1.0
    """
    base, _ = _split_lineage(title)
    base_key = title_key(base)
    highest = 0
    for existing in existing_titles:
        existing_base, number = _split_lineage(existing)
        if title_key(existing_base) != base_key:
            continue
        highest = max(highest, 1 if number is None else number)
    return base if highest == 0 else f"{base} #{highest + 1}"


def title_owner(record: SessionRecord) -> tuple[str, ...]:
    """Who owns a session's title: its platform and user, else its creating key, else platform.

    A title is unique per owner (compared by :func:`title_key`).

    .. versionadded:: 0.1.0
    """
    if record.user_id:
        return ("user", record.source, record.user_id)
    if record.session_key:
        return ("key", record.session_key)
    return ("source", record.source)


def title_holder(record: SessionRecord, others: Iterable[SessionRecord]) -> str | None:
    """The id of another session of ``record``'s owner with ``record``'s title, if any.

    Backends call it inside the write that gives ``record`` its title, so two writers can never
    both store one title for one owner.

    .. versionadded:: 0.1.0
    """
    if record.title is None:
        return None
    wanted = title_key(record.title)
    owner = title_owner(record)
    for other in others:
        if (
            other.id != record.id
            and other.title is not None
            and title_key(other.title) == wanted
            and title_owner(other) == owner
        ):
            return other.id
    return None
