"""Open-ended inputs on every persistent backend: refused clearly or handled, never a crash.

- search queries of any text: never raise, and return exactly the messages the query language
  matches (``parse_query(q).matches``, itself held to a reference in ``tests/text``) — no wrong
  hit, none missing;
- titles, session ids, keys and sources of any text: stored and read back, or refused with the
  library's own ``ValueError``/``LookupError`` subclass;
- tool arguments of any shape, against a store on disk: always a result dict.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from reliability_support import KINDS, open_store

from hermes_sessions import Message, SessionSource
from hermes_sessions.exceptions import HermesSessionsError
from hermes_sessions.text import Document, parse_query
from hermes_sessions.tools import SearchToolContext, handle_session_search

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from hermes_sessions import SessionStore

T = TypeVar("T")
WORDS = ["deploy", "deployment", "rollback", "db", "v2", "飞书", "机器人", "東京", "서울", "🚀"]
SYMBOLS = [" ", " ", '"', "*", "-", "OR", "NOT", "(", ")", ":", "_", "，", "　"]
query_text = st.lists(st.sampled_from(WORDS + SYMBOLS), max_size=8).map("".join) | st.text(
    max_size=30
)
FUZZ = settings(
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LIN = SessionSource(platform="feishu", chat_id="oc_team", user_id="ou_lin")


@pytest.fixture(params=KINDS)
def corpus_store(request, tmp_path) -> Iterator[tuple[SessionStore, list[str]]]:
    """A store of a persistent backend holding 40 generated multilingual messages."""
    texts = _corpus()
    with open_store(request.param, tmp_path) as store:
        session_id = store.get_or_create(LIN).session_id
        store.append(session_id, *(Message(role="user", content=text) for text in texts))
        yield store, texts


def _corpus() -> list[str]:
    """40 texts mixing the words, deterministic (a seeded walk over the vocabulary)."""
    texts = []
    for n in range(40):
        words = [WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(1 + n % 5)]
        glue = [" ", "-", "", ".", " "][n % 5]
        texts.append(glue.join(words))
    return texts


def refused_or(call: Callable[[], T], *allowed: type[Exception]) -> T | None:
    """``call()``, or ``None`` when it raised a library error that is one of ``allowed``."""
    try:
        return call()
    except HermesSessionsError as error:
        if not isinstance(error, allowed):
            raise
        return None


@FUZZ
@given(query=query_text)
@example(query="deploy")  # a word of the corpus
@example(query='"deploy rollback"')  # a phrase
@example(query="机器*")  # a CJK prefix
def test_search_returns_exactly_the_matching_messages(corpus_store, query):
    """Any query: no raise, and the hits are exactly the messages the query matches."""
    store, texts = corpus_store
    hits = store.search(query, limit=None)
    found = sorted(str(hit.message.content) for hit in hits)
    parsed = parse_query(query)
    expected = (
        [] if parsed.is_empty else [t for t in texts if parsed.matches(Document.from_text(t))]
    )
    assert found == sorted(expected)
    if query == "deploy":
        assert found, "the corpus holds the word: the oracle must not be vacuous"


@FUZZ
@given(title=st.text(max_size=40))
def test_any_title_is_stored_or_refused_clearly(corpus_store, title):
    """A title of any text is stored (and found again) or refused with a library ValueError."""
    store, _ = corpus_store
    session_id = store.get_or_create(LIN).session_id
    record = refused_or(lambda: store.set_title(session_id, title), ValueError)
    if record is not None:
        assert store.session(session_id).title == record.title


@FUZZ
@given(text=st.text(max_size=40))
def test_any_id_or_key_is_found_or_refused_clearly(corpus_store, text):
    """Looking up any text as a session id or a key: found, or a library error, never a crash."""
    store, _ = corpus_store
    for lookup in (store.session, store.entry):
        refused_or(lambda lookup=lookup: lookup(text), ValueError, LookupError)


@FUZZ
@given(
    fields=st.fixed_dictionaries(
        {"platform": st.text(max_size=12), "chat_id": st.text(max_size=12)},
        optional={"user_id": st.text(max_size=12), "thread_id": st.text(max_size=12)},
    )
)
def test_any_source_gets_a_session_or_is_refused_clearly(corpus_store, fields):
    """A source of any text: a session under its key (found again), or a library ValueError."""
    store, _ = corpus_store
    source = refused_or(lambda: SessionSource(**fields), ValueError)
    if source is None:
        return
    lookup = refused_or(lambda: store.get_or_create(source), ValueError)
    if lookup is not None:
        assert store.get_or_create(source).session_id == lookup.session_id
        assert store.entry(store.key_for(source)).session_id == lookup.session_id


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
NAMES = ["query", "session_id", "message_id", "limit", "role_filter", "around", "window"]


@FUZZ
@given(arguments=st.dictionaries(st.sampled_from(NAMES), json_values, max_size=5) | json_values)
def test_any_tool_arguments_give_a_result_dict(corpus_store, arguments):
    """The search tool on a store on disk: whatever the arguments, a JSON result dict."""
    store, _ = corpus_store
    context = SearchToolContext(store=store, requester=LIN, current_key=store.key_for(LIN))
    result = handle_session_search(context, arguments)
    json.dumps(result, allow_nan=False)
    assert isinstance(result["success"], bool)
