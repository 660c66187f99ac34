"""Width folding: each rule, what it leaves alone, the query, and offsets into the original."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.text import (
    MAX_QUERY_LENGTH,
    _tokens,
    _width,
    fold_width,
    index_tokens,
    make_snippet,
    match_spans,
    parse_query,
    tokenize,
)

VARIANTS = [
    "\u3000",
    *map(chr, range(0xFF01, 0xFF5F)),
    *map(chr, range(0xFF61, 0xFFA0)),
]


# -- the rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", range(0xFF01, 0xFF5F))
def test_fullwidth_ascii_becomes_ascii(code):
    """Every character U+FF01 to U+FF5E becomes the ASCII character 0xFEE0 below it."""
    assert fold_width(chr(code)) == chr(code - 0xFEE0)


def test_ideographic_space_becomes_a_space():
    """U+3000 becomes an ASCII space."""
    assert fold_width("飞书\u3000机器人") == "飞书 机器人"


@pytest.mark.parametrize(
    ("half", "full"),
    [
        ("ｱｲｳｴｵ", "アイウエオ"),
        ("ｦｧｨｩｪｫｬｭｮｯ", "ヲァィゥェォャュョッ"),
        ("ｰ", "ー"),
        ("ﾝ", "ン"),
        ("｡｢｣､･", "。「」、・"),
    ],
)
def test_half_width_katakana_becomes_full_width(half, full):
    """Half-width katakana, its long vowel mark and its punctuation take their full-width forms."""
    assert fold_width(half) == full


def test_every_half_width_katakana_has_its_full_width_form():
    """Each character U+FF61 to U+FF9D folds to the full-width character Unicode names for it."""
    for code in range(0xFF61, 0xFF9E):
        kind, target = unicodedata.decomposition(chr(code)).split()
        assert kind == "<narrow>", hex(code)
        assert fold_width(chr(code)) == chr(int(target, 16)), hex(code)


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("ｶﾞ", "ガ"),
        ("ﾊﾟ", "パ"),
        ("ｳﾞ", "ヴ"),
        ("ﾜﾞ", "ヷ"),
        ("ｶﾞｲﾄﾞ", "ガイド"),
        ("かﾞ", "が"),  # a full-width kana takes a half-width mark too
        ("カﾟ", "カ゜"),  # no カ with a semi-voiced mark in Unicode
    ],
)
def test_voiced_marks_compose_with_the_kana_before(text, folded):
    """A half-width voiced or semi-voiced mark composes with the kana before it when it can."""
    assert fold_width(text) == folded
    assert unicodedata.is_normalized("NFC", fold_width(text))


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("ﾞ", "゛"),
        ("ﾟ", "゜"),
        ("ｱﾞ", "ア゛"),
        ("aﾞ", "a゛"),
        ("ｶﾞﾞ", "ガ゛"),
        ("ｶ ﾞ", "カ ゛"),
    ],
)
def test_marks_that_cannot_compose_become_spacing_marks(text, folded):
    """A mark with nothing to compose with becomes the full-width spacing mark."""
    assert fold_width(text) == folded


@pytest.mark.parametrize(
    "text",
    [
        "①②",  # circled digits: compatibility, not width
        "x²",  # superscripts
        "㍿",  # a square CJK abbreviation
        "ﬁle",  # a ligature (case folding deals with it, not width folding)
        "ﾡﾢ",  # half-width Hangul
        "￥￦￠",  # full-width signs outside U+FF01 to U+FF5E
        "｟｠",  # white parentheses U+FF5F, U+FF60
        "café cafe\u0301",  # accents
        "DOCKER",  # case
        "カ\u3099",  # a combining voiced mark that was never half-width
    ],
)
def test_nothing_but_width_is_folded(text):
    """Compatibility characters, ligatures, case and accents are left as they are."""
    assert fold_width(text) == text


def test_ligatures_follow_case_folding():
    """``ﬁ`` is found as ``fi`` through case folding, as before width folding existed."""
    assert index_tokens("ﬁle") == ["file"]


@pytest.mark.parametrize(("text", "token"), [("①", "①"), ("x²", "x²"), ("㍿", "㍿")])
def test_compatibility_characters_keep_their_tokens(text, token):
    """No general NFKC: ``①`` is not ``1``, ``²`` not ``2``, ``㍿`` not ``株式会社``."""
    assert index_tokens(text)[0] == token


def test_accents_are_still_not_folded():
    """Full-width folding does not bring accent folding with it."""
    assert index_tokens("ｃａｆé") == ["café"]


# -- tokens ----------------------------------------------------------------------------------------


def test_fullwidth_words_are_ascii_words():
    """Full-width letters and digits are the ASCII words they look like, case-folded."""
    assert index_tokens("ＤＯＣＫＥＲ ｄｏｃｋｅｒ Ｐ２．２") == ["docker", "docker", "p2", "2"]


def test_fullwidth_symbols_become_separators():
    """Full-width plus and tilde were symbol units; folded to ASCII they separate."""
    assert index_tokens("ａ＋ｂ １～３") == index_tokens("a+b 1~3") == ["a", "b", "1", "3"]


def test_half_width_katakana_tokens_are_full_width_tokens():
    """``ｶﾞｲﾄﾞ`` is indexed exactly as ``ガイド``."""
    assert index_tokens("ｶﾞｲﾄﾞ") == index_tokens("ガイド") == ["ガイ", "イド", "ド"]


def test_offsets_refer_to_the_original_text():
    """A composed unit spans both of its original characters; letters keep their places."""
    tokens = [(t.text, t.start, t.end) for t in tokenize("ＡＰＩ ｶﾞｲﾄﾞ")]
    assert tokens == [("api", 0, 3), ("ガイ", 4, 7), ("イド", 6, 9), ("ド", 7, 9)]


def test_match_spans_and_snippets_mark_the_original_text():
    """Highlighting marks the characters as written, not their folded forms."""
    text = "see the ｶﾞｲﾄﾞ for ＡＰＩ v2"
    assert match_spans(parse_query("ガイド api"), text) == [(8, 13), (18, 21)]
    snippet = make_snippet(text, parse_query("ガイド"))
    assert snippet.text == "see the >>>ｶﾞｲﾄﾞ<<< for ＡＰＩ v2"


def test_punctuation_the_tokenizer_skips_folds_to_no_other_tokens():
    """Variants outside the tokenizer's trigger set give the same tokens folded or not."""
    for char in VARIANTS:
        if _width._TOKEN_VARIANT_RUN.match(char) is None:
            for text in (f"a{char}b", f"飞{char}书", f"🚀{char}x"):
                assert index_tokens(text) == index_tokens(fold_width(text)), hex(ord(char))


# -- the query -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("ｄｏｃｋｅｒ ＡＮＤ ｓｔａｇｉｎｇ", "docker AND staging"),
        ("ｄｏｃｋｅｒ ＯＲ ｐｏｄｍａｎ", "docker OR podman"),
        ("ｄｏｃｋｅｒ ＮＯＴ ｈｅｌｍ", "docker NOT helm"),
        ("ｄｏｃｋｅｒ　－ｈｅｌｍ", "docker -helm"),
        ("＂ｄｏｃｋｅｒ ｃｏｍｐｏｓｅ＂", '"docker compose"'),
        ("ｄｏｃｋ＊", "dock*"),
        ("ｄｏｃｋｅｒ－ｃｏｍｐｏｓｅ", "docker-compose"),
        ("ｃｏｎｔｅｎｔ：ｆｏｏ", "content:foo"),
        ("ｶﾞｲﾄﾞ", "ガイド"),
    ],
)
def test_the_query_is_folded_before_it_is_parsed(written, plain):
    """Full-width operators, quotes, minus signs and stars act as their ASCII forms."""
    assert parse_query(written) == parse_query(plain)


def test_a_fullwidth_query_finds_ascii_text_and_back():
    """Folding both sides makes a full-width query and an ASCII text meet, either way round."""
    query, document = parse_query("ＤＯＣＫＥＲ－ｃｏｍｐｏｓｅ"), "run docker compose up"
    assert match_spans(query, document) == [(4, 18)]
    wide = "run ｄｏｃｋｅｒ－ｃｏｍｐｏｓｅ up"
    assert match_spans(parse_query("docker-compose"), wide) == [(4, 18)]


def test_the_query_is_cut_before_it_is_folded():
    """The length limit counts characters as written: a mark beyond it is dropped."""
    query = "x" * (MAX_QUERY_LENGTH - 2) + " ｶﾞ"
    assert parse_query(query) == parse_query("x" * (MAX_QUERY_LENGTH - 2) + " カ")


# -- properties ------------------------------------------------------------------------------------

WIDE_PIECES = st.sampled_from([*VARIANTS, *'aZ9 -_"*飞书かカガパ한ー①²ﬁé\u3099\u0301🚀', "ｶﾞ", "ﾊﾟ"])
TEXTS = st.one_of(st.lists(WIDE_PIECES, max_size=40).map("".join), st.text(max_size=60))


@settings(deadline=None, max_examples=300)
@given(TEXTS)
def test_folding_is_idempotent(text):
    """Folding a folded text changes nothing (both forms)."""
    folded = fold_width(text)
    assert fold_width(folded) == folded
    for_tokens = _width.fold_for_tokens(text)[0]
    assert _width.fold_for_tokens(for_tokens) == (for_tokens, [])


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=60).filter(lambda t: not any(c in VARIANTS for c in t)))
def test_text_without_width_variants_is_unchanged(text):
    """Text holding no width variant is returned as it is, by both forms."""
    assert fold_width(text) == text
    assert _width.fold_for_tokens(text) == (text, [])


@settings(deadline=None, max_examples=300)
@given(TEXTS)
def test_tokens_are_the_tokens_of_the_folded_text(text):
    """The tokenizer's fold gives the tokens of :func:`fold_width`, and counts what merged."""
    folded, merged = _width.fold_for_tokens(text)
    assert len(folded) == len(text) - len(merged)
    assert all(text[index] in "\uff9e\uff9f" for index in merged)
    assert index_tokens(text) == index_tokens(fold_width(text)) == index_tokens(folded)


# Widening: the inverse of folding, one plain character at a time, to build texts whose folded
# form is known along with where each plain character went.
_HALF = {
    chr(int(unicodedata.decomposition(chr(code)).split()[1], 16)): chr(code)
    for code in range(0xFF61, 0xFF9E)
}
_WIDE: dict[str, str] = {
    " ": "\u3000",
    **{chr(code): chr(code + 0xFEE0) for code in range(0x21, 0x7F)},
    **_HALF,
    **{
        unicodedata.normalize("NFC", base + mark): _HALF[base] + half_mark
        for base in _HALF
        for mark, half_mark in (("\u3099", "\uff9e"), ("\u309a", "\uff9f"))
        if len(unicodedata.normalize("NFC", base + mark)) == 1
    },
}
PLAIN = st.text(
    st.sampled_from([*'abc1 -_.:"', *"飞书アカガパヴー・。", *"①🚀é"]), min_size=1, max_size=30
)


def widen(plain: str, choices: list[bool]) -> tuple[str, list[int]]:
    """Widen the chosen characters; return the text and where each plain character starts."""
    pieces, starts, position = [], [], 0
    for char, wide in zip(plain, choices, strict=False):
        piece = _WIDE.get(char, char) if wide else char
        starts.append(position)
        pieces.append(piece)
        position += len(piece)
    starts.append(position)
    return "".join(pieces), starts


@settings(deadline=None, max_examples=300)
@given(PLAIN, st.lists(st.booleans(), min_size=30, max_size=30), st.data())
def test_offsets_map_back_into_the_original(plain, choices, data):
    """Tokens and match spans of a widened text are those of the plain text, at its places."""
    wide, starts = widen(plain, choices)
    assert fold_width(wide) == plain
    moved = [(t.text, starts[t.start], starts[t.end]) for t in tokenize(plain)]
    assert [(t.text, t.start, t.end) for t in tokenize(wide)] == moved
    first = data.draw(st.integers(0, len(plain) - 1))
    query = parse_query(plain[first : first + data.draw(st.integers(1, 6))])
    spans = match_spans(query, plain)
    assert match_spans(query, wide) == [(starts[start], starts[end]) for start, end in spans]
    for start, end in spans:
        assert fold_width(wide[starts[start] : starts[end]]) == plain[start:end]


@pytest.mark.parametrize(
    ("text", "version_one"),
    [  # as the library before width folding tokenized them (recorded from that version)
        ("ＡＰＩ ｶﾞｲﾄﾞ", ["ａｐｉ", "ｶﾞ", "ﾞｲ", "ｲﾄ", "ﾄﾞ", "ﾞ"]),
        (
            "ｄｏｃｋｅｒ＋ｈｅｌｍ\u3000１～３",
            ["ｄｏｃｋｅｒ", "＋", "ｈｅｌｍ", "１", "～", "３"],
        ),
    ],
)
def test_the_unfolded_stream_is_version_one(text, version_one):
    """Without the fold the tokenizer gives the version-1 stream, which old-store tests rebuild."""
    assert _tokens.folded_index_tokens(text) == version_one
    assert index_tokens(text) != version_one


def test_full_width_punctuation_alone_keeps_the_version_one_stream():
    """Text whose only variants are punctuation has the same tokens in both versions."""
    text = "plain 飞书，机器。"
    expected = ["plain", "飞书", "书", "机器", "器"]
    assert _tokens.folded_index_tokens(text) == index_tokens(text) == expected
