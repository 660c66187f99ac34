"""The context window: the newest messages that fit a budget, cut only between whole turns.

A *turn* starts at a user message and runs until the next one: the user's words, the assistant's
tool calls, their results and the final reply. Cutting only at turn starts means a window never
begins with a tool result, never keeps an assistant's tool call without its results, and never
separates a user message from its reply: the orderings the OpenAI and Anthropic APIs insist on.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import TYPE_CHECKING, Final

import attrs

from hermes_sessions.exceptions import InvalidArgumentError
from hermes_sessions.models import Message

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "REACTIONS",
    "ContextWindow",
    "context_window",
    "estimate_tokens",
    "reactions_of",
    "with_reactions",
]

REACTIONS: Final = "reactions"
"""The ``Message.extra`` key where reactions to a message are kept (never a turn of their own).

Its value maps each reaction (an emoji, or the platform's name such as Slack's ``:tada:``) to
the ids of who reacted with it, sorted.

.. versionadded:: 0.1.0
"""

PINNED_ROLES: Final = frozenset({"system", "developer"})
"""Roles kept at the start of the window with ``keep_system=True``."""

MESSAGE_OVERHEAD: Final = 4
"""Tokens :func:`estimate_tokens` adds per message for the role and the framing."""

PART_TOKENS: Final = 256
"""Tokens :func:`estimate_tokens` counts for a non-text content part (image, audio, file)."""

_LATIN_CHARACTERS_PER_TOKEN: Final = 4


# Han (with extensions and compatibility ideographs), kana, Hangul, full-width forms and the CJK
# punctuation block: one character of these is about one token for today's tokenizers. Compiled
# on first use (compiling it costs about as much as a turn): a store's first turn does not count.
@functools.cache
def _cjk() -> re.Pattern[str]:
    return re.compile(
        "[\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
        "\uac00-\ud7ff\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
    )


def _text_tokens(text: str) -> int:
    cjk = len(_cjk().findall(text))
    return cjk + math.ceil((len(text) - cjk) / _LATIN_CHARACTERS_PER_TOKEN)


def estimate_tokens(message: Message) -> int:
    """Estimate the tokens ``message`` costs in a prompt, without a tokenizer.

    The heuristic: one token per CJK character (Han, kana, Hangul, full-width forms), one per
    four other characters, rounded up; text parts count by their ``text``, every other content
    part (an image, audio, a file) as :data:`PART_TOKENS`; tool calls count by their JSON text;
    plus :data:`MESSAGE_OVERHEAD` per message. Reasoning is not counted (vendors do not bill
    earlier turns' reasoning as input). Pass your tokenizer as ``count_tokens`` to be exact.

    >>> estimate_tokens(Message(role="user", content="hello world"))
    7
    >>> estimate_tokens(Message(role="user", content="你好世界"))
    8

    .. versionadded:: 0.1.0
    """
    total = MESSAGE_OVERHEAD
    content = message.content
    if isinstance(content, str):
        total += _text_tokens(content)
    elif content is not None:
        for part in content:
            text = part.get("text")
            total += _text_tokens(text) if isinstance(text, str) else PART_TOKENS
    if message.tool_calls:
        total += _text_tokens(json.dumps(message.tool_calls, ensure_ascii=False))
    return total


def reactions_of(message: Message) -> dict[str, tuple[str, ...]]:
    """The reactions kept on ``message``: each reaction and who reacted with it.

    >>> reactions_of(Message(role="assistant", content="done", extra={"reactions": {"👍": ["42"]}}))
    {'👍': ('42',)}

    .. versionadded:: 0.1.0
    """
    kept = message.extra.get(REACTIONS)
    if not isinstance(kept, dict):
        return {}
    return {
        str(emoji): tuple(str(who) for who in people)
        for emoji, people in kept.items()
        if isinstance(people, list) and people
    }


def with_reactions(message: Message, *, template: str = " [reactions: {summary}]") -> Message:
    """``message`` with a compact line of its reactions after its text, for the model to see.

    Each reaction is followed by how many reacted with it when more than one did
    (``👍 3, 🎉``). A message without reactions is returned as it is; multimodal content gets
    the line as a text part of its own. The stored message is not changed.

    >>> liked = Message(
    ...     role="assistant", content="deployed", extra={"reactions": {"👍": ["1", "2"]}}
    ... )
    >>> with_reactions(liked).content
    'deployed [reactions: 👍 2]'

    .. versionadded:: 0.1.0
    """
    reactions = reactions_of(message)
    if not reactions:
        return message
    summary = ", ".join(
        emoji if len(people) == 1 else f"{emoji} {len(people)}"
        for emoji, people in reactions.items()
    )
    line = template.format(summary=summary)
    content = message.content
    if content is None or isinstance(content, str):
        return attrs.evolve(message, content=(content or "") + line if content else line.strip())
    return attrs.evolve(message, content=[*content, {"type": "text", "text": line.strip()}])


@attrs.frozen(kw_only=True)
class ContextWindow:
    """The messages a turn sends to the model, and what was left out to fit.

    .. versionadded:: 0.1.0
    """

    messages: tuple[Message, ...]
    """Pinned system messages (with ``keep_system``), then the newest whole turns, in order."""
    omitted: int
    """How many messages were left out (all older than the first kept one)."""
    first_kept_id: int | None
    """Id of the oldest kept message after the pinned ones (``None`` if none or unstored)."""
    tokens: int
    """The kept messages' tokens, as ``count_tokens`` counted them."""
    overflow: bool
    """The budget is too small: the newest turn did not fit (the window holds only the pinned
    messages), or the pinned messages alone pass it (they are kept all the same).

    A host should compress the session (or raise its budget) before calling the model."""

    @property
    def truncated(self) -> bool:
        """Whether anything was left out (a hint to compress soon)."""
        return self.omitted > 0


def _positive(name: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidArgumentError(
            f"{name} must be a positive int or None (no limit), got {value!r}"
        )


def _turn_starts(body: Sequence[Message]) -> list[int]:
    """Indexes where the body may be cut: user messages, and the start unless it is a result."""
    starts = [index for index, message in enumerate(body) if message.role == "user"]
    if body and body[0].role != "tool" and (not starts or starts[0] != 0):
        starts.insert(0, 0)
    return starts


def context_window(
    messages: Sequence[Message],
    *,
    max_messages: int | None = None,
    max_tokens: int | None = None,
    count_tokens: Callable[[Message], int] | None = None,
    keep_system: bool = True,
    show_reactions: bool = False,
) -> ContextWindow:
    """Pick the newest messages of a transcript that fit, aligned to whole turns.

    ``messages`` are a session's active messages in order (``store.messages(session_id)`` or a
    generous ``store.tail(...)``). With ``keep_system`` the leading ``system``/``developer``
    messages are always kept and count against the budget. The rest is cut at the start of the
    oldest turn such that everything from there on fits within ``max_messages`` and
    ``max_tokens`` (``None``: no limit). Messages are counted with ``count_tokens`` (default
    :func:`estimate_tokens`). If a transcript holds messages before its first user message
    (a greeting), they form a turn of their own, unless they start with a tool result. With
    ``show_reactions`` every message is given as :func:`with_reactions` renders it (and counted
    that way): reactions show as a short line on the message they target, never as turns.

    >>> turns = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    >>> window = context_window(turns * 3, max_messages=3)
    >>> len(window.messages), window.omitted
    (2, 4)

    .. versionadded:: 0.1.0
    """
    _positive("max_messages", max_messages)
    _positive("max_tokens", max_tokens)
    count = estimate_tokens if count_tokens is None else count_tokens
    if show_reactions:
        messages = [with_reactions(message) for message in messages]
    pinned_count = 0
    if keep_system:
        while pinned_count < len(messages) and messages[pinned_count].role in PINNED_ROLES:
            pinned_count += 1
    pinned, body = list(messages[:pinned_count]), list(messages[pinned_count:])
    pinned_tokens = sum(count(message) for message in pinned)
    costs = [count(message) for message in body]
    suffix_tokens = [0] * (len(body) + 1)
    for index in range(len(body) - 1, -1, -1):
        suffix_tokens[index] = suffix_tokens[index + 1] + costs[index]
    start = len(body)
    for candidate in _turn_starts(body):
        kept = len(body) - candidate
        if max_messages is not None and pinned_count + kept > max_messages:
            continue
        if max_tokens is not None and pinned_tokens + suffix_tokens[candidate] > max_tokens:
            continue
        start = candidate
        break
    kept_body = body[start:]
    pinned_too_large = (max_messages is not None and pinned_count > max_messages) or (
        max_tokens is not None and pinned_tokens > max_tokens
    )
    return ContextWindow(
        messages=(*pinned, *kept_body),
        omitted=start,
        first_kept_id=kept_body[0].id if kept_body else None,
        tokens=pinned_tokens + suffix_tokens[start],
        overflow=pinned_too_large or (bool(body) and not kept_body),
    )
