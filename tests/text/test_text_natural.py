"""Natural questions: content terms, word forms, CJK candidate terms and the session ranking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.text import (
    CONFIDENT_COVERAGE,
    Evidence,
    NaturalTerm,
    natural_terms,
    rank_sessions,
    stem,
    term_count,
)


def nothing(stretch: str) -> bool:
    """An index that holds no CJK stretch."""
    return False


def holding(*stretches: str):
    """An index that holds exactly ``stretches`` and their substrings."""

    def exists(candidate: str) -> bool:
        return any(candidate in stretch for stretch in stretches)

    return exists


def texts(terms: list[NaturalTerm]) -> list[str]:
    """The terms' texts."""
    return [term.text for term in terms]


def test_stop_words_and_question_filler_are_dropped():
    """Function words and the filler of questions about the past are not terms."""
    assert texts(natural_terms("What did we discuss last week about the Docker OOM?", nothing)) == [
        "docker",
        "oom",
    ]
    assert natural_terms("what did we say about it?", nothing) == []


def test_english_words_are_stemmed_and_found_by_prefix():
    """A word's stem decides; its query finds candidates of every form."""
    (term,) = natural_terms("deployments", nothing)
    assert term.stem == stem("deployed") == "deploy"
    assert term.query == "deploy*"
    assert stem("k8s") == "k8s"
    assert stem("café") == "café"


def test_word_forms_meet_through_their_stems():
    """Inflections and the endings Snowball keeps count; other words sharing a prefix do not."""
    (failure,) = natural_terms("failure", nothing)
    assert term_count(failure, ["the", "build", "failed", "fails"], "") == 2
    (graphql,) = natural_terms("graphql", nothing)
    assert term_count(graphql, ["graph", "graphs"], "") == 0
    (run,) = natural_terms("running", nothing)
    assert term_count(run, ["run", "runs", "runtime"], "") == 2


def test_everyday_words_are_marked_general():
    """Everyday words weigh less than technical ones."""
    terms = natural_terms("why was the postgres database growing", nothing)
    assert {t.text: t.general for t in terms} == {
        "postgres": False,
        "database": False,
        "growing": True,
    }


def test_chinese_question_is_cut_at_function_words_and_split_by_the_index():
    """Filler words go; the rest is split into the longest stretches the index holds."""
    exists = holding("飞书机器人的证书过期了", "回调失败")
    terms = natural_terms("上周飞书机器人为什么回调失败了吗？", exists)
    assert texts(terms) == ["飞书机器人", "回调失败"]
    assert not any(term.missing for term in terms)


def test_a_cjk_stretch_the_index_lacks_counts_as_missing():
    """A stretch no message holds is a missing term, not silently dropped."""
    terms = natural_terms("卡夫卡消费延迟", holding("消费"))
    assert [(t.text, t.missing) for t in terms] == [
        ("卡夫卡", True),
        ("消费", False),
        ("延迟", True),
    ]


def test_japanese_hiragana_and_korean_endings_are_not_terms():
    """Japanese particles between kanji/katakana and Korean particles do not become terms."""
    exists = holding("決済画面", "エラー", "도커", "메모리")
    assert texts(natural_terms("決済画面のエラーについて", exists)) == ["決済画面", "エラー"]
    assert texts(natural_terms("도커 메모리는 어떻게 해결했나요?", exists)) == ["도커", "메모리"]


def evidence(session_id: str, counts: dict[int, dict[int, int]], **fields: object) -> Evidence:
    """Evidence of one session of 4 messages."""
    return Evidence(session_id=session_id, message_count=4, counts=counts, **fields)  # type: ignore[arg-type]


def test_sessions_rank_by_coverage_then_bm25():
    """The session holding every term comes first; one term alone is not confident."""
    terms = natural_terms("docker oom", nothing)
    ranked = rank_sessions(
        terms,
        [
            evidence("one-word", {0: {1: 5}}),
            evidence("both", {0: {1: 1}, 1: {2: 1}}),
            *(evidence(f"other{n}", {0: {1: 1}}) for n in range(5)),
        ],
    )
    assert ranked[0].session_id == "both"
    assert ranked[0].coverage == 1.0
    assert ranked[0].matched == "all words"
    assert ranked[0].confident
    assert ranked[0].best_messages == (1, 2)
    assert all(not score.confident for score in ranked[1:])


def test_one_message_holding_every_term_and_an_exact_match_rank_higher():
    """Terms together in one message, and the question matching exactly, add to the score."""
    terms = natural_terms("docker oom", nothing)
    spread = evidence("spread", {0: {1: 1}, 1: {2: 1}})
    together = evidence("together", {0: {1: 1}, 1: {1: 1}})
    exact = evidence("exact", {0: {3: 1}, 1: {3: 1}}, exact=True)
    ranked = rank_sessions(terms, [spread, together, exact])
    assert [s.session_id for s in ranked] == ["exact", "together", "spread"]
    assert ranked[0].matched == "exact"


def test_a_rare_missing_term_makes_a_session_weak():
    """A session lacking the question's rarest term stays below the threshold."""
    terms = natural_terms("kafka consumer lag", nothing)
    common = [evidence(f"s{n}", {1: {1: 1}, 2: {1: 1}}) for n in range(30)]
    ranked = rank_sessions(terms, common)
    assert ranked
    assert all(score.coverage < CONFIDENT_COVERAGE for score in ranked)


@settings(deadline=None, max_examples=200)
@given(st.text(max_size=200))
def test_natural_terms_never_raise(question: str):
    """Any text gives terms (possibly none) and never raises; terms are unique."""
    terms = natural_terms(question, lambda stretch: len(stretch) % 2 == 0)
    assert len(terms) == len({t.text for t in terms}) <= 16
