"""How messages and session records look to a model in ``session_search`` results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from hermes_sessions.models import Message, SessionRecord

__all__ = ["message_view", "session_view", "text_of"]

_MAX_CONTENT: Final = 2000
"""Characters of one message's text shown to the model (longer text is cut with an ellipsis)."""


def text_of(message: Message) -> str:
    content = message.content
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part.get("text"), str):
                pieces.append(part["text"])
            else:
                pieces.append(f"[{part.get('type', 'attachment')}]")
        text = " ".join(pieces)
    else:
        text = ""
    return text if len(text) <= _MAX_CONTENT else text[: _MAX_CONTENT - 1] + "…"


def message_view(message: Message) -> dict[str, Any]:
    view: dict[str, Any] = {
        "message_id": message.id,
        "role": message.role,
        "content": text_of(message),
    }
    if message.timestamp is not None:
        view["timestamp"] = message.timestamp.isoformat()
    sender = message.sender_name or message.sender_id
    if sender:
        view["sender"] = sender
    if message.tool_calls:
        view["tool_calls"] = [
            str((call.get("function") or {}).get("name") or call.get("name") or "?")
            for call in message.tool_calls
        ]
    if message.tool_name:
        view["tool_name"] = message.tool_name
    return view


def session_view(record: SessionRecord, preview: str | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "session_id": record.id,
        "title": record.title,
        "source": record.source,
        "started_at": record.started_at.isoformat(),
        "last_active": record.last_active.isoformat(),
        "message_count": record.message_count,
    }
    if record.is_ended:
        view["ended"] = record.end_reason
    if preview is not None:
        view["preview"] = preview
    return view
