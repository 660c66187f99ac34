"""SessionStore reading views: listing, lineage, search and messages in context."""

from __future__ import annotations

import attrs
import pytest

from hermes_sessions import Message, SearchQuery, SessionNotFoundError, SessionSource

LIN = SessionSource(platform="feishu", chat_id="ou_lin", user_id="ou_lin")
EVE = SessionSource(platform="feishu", chat_id="ou_eve", user_id="ou_eve")
THREAD = SessionSource(
    platform="feishu", chat_type="thread", chat_id="oc_team", thread_id="t1", user_id="ou_lin"
)


def user(text: str, **fields: object) -> Message:
    """A user message."""
    return Message(role="user", content=text, **fields)  # type: ignore[arg-type]


def reply(text: str) -> Message:
    """An assistant message."""
    return Message(role="assistant", content=text)


# -- listing and lineage ---------------------------------------------------------------------------


def test_listing_shows_a_compressed_chain_as_its_tip(store, clock):
    """Sessions compressed away are hidden unless asked for; their tip is listed."""
    first = store.get_or_create(LIN)
    store.append(first.session_id, user("开始讨论部署方案"))
    clock.advance(minutes=5)
    tip = store.compress(first.session_id, [user("summary")], holder="w")
    listed = [item.record.id for item in store.list_sessions().items]
    assert listed == [tip.id]
    everything = store.list_sessions(include_compressed=True)
    assert {item.record.id for item in everything.items} == {first.session_id, tip.id}
    assert store.list_sessions(include_compressed=True).items[1].preview == "开始讨论部署方案"


def test_listing_filters_and_pages(store, clock):
    """Keyword filters reach the backend, and cursors page through the rest."""
    for n in range(5):
        clock.advance(minutes=1)
        store.reset(store.get_or_create(LIN).entry.session_key, title=f"t{n}")
    page = store.list_sessions(limit=2, user_id="ou_lin")
    assert len(page.items) == 2
    assert page.next_cursor is not None
    rest = store.list_sessions(limit=10, user_id="ou_lin", cursor=page.next_cursor)
    assert len(rest.items) == 4
    assert store.list_sessions(user_id="ou_eve").items == ()


def test_lineage_links_compression_and_branches(store, clock):
    """Lineage lists root first with the relation of each link, and finds the tip."""
    first = store.get_or_create(LIN)
    key = first.entry.session_key
    store.set_title(first.session_id, "plan")
    clock.advance(minutes=1)
    compressed = store.compress(first.session_id, [user("summary")], holder="w")
    clock.advance(minutes=1)
    branched = store.branch(key)
    lineage = store.lineage(branched.session_id)
    relations = [(link.record.id, link.relation, link.depth) for link in lineage.links]
    assert relations == [
        (first.session_id, "root", 0),
        (compressed.id, "compression", 1),
        (branched.session_id, "branch", 2),
    ]
    assert lineage.root.id == first.session_id
    assert store.lineage(first.session_id).tip.id == compressed.id
    with pytest.raises(SessionNotFoundError):
        store.lineage("unknown")


# -- search ----------------------------------------------------------------------------------------


def test_search_with_filters_as_keywords(store):
    """Search takes the query text and SearchQuery fields as keywords, or a SearchQuery."""
    lin = store.get_or_create(LIN).session_id
    eve = store.get_or_create(EVE).session_id
    store.append(lin, user("飞书机器人接入"))
    store.append(eve, user("飞书文档"))
    assert {h.session.id for h in store.search("飞书")} == {lin, eve}
    assert [h.session.id for h in store.search("飞书", user_id="ou_eve")] == [eve]
    assert [h.session.id for h in store.search(SearchQuery(text="机器人"))] == [lin]
    assert store.search("书") != []


def test_search_grouped_by_lineage(store, clock):
    """group="lineage" keeps the best hit per conversation, compressed or not."""
    first = store.get_or_create(LIN)
    store.append(first.session_id, user("kubernetes upgrade plan"), reply("kubernetes steps"))
    clock.advance(minutes=1)
    tip = store.compress(first.session_id, [user("kubernetes summary")], holder="w")
    other = store.get_or_create(EVE).session_id
    store.append(other, user("kubernetes question"))
    plain = store.search("kubernetes", limit=None)
    grouped = store.search("kubernetes", group="lineage", limit=None)
    assert len(plain) == 4
    assert len(grouped) == 2
    roots = {hit.session.id if hit.session.id == other else first.session_id for hit in grouped}
    assert roots == {first.session_id, other}
    assert tip.id in {h.session.id for h in plain}
    assert len(store.search("kubernetes", group="lineage", limit=1)) == 1


def test_search_grouping_pages_through_many_hits(store, clock):
    """Grouping keeps asking the backend until it has enough distinct conversations."""
    busy = store.get_or_create(LIN).session_id
    store.append(busy, *(user(f"zebra {n}") for n in range(120)))
    lonely = store.get_or_create(EVE).session_id
    clock.advance(minutes=1)
    store.append(lonely, user("zebra zebra zebra"))
    grouped = store.search("zebra", group="lineage", limit=2, order="oldest")
    assert {h.session.id for h in grouped} == {busy, lonely}


def test_search_needs_a_searching_backend(store):
    """A backend without search makes search a clear TypeError."""

    class Blind:
        """A backend wrapper without the search method."""

        def __init__(self, inner: object) -> None:
            self.inner = inner

        def get_state(self, scope_ids: list[str]) -> dict[str, object]:
            """No state (the store reads it when it opens)."""
            del scope_ids
            return {}

    blind = attrs.evolve(store, backend=Blind(store.backend))
    with pytest.raises(TypeError, match="cannot search"):
        blind.search("anything")


# -- context windows -------------------------------------------------------------------------------


def test_messages_around(store):
    """messages_around returns the anchor with up to window messages each side."""
    session_id = store.get_or_create(LIN).session_id
    stored = store.append(session_id, *(user(f"m{n}") for n in range(10)))
    around = store.messages_around(session_id, stored[5].id, window=2)
    assert [m.content for m in around] == ["m3", "m4", "m5", "m6", "m7"]
    with pytest.raises(SessionNotFoundError):
        store.messages_around(session_id, 10_000)


def test_anchored_view(store):
    """The anchored view shows dialogue around the hit plus the session's first and last words."""
    session_id = store.get_or_create(LIN).session_id
    messages = []
    for n in range(12):
        messages += [user(f"q{n}"), Message(role="tool", content=f"t{n}"), reply(f"a{n}")]
    stored = store.append(session_id, *messages)
    anchor = stored[18]  # q6
    view = store.anchored_view(session_id, anchor.id, window=2, head=1, tail=1)
    assert view.anchor.content == "q6"
    assert [m.content for m in view.before] == ["q5", "a5"]
    assert [m.content for m in view.after] == ["a6", "q7"]
    assert [m.content for m in view.head] == ["q0"]
    assert [m.content for m in view.tail] == ["a11"]
    assert view.session.id == session_id
    near_start = store.anchored_view(session_id, stored[0].id, window=2)
    assert near_start.before == ()
    assert near_start.head == ()
    with pytest.raises(SessionNotFoundError):
        store.anchored_view(session_id, 99_999)
