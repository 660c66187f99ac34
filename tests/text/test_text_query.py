"""The query language: parsing, normal form, and what a query matches."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.text import (
    MAX_QUERY_LENGTH,
    MAX_QUERY_PHRASES,
    Clause,
    Document,
    Phrase,
    Query,
    TokenPattern,
    match_spans,
    parse_query,
)

FTS_UNSAFE = re.compile("[\x00-\x2f\x3a-\x60\x7b-\x7f]")


def matches(query: str, text: str) -> bool:
    """Whether the query matches the text."""
    return parse_query(query).matches(Document.from_text(text))


def shape(query: str):
    """The parsed query as nested tuples of token strings (``*`` marks a prefix)."""
    parsed = parse_query(query)

    def phrase(p):
        return " ".join(t.text + ("*" if t.prefix else "") for t in p.patterns)

    return (
        [[phrase(p) for p in clause.phrases] for clause in parsed.clauses],
        [phrase(p) for p in parsed.excluded],
    )


# -- Latin words -----------------------------------------------------------------------------------


def test_words_match_case_insensitively():
    """``DOCKER`` finds ``docker``."""
    assert matches("DOCKER", "we use docker")


def test_words_match_whole_tokens_only():
    """``net`` does not match ``network``."""
    assert not matches("net", "the network is down")


def test_accents_are_not_folded():
    """``cafe`` does not find ``café``."""
    assert not matches("cafe", "un café")


def test_all_terms_must_match():
    """Terms separated by spaces must all match."""
    assert matches("docker redis", "redis in docker")
    assert not matches("docker redis", "docker only")


def test_upper_case_and_is_the_implicit_and():
    """``a AND b`` is ``a b``."""
    assert shape("docker AND redis") == shape("docker redis") == ([["docker"], ["redis"]], [])


def test_or_binds_tighter_than_and():
    """``a b OR c`` means ``a AND (b OR c)``."""
    assert shape("a b OR c") == ([["a"], ["b", "c"]], [])
    assert matches("a b OR c", "a c")
    assert not matches("a b OR c", "c only")


def test_or_chains_into_one_clause():
    """``a OR b OR c`` is one clause of three alternatives."""
    assert shape("a OR b OR c") == ([["a", "b", "c"]], [])


def test_not_excludes():
    """``NOT term`` excludes messages containing the term."""
    assert matches("docker NOT helm", "docker compose")
    assert not matches("docker NOT helm", "docker and helm")


def test_minus_excludes():
    """``-term`` excludes messages containing the term."""
    assert shape("docker -helm") == ([["docker"]], ["helm"])
    assert not matches("docker -helm", "docker and helm")


@pytest.mark.parametrize("query", ["NOT docker", "-helm", "-a -b", "NOT a NOT b"])
def test_query_without_positive_term_matches_nothing(query):
    """A query with only exclusions is empty and matches nothing."""
    parsed = parse_query(query)
    assert parsed.is_empty
    assert parsed == Query()
    assert not parsed.matches(Document.from_text("anything at all"))


def test_lower_case_operators_are_words():
    """Lower-case ``and``, ``or`` and ``not`` are ordinary words."""
    assert shape("this or that not") == ([["this"], ["or"], ["that"], ["not"]], [])


def test_near_is_a_word():
    """``NEAR`` is never an operator."""
    assert shape("NEAR(a b)") == ([["near"], ["a"], ["b"]], [])


@pytest.mark.parametrize("query", ["OR a", "a OR", "a OR OR b", "a AND", "AND a", "a NOT", "NOT"])
def test_dangling_operators_are_ignored(query):
    """An operator without terms on both sides it needs is dropped."""
    clauses, excluded = shape(query)
    assert excluded == []
    assert all(len(clause) == 1 for clause in clauses)


def test_or_next_to_a_negated_term_is_dangling():
    """``-a OR b`` is ``b -a`` and ``a OR -b`` is ``a -b``."""
    assert shape("-a OR b") == ([["b"]], ["a"])
    assert shape("a OR -b") == ([["a"]], ["b"])
    assert shape("a OR NOT b") == ([["a"]], ["b"])


def test_double_not_is_not():
    """``NOT NOT a`` excludes ``a``."""
    assert shape("x NOT NOT a") == ([["x"]], ["a"])


def test_not_followed_by_an_operator_is_dropped():
    """``NOT`` before ``AND`` or ``OR`` is dangling."""
    assert shape("x NOT AND a") == ([["x"], ["a"]], [])


def test_phrase_matches_consecutive_tokens():
    """``"a b"`` matches the two tokens only when adjacent."""
    assert matches('"docker compose"', "run docker compose up")
    assert not matches('"docker compose"', "compose docker")
    assert not matches('"docker compose"', "docker and compose")


def test_phrase_ignores_punctuation_between_tokens():
    """Punctuation inside a phrase only separates tokens."""
    assert shape('"TODO: fix it"') == ([["todo fix it"]], [])


def test_phrase_can_be_negated():
    """``-"a b"`` excludes the phrase."""
    assert shape('x -"a b"') == ([["x"]], ["a b"])
    assert shape('x NOT "a b"') == ([["x"]], ["a b"])


def test_unbalanced_quote_is_ignored():
    """An unbalanced quote separates like a space."""
    assert shape('"docker compose') == ([["docker"], ["compose"]], [])
    assert shape('a "b" c"') == ([["a"], ["b"], ["c"]], [])


def test_empty_phrase_is_dropped():
    """``""`` adds nothing."""
    assert shape('a ""') == ([["a"]], [])


def test_prefix_matches_token_starts():
    """``dock*`` matches tokens starting with ``dock`` but not the middle of a token."""
    assert matches("dock*", "Dockerfile changes")
    assert not matches("ock*", "docker")


def test_prefix_applies_to_the_last_token_of_a_term():
    """``docker-comp*`` is ``docker`` followed by a token starting with ``comp``."""
    assert shape("docker-comp*") == ([["docker comp*"]], [])
    assert matches("docker-comp*", "docker compose")


def test_prefix_after_a_phrase():
    """``"a b"*`` makes the phrase's last token a prefix."""
    assert shape('"docker comp"*') == ([["docker comp*"]], [])


def test_star_inside_a_word_splits_it():
    """``doc*ker`` is the prefix ``doc*`` and the word ``ker``."""
    assert shape("doc*ker") == ([["doc*"], ["ker"]], [])


@pytest.mark.parametrize("query", ["***", "*", "-", "--", ":", "^", "()", "- * :", '"', '""'])
def test_words_without_content_are_dropped(query):
    """Words that reduce to nothing leave an empty query."""
    assert parse_query(query).is_empty


# -- compounds and punctuation ---------------------------------------------------------------------


def test_compound_identifier_is_a_token_sequence():
    """``docker-compose`` finds ``docker compose`` and ``docker_compose``, not the reverse."""
    assert matches("docker-compose", "docker compose up")
    assert matches("docker-compose", "docker_compose.yml")
    assert not matches("docker-compose", "compose docker")


def test_dotted_file_name_is_a_token_sequence():
    """``my-app.config.ts`` matches its exact token sequence."""
    assert matches("my-app.config.ts", "edit src/my-app.config.ts now")
    assert not matches("my-app.config.ts", "my app config")


def test_underscore_compound_finds_its_parts():
    """``new1`` finds ``sp_new1`` and ``sp_new1`` finds itself."""
    assert matches("new1", "branch sp_new1")
    assert matches("sp_new1", "branch sp_new1")


def test_version_like_identifier():
    """``P2.2`` finds ``p2.2`` but not ``P2.3``."""
    assert matches("P2.2", "see p2.2 for details")
    assert not matches("P2.2", "see P2.3")


@pytest.mark.parametrize("connector", list("-._/+#@"))
def test_connectors_keep_one_term(connector):
    """The connectors ``- . _ / + # @`` keep a word one token sequence."""
    assert shape(f"a{connector}b") == ([["a b"]], [])


def test_colon_splits_into_terms_that_must_all_match():
    """``content:foo`` is the two terms ``content`` and ``foo``."""
    assert shape("content:foo") == ([["content"], ["foo"]], [])
    assert matches("content:foo", "foo then content")


def test_todo_colon_fix():
    """``TODO: fix`` is the terms ``todo`` and ``fix``."""
    assert shape("TODO: fix") == ([["todo"], ["fix"]], [])


def test_cjk_comma_splits_into_terms():
    """Two CJK words joined by a full-width comma are two terms, found anywhere."""
    assert shape("飞书\uff0c机器人") == ([["飞书"], ["机器 器人"]], [])
    assert matches("飞书\uff0c机器人", "机器人在飞书里")


def test_column_filter_syntax_is_not_an_operator():
    """``column:`` is a plain word."""
    assert shape("title:deploy") == ([["title"], ["deploy"]], [])


def test_caret_is_not_an_operator():
    """``^`` separates like other punctuation."""
    assert shape("^start") == ([["start"]], [])


def test_minus_negates_every_term_of_its_word():
    """``-content:foo`` excludes both ``content`` and ``foo``."""
    assert shape("x -content:foo") == ([["x"]], ["content", "foo"])


def test_or_binds_the_nearest_terms_of_split_words():
    """``a OR content:foo`` is ``(a OR content) foo``."""
    assert shape("a OR content:foo") == ([["a", "content"], ["foo"]], [])
    assert shape("x:y OR z") == ([["x"], ["y", "z"]], [])


def test_parentheses_are_ignored():
    """Parentheses are punctuation, not grouping."""
    assert shape("(a OR b) c") == ([["a", "b"], ["c"]], [])


# -- CJK -------------------------------------------------------------------------------------------


def test_one_character_cjk_query_is_substring():
    """A one-character CJK query finds every message containing that character."""
    assert shape("书") == ([["书*"]], [])
    assert matches("书", "飞书机器人")
    assert matches("书", "书")
    assert matches("人", "飞书机器人")
    assert not matches("书", "飞机")


def test_two_character_cjk_query_is_substring():
    """A two-character CJK query is one bigram."""
    assert shape("飞书") == ([["飞书"]], [])
    assert matches("书机", "飞书机器人")
    assert not matches("书机", "飞书 机器人")


def test_three_character_cjk_query_is_substring():
    """Three or more CJK characters are the phrase of their bigrams: exact substring."""
    assert shape("机器人") == ([["机器 器人"]], [])
    assert matches("机器人", "飞书机器人")
    assert not matches("机器人", "机器 人")
    assert not matches("飞书人", "飞书机器人")


def test_cjk_star_changes_nothing():
    """``x*`` on a CJK term is plain substring."""
    assert shape("飞书*") == shape("飞书")
    assert shape("书*") == shape("书")


def test_latin_word_inside_cjk_is_found():
    """``youer`` finds ``修改youer服务端``."""
    assert matches("youer", "修改youer服务端")


def test_mixed_script_term_is_a_sequence_across_the_change():
    """``修改youer`` needs ``修改`` to end right where ``youer`` starts."""
    assert shape("修改youer") == ([["修改 改 youer"]], [])
    assert matches("修改youer", "请修改youer服务端")
    assert not matches("修改youer", "修改了youer")


def test_cjk_after_a_latin_word_starts_its_run():
    """``youer服务`` needs ``服务`` at the start of the run after ``youer``."""
    assert matches("youer服务", "youer服务端")
    assert not matches("youer服务", "youer的服务")
    assert matches("youer服", "youer服务")


def test_cjk_between_words_must_be_the_whole_run():
    """In ``a书b`` the CJK stretch is exactly the run between the words."""
    assert matches("a书b", "a书b")
    assert not matches("a书b", "a书书b")


def test_cjk_between_latin_words_breaks_phrase_adjacency():
    """``docker部署redis`` does not contain the phrase ``"docker redis"``."""
    assert not matches('"docker redis"', "docker部署redis")
    assert matches("docker redis", "docker部署redis")


def test_hyphen_keeps_phrase_adjacency():
    """``docker-compose`` contains the phrase ``"docker compose"``."""
    assert matches('"docker compose"', "docker-compose")


def test_cjk_phrase_across_a_space_needs_run_boundaries():
    """``"飞书 机器人"`` matches runs that end and start there, not one run."""
    assert matches('"飞书 机器人"', "飞书 机器人")
    assert matches('"飞书 机器人"', "用飞书-机器人")
    assert not matches('"飞书 机器人"', "飞书机器人")
    assert not matches('"飞书 机器人"', "飞书 大机器人")


def test_japanese_query():
    """Kana and kanji queries are substrings of Japanese text."""
    text = "サーバーを再起動しました"
    assert matches("再起動", text)
    assert matches("サーバー", text)
    assert matches("を", text)
    assert not matches("起動サ", text)


def test_korean_query():
    """Hangul queries are substrings, within a space-separated word."""
    text = "데이터베이스 연결 오류"
    assert matches("베이스", text)
    assert matches("연결", text)
    assert not matches("스연", text)


def test_emoji_query_finds_messages_containing_it():
    """``🚀`` finds messages containing it, wherever it is."""
    assert matches("🚀", "deploy 🚀 done")
    assert matches("🚀", "上线🚀了")
    assert matches("🚀", "launch🚀")
    assert not matches("🚀", "deploy done")


def test_emoji_with_variation_selector_matches_without():
    """``❤️`` and ``❤`` find each other."""
    assert matches("❤️", "I ❤ it")
    assert matches("❤", "I ❤️ it")


def test_symbol_between_words_breaks_phrase_adjacency():
    """A symbol occupies a position, so ``"deploy now"`` does not match ``deploy 🚀 now``."""
    assert not matches('"deploy now"', "deploy 🚀 now")


# -- hostile input ---------------------------------------------------------------------------------

HOSTILE = [
    "'; DROP TABLE messages; --",
    '" OR 1=1 --',
    'a" OR "b',
    "NEAR(a b, 2)",
    "body:secret",
    "{body title}: x",
    "^start",
    "a + b",
    "***",
    "\x00\x01\x1b[31m",
    "x" * 10_000,
    "飞" * 10_000,
    "a OR " * 5_000,
    '"' * 999,
    "\ud800\udfff",
    "\u202e\u2066evil\u2069",
    "%_%",
    "$(rm -rf /)",
    "' UNION SELECT * FROM sqlite_master --",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_are_reduced_to_plain_tokens(query):
    """Hostile input never raises and leaves only FTS5-safe tokens."""
    parsed = parse_query(query)
    for phrase in parsed.phrases():
        for token in phrase.tokens:
            assert token
            assert FTS_UNSAFE.search(token) is None


def test_sql_fragment_becomes_its_words():
    """An SQL fragment is just its words."""
    assert shape("'; DROP TABLE x; --") == ([["drop"], ["table"], ["x"]], [])


def test_query_length_is_capped():
    """Only the first ``MAX_QUERY_LENGTH`` characters are read."""
    query = "a " * MAX_QUERY_LENGTH + "zzz"
    assert "zzz" not in str(parse_query(query))


def test_number_of_phrases_is_capped():
    """At most ``MAX_QUERY_PHRASES`` phrases are kept."""
    parsed = parse_query(" ".join(f"w{index}" for index in range(200)))
    assert len(parsed.clauses) == MAX_QUERY_PHRASES
    split = parse_query("-x " + " ".join(f"a{index}:b{index}" for index in range(100)))
    assert len(split.phrases()) == MAX_QUERY_PHRASES


def test_space_like_characters_separate_operators():
    """Control and zero-width characters separate query words like spaces."""
    assert shape("a\u200bOR\x00b") == ([["a", "b"]], [])


@settings(deadline=None, max_examples=500)
@given(st.text(max_size=300))
def test_parse_query_never_raises(text):
    """Any text parses to a query whose tokens are FTS5-safe."""
    parsed = parse_query(text)
    assert parsed.is_empty == (not parsed.clauses)
    for phrase in parsed.phrases():
        assert not any(pattern.prefix for pattern in phrase.patterns[:-1])
        for token in phrase.tokens:
            assert FTS_UNSAFE.search(token) is None


@settings(deadline=None, max_examples=50)
@given(st.text(min_size=900, max_size=3_000))
def test_parse_query_never_raises_on_long_text(text):
    """Long arbitrary queries parse within the limits."""
    assert len(parse_query(text).phrases()) <= MAX_QUERY_PHRASES


# -- the normal form -------------------------------------------------------------------------------


def test_duplicates_are_removed():
    """Repeated terms and alternatives appear once."""
    assert shape("a a OR a b b -c -c") == ([["a"], ["b"]], ["c"])


def test_phrases_lists_positive_then_excluded():
    """``Query.phrases`` gives every distinct phrase, positive ones first."""
    parsed = parse_query("a b OR a -c")
    assert [p.tokens for p in parsed.phrases()] == [("a",), ("b",), ("c",)]


def test_phrase_allows_a_prefix_only_last():
    """A phrase refuses a prefix pattern that is not its last."""
    with pytest.raises(ValueError, match="only the last"):
        Phrase((TokenPattern("a", prefix=True), TokenPattern("b")))


def test_phrase_needs_patterns():
    """A phrase without patterns is refused."""
    with pytest.raises(ValueError, match="at least one"):
        Phrase(())


@pytest.mark.parametrize("text", ["", 'a"b', "A", "a b", "a*", "\ud800"])
def test_token_pattern_needs_token_text(text):
    """A token pattern refuses what no token holds, so it can be quoted for FTS5 as it is."""
    with pytest.raises(ValueError, match="token pattern"):
        TokenPattern(text)


def test_clause_needs_phrases():
    """A clause without phrases is refused."""
    with pytest.raises(ValueError, match="at least one phrase"):
        Clause(())


def test_query_built_by_hand_matches():
    """A query built from the normal form directly is matched like a parsed one."""
    query = Query(
        (Clause((Phrase((TokenPattern("docker"), TokenPattern("comp", prefix=True))),)),),
        (Phrase((TokenPattern("helm"),)),),
    )
    assert query.matches(Document.from_text("docker-compose up"))
    assert not query.matches(Document.from_text("docker compose helm"))


def test_phrase_properties():
    """``Phrase.tokens`` and ``Phrase.prefix`` describe the FTS5 string."""
    (phrase,) = parse_query("docker-comp*").phrases()
    assert phrase.tokens == ("docker", "comp")
    assert phrase.prefix


def test_document_from_tokens_matches_from_text():
    """A document rebuilt from a stored token stream equals one built from the text."""
    text = "修改youer服务端"
    assert Document.from_tokens(" ".join(Document.from_text(text).tokens).split()) == (
        Document.from_text(text)
    )
    assert len(Document.from_text(text)) == 6


def test_document_positions():
    """A document maps each token to its positions."""
    assert Document.from_text("a b a").positions == {"a": [0, 2], "b": [1]}


# -- match spans -----------------------------------------------------------------------------------


def test_match_spans_of_words():
    """Spans cover the matched words in the original text."""
    assert match_spans(parse_query("docker"), "Run Docker, docker!") == [(4, 10), (12, 18)]


def test_match_spans_of_a_one_character_cjk_query():
    """A one-character CJK match covers that character only."""
    assert match_spans(parse_query("书"), "飞书机器人 书") == [(1, 2), (6, 7)]


def test_match_spans_of_a_cjk_substring():
    """A CJK substring match covers exactly its characters."""
    assert match_spans(parse_query("机器人"), "飞书机器人") == [(2, 5)]


def test_match_spans_merge_overlaps():
    """Overlapping and touching matches merge into one span."""
    assert match_spans(parse_query("飞书 书机"), "飞书机器人") == [(0, 3)]


def test_match_spans_absorb_contained_matches():
    """A match inside another adds nothing."""
    assert match_spans(parse_query("飞书机器 书机"), "飞书机器人") == [(0, 4)]


def test_match_spans_of_a_prefix_cover_the_word():
    """A Latin prefix match covers the whole word."""
    assert match_spans(parse_query("dock*"), "a Dockerfile") == [(2, 12)]


def test_match_spans_of_a_phrase():
    """A phrase match spans from its first to its last token."""
    assert match_spans(parse_query('"docker compose"'), "docker-compose up") == [(0, 14)]


def test_match_spans_ignore_exclusions():
    """Excluded phrases are not highlighted."""
    assert match_spans(parse_query("a -b"), "a b") == [(0, 1)]


def test_match_spans_of_an_empty_query():
    """An empty query highlights nothing."""
    assert match_spans(parse_query("-a"), "a") == []
