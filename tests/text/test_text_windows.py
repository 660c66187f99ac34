"""Bounded snippets on long texts: the same snippet as the whole text gives, found in a window."""

from __future__ import annotations

import pytest

import hermes_sessions.text._snippets as snippets
from hermes_sessions import Message, SessionSource, SessionStore
from hermes_sessions.backends.sqlite import SQLiteBackend
from hermes_sessions.text import LONG_TEXT, WINDOW, make_snippet, match_window, parse_query

FILLER = "deploy the staging container again 部署 服务端 "


def long_text(size, needle, at=0.6):
    """``size`` characters of filler with ``needle`` as a word at fraction ``at``."""
    body = (FILLER * (size // len(FILLER) + 1))[:size]
    cut = body.index(" ", int(size * at))
    return body[:cut] + f" {needle} " + body[cut:]


def whole_snippet(monkeypatch, text, query):
    """The snippet built from the whole text (the window turned off, as before)."""
    with monkeypatch.context() as patch:
        patch.setattr(snippets, "match_window", lambda _text, _query: None)
        return make_snippet(text, query)


@pytest.mark.parametrize("needle", ["zyxneedle", "部署失败了", '"needle phrase"'])
def test_a_long_text_gives_the_whole_texts_snippet(monkeypatch, needle):
    """For one match deep in a long text, the bounded snippet equals the whole-text one."""
    word = needle.strip('"')
    text = long_text(LONG_TEXT * 4, word if needle[0] != "部" else "失败了")
    query = parse_query(needle if needle[0] != "部" else "失败了")
    assert match_window(text, query) is not None
    assert make_snippet(text, query) == whole_snippet(monkeypatch, text, query)


def test_short_texts_are_handled_whole(monkeypatch):
    """Every text up to LONG_TEXT characters gives exactly the snippet it gave before."""
    for size in (0, 10, 1000, LONG_TEXT - 20):
        text = long_text(size + 20, "zyxneedle", at=0.5)[:LONG_TEXT]
        query = parse_query("zyxneedle OR staging")
        assert match_window(text, query) is None
        assert make_snippet(text, query) == whole_snippet(monkeypatch, text, query)


def test_a_match_only_in_another_normalisation_falls_back_to_the_whole_text(monkeypatch):
    """Full-width letters match after folding but not by substring: the whole text is used."""
    text = long_text(LONG_TEXT * 3, "ｚｙｘｎｅｅｄｌｅ")
    query = parse_query("zyxneedle")
    assert match_window(text, query) is None
    snippet = make_snippet(text, query)
    assert ">>>ｚｙｘｎｅｅｄｌｅ<<<" in snippet.text
    assert snippet == whole_snippet(monkeypatch, text, query)


def test_false_candidates_never_give_a_wrong_window(monkeypatch):
    """The needle inside longer words (not a match) many times, then once as a word: exact."""
    decoys = " ".join(f"pre{i}zyxneedlepost" for i in range(40))
    text = decoys + " " + long_text(LONG_TEXT * 3, "zyxneedle")
    query = parse_query("zyxneedle")
    snippet = make_snippet(text, query)
    assert snippet == whole_snippet(monkeypatch, text, query)
    assert ">>>zyxneedle<<<" in snippet.text
    no_real = decoys + " " + (FILLER * (LONG_TEXT // len(FILLER) + 2))
    assert match_window(no_real, query) is None


def test_the_window_is_bounded():
    """A confirmed window spans at most 2 * WINDOW characters plus the match and the snap."""
    text = long_text(LONG_TEXT * 10, "zyxneedle")
    start, end = match_window(text, parse_query("zyxneedle"))
    assert start <= text.index("zyxneedle") < end
    assert end - start <= 2 * WINDOW + 600


def test_a_match_deep_in_a_10_mb_message_is_found_with_its_snippet(tmp_path):
    """Search finds a word at 60 % of a 10 MB message and the snippet is around it."""
    text = long_text(10_000_000, "zyxneedle")
    with SessionStore(SQLiteBackend(tmp_path / "s.db", max_message_bytes=None)) as store:
        session_id = store.get_or_create(SessionSource(platform="cli", chat_id="a")).session_id
        store.append(session_id, Message(role="user", content=text))
        store.append(session_id, Message(role="user", content="small zyxneedle note"))
        hits = store.search("zyxneedle")
    assert sorted(len(hit.message.content) for hit in hits) == [20, len(text)]
    big = next(hit for hit in hits if len(hit.message.content) > 20)
    assert ">>>zyxneedle<<<" in big.snippet
    assert big.snippet.startswith("...")
    assert big.snippet.endswith("...")
    assert any(text[a:b] == "zyxneedle" for a, b in big.spans)


def test_a_text_without_spaces_is_cut_safely(monkeypatch):
    """CJK without spaces: cuts fall mid-text, matches by a cut are not trusted; still exact."""
    text = "服务端配置" * (LONG_TEXT // 2) + "部署失败" + "服务端配置" * (LONG_TEXT // 2)
    query = parse_query("部署失败")
    window = match_window(text, query)
    assert window is not None
    assert window[0] > 0
    assert window[1] < len(text)
    assert make_snippet(text, query) == whole_snippet(monkeypatch, text, query)
    edge = "部署失败" + "服务端配置" * LONG_TEXT
    assert make_snippet(edge, query) == whole_snippet(monkeypatch, edge, query)
