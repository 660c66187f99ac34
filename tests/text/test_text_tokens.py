"""The tokenizer: the canonical index token stream and its offsets."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.text import Token, index_tokens, tokenize
from hermes_sessions.text import _tokens as _text_tokens
from hermes_sessions.text._width import fold_for_tokens

# Every character FTS5's ``ascii`` tokenizer would treat as a separator, and upper-case ASCII.
FTS_UNSAFE = re.compile("[\x00-\x2f\x3a-\x60\x7b-\x7f]")

MIXED = st.text(
    alphabet=st.sampled_from(
        [
            *"aZé9 _-.,:\uff0c。飞书机器かカ한ー々🚀✅™Ⓐ豈",
            *"Ａｚ９－＂\u3000ｶﾞﾟｰ",
            *"\u0301\u3099\ufe0f\ufe0e\u200d\u00ad\u1fef\u1161\u11a8",
        ]
    ),
    max_size=40,
)


def scanned_stream(text):
    """The stream as the general scanner alone produces it (no fast path)."""
    tokens, starts, ends, cjk = [], [], [], []
    for piece in _text_tokens.scan(text):
        if isinstance(piece, _text_tokens.Word):
            tokens.append(piece.text)
            starts.append(piece.start)
            ends.append(piece.end)
            cjk.append(False)
        else:
            tokens += _text_tokens.run_tokens(piece.units)
            starts += piece.starts
            ends += [*piece.ends[1:], piece.ends[-1]]
            cjk += [True] * len(piece.units)
    return tokens, starts, ends, cjk


# -- words -----------------------------------------------------------------------------------------


def test_words_are_case_folded():
    """Latin words are case-folded, so ``Docker`` and ``DOCKER`` are the token ``docker``."""
    assert index_tokens("Docker DOCKER docker") == ["docker"] * 3


def test_case_folding_is_full_unicode_folding():
    """Case folding is Unicode's: ``Straße`` becomes ``strasse``."""
    assert index_tokens("Straße") == ["strasse"]


def test_no_accent_folding():
    """Accents are kept: ``café`` and ``cafe`` are different tokens."""
    assert index_tokens("café cafe") == ["café", "cafe"]


def test_words_are_nfc_normalised():
    """A decomposed accent gives the same token as the precomposed character."""
    assert index_tokens("cafe\u0301") == index_tokens("café") == ["café"]


def test_underscore_separates():
    """``_`` separates words, so ``sp_new1`` is ``sp`` then ``new1``."""
    assert index_tokens("sp_new1") == ["sp", "new1"]


def test_punctuation_separates_compounds():
    """Dots, hyphens and slashes separate: ``my-app.config.ts`` is four tokens."""
    assert index_tokens("my-app.config.ts /var/log") == ["my", "app", "config", "ts", "var", "log"]


def test_digits_are_word_characters():
    """Digits stay inside words: ``P2.2`` is ``p2`` then ``2``."""
    assert index_tokens("P2.2") == ["p2", "2"]


def test_combining_marks_stay_inside_words():
    """Combining marks are word characters, so Devanagari words are not cut at vowel signs."""
    assert index_tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]


def test_a_mark_after_a_separator_starts_a_word():
    """A combining mark with nothing before it is a word character of its own."""
    assert index_tokens("a \u0301b") == ["a", "\u0301b"]


@pytest.mark.parametrize(
    "invisible", ["\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u202e", "\x00", "\x1f"]
)
def test_control_and_zero_width_characters_separate(invisible):
    """Control, format and zero-width characters count as whitespace."""
    assert index_tokens(f"doc{invisible}ker") == ["doc", "ker"]


def test_empty_and_punctuation_only_text_has_no_tokens():
    """Text without letters, digits, CJK or symbols has no tokens."""
    assert index_tokens("") == index_tokens(" --- ,.;:!? ") == []


# -- CJK -------------------------------------------------------------------------------------------


def test_cjk_run_is_bigrams_plus_terminal_unigram():
    """A CJK run becomes overlapping bigrams and then its last character."""
    assert index_tokens("飞书机器人") == ["飞书", "书机", "机器", "器人", "人"]


def test_one_character_cjk_run_is_one_unigram():
    """A CJK run of one character is that character."""
    assert index_tokens("书") == ["书"]


def test_script_change_is_a_boundary():
    """A Latin word inside CJK text is its own token between two CJK runs."""
    assert index_tokens("修改youer服务端") == ["修改", "改", "youer", "服务", "务端", "端"]


def test_cjk_punctuation_separates_runs():
    """A full-width comma ends a CJK run."""
    assert index_tokens("飞书\uff0c机器人") == ["飞书", "书", "机器", "器人", "人"]


def test_japanese_kana_and_kanji_form_one_run():
    """Hiragana, Katakana, kanji and the long vowel mark ``ー`` are all CJK."""
    assert index_tokens("サーバー起動") == ["サー", "ーバ", "バー", "ー起", "起動", "動"]


def test_iteration_marks_are_cjk():
    """``々`` and ``〆`` belong to CJK runs."""
    assert index_tokens("時々〆") == ["時々", "々〆", "〆"]


def test_katakana_middle_dot_is_punctuation():
    """The middle dot ``・`` separates Katakana words."""
    assert index_tokens("ドナルド・トランプ")[3:5] == ["ド", "トラ"]


def test_half_width_katakana_is_cjk():
    """Half-width Katakana forms CJK runs, of its full-width forms (``test_text_width``)."""
    assert index_tokens("ｶﾀｶﾅ") == ["カタ", "タカ", "カナ", "ナ"]


def test_korean_hangul_is_cjk():
    """Hangul syllables become bigrams, and Korean spaces separate runs."""
    assert index_tokens("한국어 검색") == ["한국", "국어", "어", "검색", "색"]


def test_decomposed_hangul_composes_into_syllables():
    """Conjoining jamo of a decomposed syllable join one unit, composed by NFC."""
    assert index_tokens(unicodedata.normalize("NFD", "한국")) == ["한국", "국"]


def test_decomposed_kana_voiced_mark_composes():
    """A kana followed by a combining voiced mark is the voiced kana."""
    assert index_tokens("か\u3099く") == ["がく", "く"]


def test_compatibility_ideographs_become_unified():
    """A CJK compatibility ideograph is NFC-normalised to its unified ideograph."""
    assert index_tokens("\uf900") == [unicodedata.normalize("NFC", "\uf900")]


def test_han_extension_characters_are_cjk():
    """Han characters outside the basic block (extension B) are CJK."""
    assert index_tokens("\U00020000\U0002a700") == ["\U00020000\U0002a700", "\U0002a700"]


# -- symbols ---------------------------------------------------------------------------------------


def test_emoji_is_a_searchable_unit():
    """An emoji is a token of its own between words."""
    assert index_tokens("deploy 🚀 now") == ["deploy", "🚀", "now"]


def test_symbols_join_cjk_runs():
    """Symbols are treated like CJK characters and join adjacent CJK runs."""
    assert index_tokens("飞书🚀") == ["飞书", "书🚀", "🚀"]


def test_non_ascii_symbols_are_units():
    """``™``, ``©`` and arrows are units; ASCII symbols are punctuation."""
    assert index_tokens("Brand™ a→b $5") == ["brand", "™", "a", "→", "b", "5"]


def test_variation_selectors_are_dropped():
    """``❤️`` (with VS16) and ``❤`` give the same token."""
    assert index_tokens("❤️") == index_tokens("❤") == ["❤"]


def test_zwj_separates_emoji_of_a_sequence():
    """The parts of a ZWJ emoji sequence are separate runs."""
    assert index_tokens("👨\u200d👩\u200d👧") == ["👨", "👩", "👧"]


def test_skin_tone_modifier_is_a_unit():
    """A skin-tone modifier is a symbol unit after its emoji."""
    assert index_tokens("👍🏽") == ["👍🏽", "🏽"]


def test_symbols_are_case_folded():
    """Symbols with case mappings are case-folded like words."""
    assert index_tokens("Ⓐ") == ["ⓐ"]


def test_symbol_normalising_to_ascii_punctuation_separates():
    """U+1FEF, whose NFC form is a backtick, is punctuation."""
    assert index_tokens("a\u1fefb") == ["a", "b"]


def test_private_use_characters_are_symbols():
    """Private-use characters (icon fonts) are searchable units."""
    assert index_tokens("\ue000") == ["\ue000"]


def test_lone_surrogates_separate():
    """Lone surrogates (from undecodable bytes) are separators and never reach a token."""
    assert index_tokens("ab\udc80cd") == ["ab", "cd"]


# -- offsets ---------------------------------------------------------------------------------------


def test_tokenize_gives_offsets_into_the_original_text():
    """Token offsets index the original text, even where normalisation changed the token."""
    text = "Cafe\u0301 飞书"
    assert tokenize(text) == [
        Token("café", 0, 5, "word"),
        Token("飞书", 6, 8, "cjk"),
        Token("书", 7, 8, "cjk"),
    ]


def test_variation_selector_inside_a_word_is_transparent():
    """A variation selector between word characters neither splits nor shows in the word."""
    assert index_tokens("9\ufe0f9 a\ufe0fb") == ["99", "ab"]


def test_variation_selector_extends_the_offsets_of_what_it_follows():
    """A variation selector belongs to the span of the unit or word before it."""
    assert [(t.start, t.end) for t in tokenize("❤️x")] == [(0, 2), (2, 3)]
    assert [(t.start, t.end) for t in tokenize("a\ufe0f飞")] == [(0, 2), (2, 3)]


def test_ascii_text_offsets():
    """ASCII text keeps exact offsets."""
    assert [(t.text, t.start, t.end) for t in tokenize("Hi, you")] == [
        ("hi", 0, 2),
        ("you", 4, 7),
    ]


# -- properties ------------------------------------------------------------------------------------


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=200))
def test_tokens_are_always_fts5_safe(text):
    """Tokens are never empty and never hold ASCII punctuation, spaces or upper case."""
    for token in index_tokens(text):
        assert token
        assert FTS_UNSAFE.search(token) is None
        token.encode()  # no lone surrogates: storable as UTF-8


@settings(deadline=None, max_examples=300)
@given(st.one_of(MIXED, st.text(max_size=80)))
def test_tokenize_agrees_with_index_tokens(text):
    """``tokenize`` gives the same texts as ``index_tokens``, with sane ascending offsets."""
    tokens = tokenize(text)
    assert [token.text for token in tokens] == index_tokens(text)
    for token in tokens:
        assert 0 <= token.start < token.end <= len(text)
    assert [token.start for token in tokens] == sorted(token.start for token in tokens)


@settings(deadline=None, max_examples=400)
@given(st.one_of(MIXED, st.text(max_size=80)))
def test_fast_path_agrees_with_general_scanner(text):
    """The fast path produces exactly the stream (and offsets) the general scanner does."""
    text = fold_for_tokens(text)[0]  # both run on folded text (test_text_width covers folding)
    tokens, starts, ends, cjk = scanned_stream(text)
    assert index_tokens(text) == tokens
    assert tuple(_text_tokens.stream(text)) == (tokens, starts, ends, cjk)


def test_fast_symbols_are_normalised_symbols():
    """Every character the fast path treats as a symbol is one the scanner treats so, unchanged."""
    pattern = re.compile(f"[{_text_tokens._FAST_SYMBOLS}]")
    for code in range(0x80, 0x20000):
        char = chr(code)
        if pattern.match(char):
            assert _text_tokens.classify(char) == _text_tokens._SYMBOL, hex(code)
            assert _text_tokens._normalise(char) == char, hex(code)


def test_word_marks_are_combining_marks():
    """The marks the scanner's word branch takes along are all combining marks."""
    pattern = re.compile(f"[{_text_tokens._WORD_MARKS}]")
    for code in range(0x80, 0x10000):
        if pattern.match(chr(code)):
            assert _text_tokens.classify(chr(code)) == _text_tokens._MARK, hex(code)


def test_only_listed_symbols_normalise_to_ascii():
    """No symbol but those listed normalises to ASCII (which would corrupt the stream)."""
    for code in range(0x80, 0x110000):
        char = chr(code)
        if unicodedata.category(char)[0] == "S" and char not in _text_tokens._ASCII_SYMBOLS:
            normal = _text_tokens._normalise(char)
            assert normal, hex(code)
            assert FTS_UNSAFE.search(normal) is None, hex(code)


def test_cjk_characters_need_no_case_folding():
    """Case folding leaves every CJK character unchanged (the fast path skips it)."""
    pattern = re.compile(f"[{_text_tokens._CJK_CLASS}]")
    for code in range(0x80, 0x30000):
        char = chr(code)
        if pattern.match(char):
            assert char.casefold() == char, hex(code)
