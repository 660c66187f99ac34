"""Search on SQLite: FTS5 agrees with the shared matcher, CJK substrings, orders and fallback."""

from __future__ import annotations

import random
import sqlite3

import pytest
from sqlite_helpers import found

from hermes_sessions.backends import SQLiteBackend
from hermes_sessions.backends.inmemory import InMemoryBackend
from hermes_sessions.backends.sqlite import _schema as schema
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import minutes, say, seed

HAN = "机器人学习飞书部署服务端配置修改模型的了是不"


KANA = "とうきょうタワーにいきましたカナ"


HANGUL = "서울에서회의가있습니다"


LATIN = ["docker", "redis", "youer", "deploy", "net", "network", "the", "sp_new1", "P2.2"]


SEPARATORS = [" ", "，", "。", "-", "\n", "", ""]


def _rng(seed_value):
    """A seeded generator for reproducible test data."""
    return random.Random(seed_value)  # noqa: S311  # test data, not secrets


def _mixed_corpus(seed_value, count):
    """Short messages mixing CJK runs from a small alphabet with Latin words and punctuation."""
    rng = _rng(seed_value)
    alphabet = HAN + KANA + HANGUL
    corpus = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.3:
                parts.append(rng.choice(LATIN))
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))))
            parts.append(rng.choice(SEPARATORS))
        corpus.append("".join(parts))
    return corpus


def _is_cjk(char):
    return char in HAN or char in KANA or char in HANGUL


def test_cjk_substrings_have_exact_precision_and_recall(backend):
    """Each 1-3 character CJK substring of a mixed corpus finds exactly its messages."""
    corpus = _mixed_corpus(7, 150)
    seed(backend, "s1", None, *(say(text) for text in corpus))
    queries = {
        text[start : start + width]
        for text in corpus
        for width in (1, 2, 3)
        for start in range(len(text) - width + 1)
        if all(_is_cjk(char) for char in text[start : start + width])
    }
    assert len(queries) > 500
    for query in sorted(queries):
        expected = sorted(text for text in corpus if query in text)
        assert found(backend, query) == expected, query


def test_latin_word_inside_chinese_is_found(backend):
    """``youer`` finds 修改youer服务端."""
    seed(backend, "s1", None, say("修改youer服务端"), say("you are here"))
    assert found(backend, "youer") == ["修改youer服务端"]


@pytest.fixture(scope="module")
def twin_corpus(tmp_path_factory):
    """The same mixed corpus in a SQLite backend and in the reference in-memory backend."""
    corpus = _mixed_corpus(11, 120)
    sqlite_backend = SQLiteBackend(tmp_path_factory.mktemp("twin") / "state.db")
    reference = InMemoryBackend()
    for target in (sqlite_backend, reference):
        seed(target, "s1", None, *(say(text) for text in corpus))
    yield sqlite_backend, reference
    sqlite_backend.close()


WORDS = [*LATIN, *HAN[:8], "机器", "器人", "学习", "タワー", "서울", "服务端", "dock", "the"]


@pytest.mark.parametrize(
    "query",
    [
        "docker redis",
        "docker OR redis",
        "docker redis OR youer",
        "机器 -学习",
        "NOT the 机",
        "dock* 机",
        '"机器人"',
        "机器人 OR タワー -redis",
        "net* -network",
        "服务端，配置",
        " ".join(f"w{n}" for n in range(80)),
    ],
)
def test_fts_translation_agrees_with_the_matcher(twin_corpus, query):
    """FTS5 with the parenthesised translation finds exactly what the shared matcher finds."""
    sqlite_backend, reference = twin_corpus
    assert found(sqlite_backend, query) == found(reference, query)


def test_random_queries_agree_with_the_matcher(twin_corpus):
    """Random AND/OR/NOT/prefix/phrase queries agree between FTS5 and the reference."""
    rng = _rng(3)
    sqlite_backend, reference = twin_corpus
    for _ in range(300):
        terms = []
        for _ in range(rng.randint(1, 4)):
            word = rng.choice(WORDS)
            shape = rng.random()
            if shape < 0.15:
                word = f"-{word}"
            elif shape < 0.3:
                word = f"{word}*"
            elif shape < 0.4:
                word = f'"{word} {rng.choice(WORDS)}"'
            terms.append(word)
            if rng.random() < 0.3:
                terms.append("OR")
        query = " ".join(terms)
        assert found(sqlite_backend, query) == found(reference, query), query


def test_newest_and_oldest_pages_follow_message_time(db_path):
    """newest/oldest order by message time across id blocks, whatever the insertion order."""
    rng = _rng(5)
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1")
        times = list(range(9000))
        rng.shuffle(times[6000:])  # a late import of old messages, out of order
        batch = []
        for n, offset in enumerate(times):
            timestamp = None if n % 997 == 0 else minutes(offset)
            words = "kiwi" if n % 3 else "kiwi lime"
            batch.append(say(f"{words} {n}", timestamp=timestamp))
        stored = backend.append_messages("s1", batch)
        reference = {"kiwi": stored, "lime": [m for m in stored if "lime" in str(m.content)]}
        for word, matching in reference.items():
            by_time = sorted(
                matching, key=lambda m: (m.timestamp or minutes(-(10**7)), m.id), reverse=True
            )
            for order, expected in (("newest", by_time), ("oldest", by_time[::-1])):
                for offset, limit in ((0, 5), (3, 20), (0, 1)):
                    query = SearchQuery(text=word, order=order, limit=limit, offset=offset)
                    hits = [hit.message.id for hit in backend.search(query)]
                    assert hits == [m.id for m in expected[offset : offset + limit]], (
                        order,
                        offset,
                    )
                everything = SearchQuery(text=word, order=order, limit=None, offset=2)
                assert [h.message.id for h in backend.search(everything)] == [
                    m.id for m in expected[2:]
                ]


def test_soft_delete_and_restore_keep_the_index_in_step(backend):
    """Soft-deleted messages are found only with include_inactive, and again once restored."""
    seed(backend, "s1")
    (message,) = backend.append_messages("s1", [say("papaya 木瓜")])
    backend.set_active("s1", [message.id], active=False)
    assert found(backend, "木瓜") == []
    assert found(backend, "木瓜", include_inactive=True) == ["papaya 木瓜"]
    backend.set_active("s1", [message.id], active=True)
    assert found(backend, "papaya") == ["papaya 木瓜"]
    assert backend.integrity_check() == []


def test_ranked_hits_have_scores_and_snippets(backend):
    """Ranked hits come best first with positive scores and marked snippets."""
    seed(backend, "s1", None, say("grape " + "filler " * 40), say("grape grape grape harvest"))
    hits = backend.search(SearchQuery(text="grape", offset=0))
    assert hits[0].message.content == "grape grape grape harvest"
    assert hits[0].score > hits[1].score > 0
    assert hits[0].snippet.startswith(">>>grape<<<")
    (second,) = backend.search(SearchQuery(text="grape", offset=1))
    assert second.message.content.startswith("grape filler")


def test_without_fts5_search_falls_back_with_one_warning(db_path, monkeypatch):
    """Without FTS5 writes work and search matches like the reference, after one warning."""
    monkeypatch.setattr(schema, "fts5_available", lambda _connection: False)
    with pytest.warns(RuntimeWarning, match="no FTS5") as warned:
        backend = SQLiteBackend(db_path)
    # Any further warning would fail this test: pytest runs with -W error.
    with backend:
        seed(backend, "s1", None, say("修改youer服务端"), say("docker compose", role="assistant"))
        (extra,) = backend.append_messages("s1", [say("飞书机器人", active=False)])
        backend.replace_message("s1", extra.id, say("飞书机器人 redis", timestamp=minutes(5)))
        assert found(backend, "youer") == ["修改youer服务端"]
        assert found(backend, "机器 OR compose") == ["docker compose", "飞书机器人 redis"]
        newest = backend.search(SearchQuery(text="redis OR docker", order="newest", limit=1))
        assert [hit.message.content for hit in newest] == ["飞书机器人 redis"]
        backend.delete_messages("s1", [extra.id])
        assert found(backend, "redis") == []
        everything = SearchQuery(
            text="docker", roles=None, exclude_sources=(), include_inactive=True
        )
        assert len(backend.search(everything)) == 1
        backend.replace_messages("s1", [say("replaced kiwi")])
        assert found(backend, "kiwi") == ["replaced kiwi"]
        seed(backend, "s2", None, say("lime"))
        assert backend.delete_session("s2")
        assert found(backend, "lime") == []
        assert backend.integrity_check() == []
        assert backend.rebuild_index() == 0
        backend.optimize()
    assert len(warned) == 1
    with sqlite3.connect(db_path) as connection:
        assert schema.fts_state(connection) == "missing"


def test_index_missed_without_fts5_is_rebuilt(db_path, monkeypatch):
    """Messages written by a build without FTS5 are indexed when FTS5 is back."""
    with SQLiteBackend(db_path) as backend:
        seed(backend, "s1", None, say("walnut"))
    with monkeypatch.context() as patch:
        patch.setattr(schema, "fts5_available", lambda _connection: False)
        with pytest.warns(RuntimeWarning):
            backend = SQLiteBackend(db_path)
        with backend:
            backend.append_messages("s1", [say("pecan")])
            backend.delete_messages("s1", [1])
    with SQLiteBackend(db_path) as backend:
        assert found(backend, "pecan") == ["pecan"]
        assert found(backend, "walnut") == []
        assert backend.integrity_check() == []
