"""Every field of every recorded payload, deleted or retyped: the adapters refuse, never guess.

A mutated payload gives :class:`AdapterPayloadError` (naming the platform and a field), or
routes exactly like the intact payload, or — for a field the platform may leave out — like the
payload without that field. Never a raw ``KeyError`` / ``TypeError`` / ``AttributeError``, never
a DM key for a group's message, and a field the platform always sends is never silently missed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hermes_sessions import AdapterPayloadError, build_session_key
from hermes_sessions.adapters import dingtalk, discord, feishu, slack, telegram

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

PAYLOADS = Path(__file__).parent / "payloads"

Path_ = tuple[str | int, ...]

CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "telegram": lambda p: telegram.convert(p, bot_username="hermes_bot"),
    "slack": lambda p: slack.convert(p, bot_user_id="UBOT"),
    "feishu": lambda p: feishu.convert(p, bot_open_id="ou_bot"),
    "discord": lambda p: discord.convert(p, bot_user_id="1180000000000000555"),
    "dingtalk": dingtalk.convert,
}
_TELEGRAM_MESSAGES = (
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
    "business_message",
)


def _telegram_required(payload: dict[str, Any]) -> set[Path_]:
    if "message_reaction" in payload:
        fields = {("message_reaction", "chat"), ("message_reaction", "message_id")}
        fields |= {("message_reaction", "chat", "id"), ("message_reaction", "chat", "type")}
        return {("message_reaction",), *fields}
    name = next(k for k in _TELEGRAM_MESSAGES if k in payload)
    message = payload[name]
    required: set[Path_] = {("update_id",), (name,), (name, "message_id"), (name, "chat")}
    required |= {(name, "chat", "id"), (name, "chat", "type")}
    if message["chat"]["type"] != "channel":
        required |= {(name, "from"), (name, "from", "id")}
    return required


def _slack_required(payload: dict[str, Any]) -> set[Path_]:
    event = payload.get("event", payload)
    lead: Path_ = ("event",) if "event" in payload else ()
    required: set[Path_] = {(*lead, "type"), (*lead, "channel")}
    if lead:
        required.add(lead)
    subtype = event.get("subtype")
    if event.get("type") in {"reaction_added", "reaction_removed"}:
        item = (*lead, "item")
        required = {(*lead, "type"), (*lead, "user"), (*lead, "reaction"), item}
        return required | {(*item, "type"), (*item, "channel"), (*item, "ts"), lead}
    if subtype == "message_changed":
        required |= {(*lead, "message"), (*lead, "message", "ts"), (*lead, "message", "user")}
    elif subtype == "message_deleted":
        required |= {(*lead, "deleted_ts"), (*lead, "previous_message")}
        required.add((*lead, "previous_message", "user"))
    elif event.get("type") in {"message", "app_mention"} and subtype is None:
        required |= {(*lead, "ts"), (*lead, "user")}
    return required


def _feishu_required(payload: dict[str, Any]) -> set[Path_]:
    lead: Path_ = ("event",) if "event" in payload else ()
    required: set[Path_] = {lead} if lead else set()
    message = (*lead, "message")
    required |= {message, (*message, "message_id"), (*message, "chat_id")}
    required |= {(*message, "chat_type"), (*message, "message_type")}
    sender = (*lead, "sender")
    required |= {sender, (*sender, "sender_id"), (*sender, "sender_id", "open_id")}
    return required


def _discord_required(payload: dict[str, Any]) -> set[Path_]:
    required: set[Path_] = {("id",), ("author",), ("author", "id")}
    if "channel_id" not in payload:
        required |= {("channel",), ("channel", "id")}
    elif "channel" not in payload:
        required.add(("channel_id",))
    return required


def _dingtalk_required(payload: dict[str, Any]) -> set[Path_]:
    fields = ("msgId", "conversationId", "conversationType", "senderId", "msgtype")
    return {(name,) for name in fields}


REQUIRED: dict[str, Callable[[dict[str, Any]], set[Path_]]] = {
    "telegram": _telegram_required,
    "slack": _slack_required,
    "feishu": _feishu_required,
    "discord": _discord_required,
    "dingtalk": _dingtalk_required,
}


def _payload_files() -> list[tuple[str, str]]:
    return sorted(
        (path.name.split("_", 1)[0], path.stem)
        for path in PAYLOADS.glob("*.json")
        if path.name.split("_", 1)[0] in CONVERTERS
    )


def _walk(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for name, child in items:
        yield (*path, name), child
        if isinstance(child, dict | list) and child:
            yield from _walk(child, (*path, name))


def _retypes(value: Any) -> list[Any]:
    """Values of another JSON type; between numbers and strings, the same number if it is one.

    An id written as a number or as its decimal string is the same id (discord.py gives
    integers where the gateway sends strings); a ``null`` gets only types no field has for it.
    """
    out: list[Any] = []
    if not isinstance(value, dict):
        out.append({"x": 1})
    if not isinstance(value, list):
        out.append([1])
    if not isinstance(value, bool):
        out.append(True)
    if isinstance(value, int) and not isinstance(value, bool):
        out.append(str(value))
    elif isinstance(value, str):
        out.append(int(value) if value.lstrip("-").isdigit() else 7)
    elif value is not None:
        out.append("7")
    return out


def _deleted(payload: Any, path: Path_) -> Any:
    mutated = copy.deepcopy(payload)
    parent = mutated
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return mutated


def _replaced(payload: Any, path: Path_, value: Any) -> Any:
    mutated = copy.deepcopy(payload)
    parent = mutated
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return mutated


def _routing(result: Any) -> tuple[Any, ...] | None:
    """What decides where an event goes: its kind, key, platform id and sender."""
    if result is None:
        return None
    pmid = getattr(result, "platform_message_id", None)
    if pmid is None and hasattr(result, "message"):
        pmid = result.message.platform_message_id
    source = result.source
    return (type(result).__name__, build_session_key(source), pmid, source.participant)


def _outcome(convert: Callable[[Any], Any], payload: Any) -> tuple[str, Any]:
    try:
        result = convert(payload)
    except AdapterPayloadError as error:
        return "refused", error
    except Exception as error:  # noqa: BLE001  # the point: any raw error is a failure
        return "raw", error
    return "converted", result


@pytest.mark.parametrize(("platform", "name"), _payload_files())
def test_every_field_deleted_or_retyped_is_refused_or_routed_as_the_platform_means(platform, name):
    """No mutation of a recorded payload raises a raw error, guesses a DM, or misses a field."""
    payload = json.loads((PAYLOADS / f"{name}.json").read_text(encoding="utf-8"))
    convert = CONVERTERS[platform]
    intact = convert(payload)
    required = REQUIRED[platform](payload) if intact is not None else set()
    failures: list[str] = []
    fields = list(_walk(payload))
    for path, value in fields:
        _mutate(convert, payload, path, value, intact, path in required, failures)
    assert len(fields) > 10
    assert not failures, "\n".join(failures)


def _mutate(
    convert: Callable[[Any], Any],
    payload: Any,
    path: Path_,
    value: Any,
    intact: Any,
    required: bool,
    failures: list[str],
) -> None:
    """Delete the field at ``path``, then retype it; record what breaks the rules."""
    dotted = ".".join(map(str, path))
    kind, deleted = _outcome(convert, _deleted(payload, path))
    if kind == "raw":
        failures.append(f"{dotted} deleted: raw {type(deleted).__name__}: {deleted}")
    elif kind == "refused":
        _check_refusal(deleted, failures)
    else:
        _check_no_dm_for_a_group(intact, deleted, f"{dotted} deleted", failures)
    if required and kind != "refused":
        failures.append(f"{dotted} deleted: {_routing(deleted)} instead of a refusal")
    allowed = {_routing(intact)} | ({_routing(deleted)} if kind == "converted" else set())
    for retyped in _retypes(value):
        what = f"{dotted} = {retyped!r}"
        rkind, result = _outcome(convert, _replaced(payload, path, retyped))
        if rkind == "raw":
            failures.append(f"{what}: raw {type(result).__name__}: {result}")
        elif rkind == "refused":
            _check_refusal(result, failures)
        elif _routing(result) not in allowed:
            failures.append(f"{what}: routed as {_routing(result)}")
        else:
            _check_no_dm_for_a_group(intact, result, what, failures)


def _check_no_dm_for_a_group(intact: Any, result: Any, what: str, failures: list[str]) -> None:
    if intact is None or result is None or intact.source.chat_type == "dm":
        return
    if result.source.chat_type == "dm":
        failures.append(f"{what}: a group's message got the DM key {_routing(result)}")


def _check_refusal(error: AdapterPayloadError, failures: list[str]) -> None:
    platform = error.platform
    if platform not in CONVERTERS or not error.field or f"{platform} event: " not in str(error):
        failures.append(f"a refusal that does not name the platform and a field: {error!r}")


# -- interactions ----------------------------------------------------------------------------------

INTERACTIONS = PAYLOADS / "interactions"
SOURCES: dict[str, Callable[[Any], Any]] = {
    "telegram": telegram.interaction_source,
    "slack": slack.interaction_source,
    "feishu": lambda p: feishu.interaction_source(p, chat_type="group"),
}


def _interaction_required(platform: str, payload: dict[str, Any]) -> set[Path_]:
    if platform == "telegram":
        query = ("callback_query",)
        required = {query, (*query, "from"), (*query, "from", "id")}
        if "message" in payload["callback_query"]:
            message = (*query, "message")
            required |= {message, (*message, "chat"), (*message, "chat", "id")}
            required.add((*message, "chat", "type"))
        return required
    if platform == "slack":
        return {("type",), ("user",), ("user", "id")}
    return {
        ("event",),
        ("event", "operator"),
        ("event", "operator", "open_id"),
        ("event", "context"),
    }


def _lane(result: Any) -> tuple[Any, ...] | None:
    return None if result is None else (build_session_key(result), result.participant)


@pytest.mark.parametrize(
    ("platform", "name"),
    sorted((p.name.split("_", 1)[0], p.stem) for p in INTERACTIONS.glob("*.json")),
)
def test_every_field_of_an_interaction_deleted_or_retyped_is_refused_or_keyed_right(platform, name):
    """Interactions follow the same rules: a refusal, or the presser's lane as the platform says."""
    payload = json.loads((INTERACTIONS / f"{name}.json").read_text(encoding="utf-8"))
    source_of = SOURCES[platform]
    intact = source_of(payload)
    required = _interaction_required(platform, payload) if intact is not None else set()
    failures: list[str] = []
    for path, value in _walk(payload):
        dotted = ".".join(map(str, path))
        kind, deleted = _outcome(source_of, _deleted(payload, path))
        if kind == "raw" or (path in required and kind != "refused"):
            failures.append(f"{dotted} deleted: {kind} {deleted!r}")
        allowed = {_lane(intact)} | ({_lane(deleted)} if kind == "converted" else set())
        for retyped in _retypes(value):
            rkind, result = _outcome(source_of, _replaced(payload, path, retyped))
            if rkind == "raw" or (rkind == "converted" and _lane(result) not in allowed):
                failures.append(f"{dotted} = {retyped!r}: {rkind} {result!r}")
    assert not failures, "\n".join(failures)
