"""Nothing of an incognito lane reaches storage (issue 23, item 1, "done when").

A realistic incognito conversation — turns, redeliveries, a title, state, usage, an edit, a recall,
undo, a branch, a compression, searches, ``/new``, refused memory and user-state writes — carries
unique markers (ASCII and Chinese). A persisted conversation runs beside it in the same store.
Afterwards every byte of every file under the home (database, write-ahead log, journal, JSONL
files, memory files) is searched for the markers, while the store is open and again after it is
closed: the incognito markers are nowhere, the persisted ones are found (so the search can see).
On PostgreSQL every row of every table of the store's schema is searched instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from store_scenarios import DM, reply, user

from hermes_sessions import (
    IncognitoLaneError,
    IncognitoPolicy,
    Message,
    SessionSource,
    SessionStore,
    StateScope,
    Usage,
    Visibility,
)
from hermes_sessions.memory import MemoryStore
from hermes_sessions.tools import SearchToolContext, handle_memory, handle_session_search
from pg_support import open_pg, requires_pg, schema_rows

if TYPE_CHECKING:
    from pathlib import Path

SECRET = SessionSource(
    platform="feishu", chat_id="ou_qzvsecretchat", user_id="ou_lin", user_name="林晓"
)
HIDDEN = ("qzvhiddenmark", "隐身密语测试", SECRET.chat_id)
"""Markers only the incognito lane ever sees (its chat id too: the key must not be stored)."""
KEPT = ("qzvkeptmark", "公开记录标记")
"""Markers of the persisted lane (they must be found, or the byte search proves nothing)."""


def _forms(marker: str) -> list[bytes]:
    """The byte forms a marker could take in a file: UTF-8, JSON-escaped, and as index tokens."""
    forms = {marker.encode(), marker.lower().encode(), json.dumps(marker).strip('"').encode()}
    if not marker.isascii():
        forms |= {marker[i : i + 2].encode() for i in range(len(marker) - 1)}
    return sorted(forms)


def _policy() -> IncognitoPolicy:
    return IncognitoPolicy(match=lambda source: source.chat_id == SECRET.chat_id)


def _converse(store: SessionStore, memory: MemoryStore) -> None:
    """An incognito conversation that touches every kind of write, and a persisted one beside it."""
    ascii_mark, cjk_mark, _chat = HIDDEN
    public = store.get_or_create(DM).session_id
    store.append(public, user(f"{KEPT[0]} {KEPT[1]}"), reply("记下了"))
    key = store.key_for(SECRET)
    session_id = store.get_or_create(SECRET).session_id
    for turn in range(3):
        first = user(
            f"第{turn}轮 {cjk_mark} {ascii_mark} {turn}",
            platform_message_id=f"{ascii_mark}-{turn}",
            sender_name=cjk_mark,
        )
        store.append(
            session_id,
            first,
            reply(f"好的 {cjk_mark} {ascii_mark}"),
            usage=Usage(input=12, output=7),
            state_delta={StateScope.session(session_id): {"note": f"{cjk_mark} {ascii_mark}"}},
        )
        store.append(session_id, first)  # a redelivery
    store.update_state({StateScope.lane(key): {"topic": f"{ascii_mark} {cjk_mark}"}})
    store.set_title(session_id, f"{cjk_mark} {ascii_mark}")
    store.edit(session_id, f"{ascii_mark}-0", f"edited {ascii_mark} {cjk_mark}")
    store.retract(session_id, f"{ascii_mark}-1")
    store.restore(session_id, store.undo(session_id))
    assert store.search(ascii_mark, session_key=key)
    assert store.search(cjk_mark, visible_to=Visibility.for_requester(key, SECRET))
    assert store.search(ascii_mark) == []
    context = SearchToolContext(store=store, requester=DM, current_key=store.key_for(DM))
    assert handle_session_search(context, {"query": ascii_mark})["results"] == []
    call = {"action": "add", "target": "user", "content": f"{ascii_mark} {cjk_mark}"}
    assert handle_memory(memory, call, sessions=store, current_key=key)["code"] == "incognito"
    with pytest.raises(IncognitoLaneError):
        store.update_state(
            {StateScope.user("main", "feishu", "ou_lin"): {"x": ascii_mark}}, session_id=session_id
        )
    branch = store.branch(key, title=f"{ascii_mark} branch")
    summary = [Message(role="system", content=f"Summary {cjk_mark} {ascii_mark}")]
    tip = store.compress(branch.session_id, summary, holder=ascii_mark)
    store.append(tip.id, user(f"after {ascii_mark} {cjk_mark}"), reply(cjk_mark))
    store.reset(key, title=f"{cjk_mark} again")
    store.append(store.entry(key).session_id, user(f"{ascii_mark} {cjk_mark} last"))
    assert handle_memory(memory, {**call, "content": KEPT[0]}, sessions=store, current_key=None)[
        "success"
    ]


def _files_holding(home: Path, markers: tuple[str, ...]) -> dict[str, list[str]]:
    """Each marker found in some file under ``home``, with the files that hold it."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for marker in markers:
            if any(form in data for form in _forms(marker)):
                found.setdefault(marker, []).append(str(path.relative_to(home)))
    return found


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_no_incognito_byte_reaches_the_files(tmp_path, kind):
    """Open or closed, no file under the home holds an incognito marker; the persisted ones do."""
    home = tmp_path / "home"
    store = SessionStore.open(home, kind, incognito=_policy())  # type: ignore[arg-type]
    _converse(store, MemoryStore(home / "memories"))
    assert _files_holding(home, HIDDEN) == {}  # with the write-ahead log / journal as it is
    store.close()
    assert _files_holding(home, HIDDEN) == {}
    assert set(_files_holding(home, KEPT)) == set(KEPT)


@requires_pg
def test_no_incognito_row_reaches_postgres(tmp_path):
    """No row of any table of the store's schema holds an incognito marker; persisted ones do."""
    with SessionStore(open_pg(tmp_path), incognito=_policy()) as store:
        _converse(store, MemoryStore(tmp_path / "memories"))
    rows = schema_rows(tmp_path)
    assert rows
    texts = [row.casefold() for table in rows.values() for row in table]
    found = {marker for marker in (*HIDDEN, *KEPT) if any(marker.casefold() in t for t in texts)}
    assert found == set(KEPT)
