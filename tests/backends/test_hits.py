"""Deferred search hits: snippets are cut on first access, and a hit behaves as a plain one."""

from __future__ import annotations

import copy
import pickle

import attrs
import pytest

import hermes_sessions.backends.hits as hits_module
from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends import InMemoryBackend, JSONLBackend, SQLiteBackend
from hermes_sessions.queries import SearchHit
from pg_support import open_pg, requires_pg

BACKENDS = {
    "memory": lambda directory: InMemoryBackend(),
    "sqlite": lambda directory: SQLiteBackend(directory / "state.db"),
    "jsonl": JSONLBackend,
    "postgres": pytest.param(open_pg, marks=requires_pg),
}


@pytest.fixture(params=BACKENDS.values(), ids=BACKENDS.keys())
def store(request, tmp_path):
    """A store holding three messages that mention ``docker``, on each backend."""
    with SessionStore(request.param(tmp_path)) as opened:
        session_id = opened.get_or_create(SessionSource(platform="cli", chat_id="me")).session_id
        opened.append(
            session_id,
            Message(role="user", content="we deploy with docker compose on friday"),
            Message(role="assistant", content="docker 部署 已完成"),
            Message(role="user", content="the docker image is too large"),
        )
        yield opened


@pytest.fixture
def cuts(monkeypatch):
    """Count the snippets cut through the hits module."""
    made: list[str] = []
    original = hits_module.text.make_snippet

    def counting(text, query, **options):
        made.append(text)
        return original(text, query, **options)

    monkeypatch.setattr(hits_module.text, "make_snippet", counting)
    return made


def eager(hit: SearchHit) -> SearchHit:
    """A plain ``SearchHit`` with the same values as ``hit``."""
    return SearchHit(
        message=hit.message,
        session=hit.session,
        score=hit.score,
        snippet=hit.snippet,
        spans=hit.spans,
    )


def test_search_cuts_no_snippet(store, cuts):
    """A search returning every hit tokenizes none of their messages for snippets."""
    found = store.search("docker", limit=None)
    assert len(found) == 3
    assert cuts == []


def test_a_snippet_is_cut_once_when_read(store, cuts):
    """Reading a hit's snippet and spans, twice, cuts its snippet once."""
    hit = store.search("docker", limit=None)[0]
    assert (hit.snippet, hit.spans) == (hit.snippet, hit.spans)
    assert cuts == [hit.message.content]


def test_a_deferred_hit_holds_what_an_eager_one_would(store):
    """The snippet and spans read from a hit are those ``make_snippet`` gives for its message."""
    (hit,) = store.search("friday")
    assert hit.snippet == "we deploy with docker compose on >>>friday<<<"
    assert hit.spans == ((33, 39),)


def test_a_deferred_hit_equals_the_eager_hit(store):
    """A deferred hit equals, and prints as, a ``SearchHit`` with the same values, either way."""
    hit = store.search("docker")[0]
    plain = eager(hit)
    assert hit == plain
    assert plain == hit
    assert not hit != plain  # noqa: SIM202  # the operator itself is under test
    assert repr(hit) == repr(plain)
    assert isinstance(hit, SearchHit)


def test_a_deferred_hit_differs_from_another_hit(store):
    """Hits of different messages are unequal."""
    first, second, *_rest = store.search("docker")
    assert first != second
    assert first != "not a hit"


def test_evolve_copy_and_pickle_keep_the_values(store):
    """``attrs.evolve``, ``copy`` and ``pickle`` give hits with the same values."""
    hit = store.search("docker")[0]
    assert attrs.evolve(hit, score=1.5) == attrs.evolve(eager(hit), score=1.5)
    assert copy.copy(hit) == hit
    assert copy.deepcopy(hit) == hit
    assert pickle.loads(pickle.dumps(hit)) == hit  # noqa: S301  # our own bytes
    assert attrs.asdict(hit) == attrs.asdict(eager(hit))


def test_a_deferred_hit_is_frozen(store):
    """Assigning to a hit's snippet raises, as for any frozen value."""
    hit = store.search("docker")[0]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        hit.snippet = "changed"  # type: ignore[misc]
