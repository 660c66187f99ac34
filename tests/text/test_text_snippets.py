"""Snippets from the original text: the window, the marks, the ellipses and the spans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.text import Snippet, make_snippet, parse_query

LONG = " ".join(f"w{index}" for index in range(100))


# -- snippets --------------------------------------------------------------------------------------


def test_snippet_marks_the_match():
    """A short text is returned whole with the match between the default marks."""
    snippet = make_snippet("we use Docker here", parse_query("docker"))
    assert snippet == Snippet("we use >>>Docker<<< here", 0, 18, ((7, 13),))


def test_snippet_marks_are_configurable():
    """Hosts choose their own marks and ellipsis."""
    snippet = make_snippet(
        LONG, parse_query("w50"), start_mark="<b>", end_mark="</b>", ellipsis="…", max_tokens=3
    )
    assert snippet.text == "…w49 <b>w50</b> w51…"


def test_snippet_spans_point_into_the_original_text():
    """Span offsets index the original text, not the snippet."""
    text = "Ich habe CAFÉ bestellt, cafe\u0301 ist gut"
    snippet = make_snippet(text, parse_query("café"))
    assert [text[start:end] for start, end in snippet.spans] == ["CAFÉ", "cafe\u0301"]
    assert text[snippet.start : snippet.end] == text


def test_snippet_is_about_max_tokens_around_the_match():
    """The excerpt holds ``max_tokens`` tokens around the match, with ellipses at both cuts."""
    snippet = make_snippet(LONG, parse_query("w50"), max_tokens=5)
    assert snippet.text == "...w48 w49 >>>w50<<< w51 w52..."
    assert LONG[snippet.start : snippet.end] == "w48 w49 w50 w51 w52"


def test_snippet_default_is_forty_tokens():
    """By default about 40 tokens are kept."""
    snippet = make_snippet(LONG, parse_query("w50"))
    assert len(LONG[snippet.start : snippet.end].split()) == 40


def test_snippet_counts_each_cjk_character_as_a_token():
    """One CJK character counts as one token."""
    text = "一二三四五六七八九十" * 5 + "飞书" + "一二三四五六七八九十" * 5
    snippet = make_snippet(text, parse_query("飞书"), max_tokens=6)
    assert snippet.text == "...九十>>>飞书<<<一二..."


def test_snippet_at_the_start_has_no_leading_ellipsis():
    """A window at the start of the text is not prefixed with an ellipsis."""
    snippet = make_snippet(LONG, parse_query("w0"), max_tokens=3)
    assert snippet.text == ">>>w0<<< w1 w2..."


def test_snippet_at_the_end_has_no_trailing_ellipsis():
    """A window reaching the end of the text keeps the end, without an ellipsis."""
    snippet = make_snippet(LONG + "!", parse_query("w99"), max_tokens=3)
    assert snippet.text == "...w97 w98 >>>w99<<<!"


def test_snippet_merges_overlapping_matches():
    """Overlapping matches are marked once."""
    snippet = make_snippet("飞书机器人", parse_query("飞书机 书机器"))
    assert snippet.text == ">>>飞书机器<<<人"
    assert snippet.spans == ((0, 4),)


def test_snippet_prefers_the_window_with_most_matches():
    """The window covers the densest group of matches."""
    text = "alpha " + "x " * 50 + "alpha beta alpha " + "y " * 50
    snippet = make_snippet(text, parse_query("alpha OR beta"), max_tokens=5)
    assert snippet.text.count(">>>") == 3


def test_snippet_without_match_is_a_leading_excerpt():
    """A text without a match gives its beginning, no marks."""
    snippet = make_snippet(LONG, parse_query("absent"), max_tokens=3)
    assert snippet == Snippet("w0 w1 w2...", 0, 8, ())


def test_snippet_with_an_empty_query_is_a_leading_excerpt():
    """An empty query gives the leading excerpt."""
    assert make_snippet("a b c", parse_query("-a"), max_tokens=2).text == "a b..."


def test_snippet_of_empty_text():
    """Empty text gives an empty snippet."""
    assert make_snippet("", parse_query("a")) == Snippet("", 0, 0, ())


def test_snippet_of_text_without_tokens_is_cut_by_characters():
    """Text with nothing searchable is cut after ``max_tokens`` characters."""
    assert make_snippet("-" * 100, parse_query("a"), max_tokens=5).text == "-----..."


def test_snippet_trims_whitespace_at_the_cuts():
    """The excerpt does not start or end with whitespace, and no ellipsis stands for it."""
    snippet = make_snippet("\n\n  hello world  \n", parse_query("hello"))
    assert snippet.text == ">>>hello<<< world"
    assert (snippet.start, snippet.end) == (4, 15)


def test_snippet_reports_matches_outside_the_excerpt():
    """``spans`` lists every match of the text, also those outside the excerpt."""
    snippet = make_snippet(LONG + " w0", parse_query("w0"), max_tokens=3)
    assert len(snippet.spans) == 2
    assert snippet.text.count(">>>") == 1


def test_snippet_clips_a_match_longer_than_the_window():
    """A phrase longer than the window is marked as far as the window goes."""
    snippet = make_snippet("a b c d e f", parse_query('"b c d e"'), max_tokens=2)
    assert snippet.text == "...>>>b c<<<..."


def test_snippet_rejects_max_tokens_below_one():
    """``max_tokens`` must be at least 1."""
    with pytest.raises(ValueError, match="max_tokens"):
        make_snippet("a", parse_query("a"), max_tokens=0)


@settings(deadline=None, max_examples=200)
@given(
    st.text(alphabet=st.sampled_from(list("ab 飞书🚀-\n")), max_size=80),
    st.sampled_from(["a", "飞", "书🚀", '"a b"', "b*"]),
    st.integers(1, 10),
)
def test_snippet_text_is_the_marked_excerpt(text, query, max_tokens):
    """Removing the marks and ellipses from a snippet gives the excerpt of the original."""
    snippet = make_snippet(text, parse_query(query), start_mark="[", end_mark="]", ellipsis="~")
    assert 0 <= snippet.start <= snippet.end <= len(text)
    plain = snippet.text.replace("[", "").replace("]", "").strip("~")
    assert plain == text[snippet.start : snippet.end]
    snippet = make_snippet(text, parse_query(query), max_tokens=max_tokens)
    assert all(text[start:end].strip() for start, end in snippet.spans)
