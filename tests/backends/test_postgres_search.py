"""Search on PostgreSQL: the tsquery translation agrees with the shared matcher, long messages."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions import text
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import minutes, say, seed
from pg_support import open_pg, requires_pg

pytest.importorskip("psycopg")

from hermes_sessions.backends.postgres import _search as pg_search

pytestmark = requires_pg

WORDS = ["docker", "compose", "redis", "net", "network", "飞书", "机器人", "书", "a", "b", "🚀"]
GLUE = [" ", " ", "-", ".", "部", "", ", "]


def _document(rng: random.Random, length: int, words: list[str] = WORDS) -> str:
    parts = [rng.choice(words)]
    for _ in range(length - 1):
        parts += [rng.choice(GLUE), rng.choice(words)]
    return "".join(parts)


def _corpus() -> list[str]:
    rng = random.Random(16)  # noqa: S311  # test data, not secrets
    documents = [_document(rng, rng.randint(1, 8)) for _ in range(120)]
    # Long messages, stored in several chunks (inexact rows, re-checked by the matcher).
    documents.append(_document(rng, 20_000, [w for w in WORDS if w != "redis"]) + " redis")
    documents.append("x" * 600 + " docker " + _document(rng, 300))
    return documents


CORPUS = _corpus()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A backend holding :data:`CORPUS` as user messages of session ``s1``."""
    with open_pg(tmp_path_factory.mktemp("corpus")) as backend:
        seed(backend, "s1", None, *(say(content) for content in CORPUS))
        yield backend


def _expected(query: str) -> set[str]:
    parsed = text.parse_query(query)
    return {content for content in CORPUS if parsed.matches(text.Document.from_text(content))}


TERMS = st.sampled_from([*WORDS, "dock*", "net*", "机*", "飞书机", "docker-compose", '"a b"'])
QUERIES = st.lists(
    st.one_of(TERMS, st.sampled_from(["OR", "NOT", "-redis", "-a", "AND", "x" * 600])),
    min_size=1,
    max_size=6,
).map(" ".join)


@given(QUERIES)
@settings(max_examples=150)
def test_translation_agrees_with_the_matcher(corpus, query):
    """Every query finds exactly the messages the shared matcher accepts (exact and long rows)."""
    hits = corpus.search(SearchQuery(text=query, limit=None, roles=None))
    assert {hit.message.content for hit in hits} == _expected(query)
    assert len(hits) == len({hit.message.id for hit in hits})


def test_long_messages_are_stored_in_inexact_chunks():
    """A stream past the tsvector limits is cut into chunks, each marked inexact."""
    chunks = pg_search.documents("fig " * 300)
    assert [exact for exact, _ in chunks] == [False, False]
    assert pg_search.documents("fig " * 3) == [(True, "'fig':1,2,3")]
    long_token = pg_search.documents("y" * 600)
    assert long_token == [(False, "'" + "y" * pg_search.LEXEME_CHARS + "':1")]


def test_positions_stop_before_the_tsvector_limit():
    """No chunk holds a position above 16,383, so phrases inside a chunk stay exact."""
    words = [f"w{n}" for n in range(20_000)]
    chunks = pg_search.documents(" ".join(words))
    assert len(chunks) == 2
    assert f"'w{pg_search.MAX_POSITION - 1}':{pg_search.MAX_POSITION}" in chunks[0][1]
    assert f"'w{pg_search.MAX_POSITION}':1" in chunks[1][1]


def test_rechecked_candidates_do_not_shorten_a_page(tmp_path):
    """Long candidates rejected by the matcher are replaced, so a page is still full."""
    with open_pg(tmp_path) as backend:
        decoys = [say("plum " * 20_000 + "部pear") for _ in range(3)]
        real = [say(f"plum pear {n}", timestamp=minutes(n)) for n in range(4)]
        seed(backend, "s1", None, *decoys, *real)
        hits = backend.search(SearchQuery(text='"plum pear"', order="oldest", limit=2, offset=1))
        assert [hit.message.content for hit in hits] == ["plum pear 1", "plum pear 2"]


@pytest.mark.slow
def test_a_five_megabyte_message_is_searchable(tmp_path):
    """A 5 MB message is found by words anywhere in it, phrases, CJK and exclusions."""
    body = "lorem ipsum dolor sit amet " * 190_000
    content = "opening-words " + body + " 飞书机器人 closing needle"
    assert len(content.encode()) > 5_000_000
    with open_pg(tmp_path) as backend:
        seed(backend, "s1", None, say(content), say("ipsum alone"))
        session = backend.get_session("s1")
        assert session is not None
        assert session.message_count == 2

        def found(query):
            hits = backend.search(SearchQuery(text=query, limit=None))
            return sorted(len(hit.message.content or "") for hit in hits)

        assert found("needle") == [len(content)]
        assert found('"opening words"') == [len(content)]
        assert found("机器 needle opening") == [len(content)]
        assert found("ipsum -needle") == [len("ipsum alone")]
        assert found('"needle closing"') == []
        (hit,) = backend.search(SearchQuery(text="closing needle"))
        assert ">>>closing<<<" in hit.snippet
