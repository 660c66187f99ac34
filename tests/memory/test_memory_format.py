"""The memory-file format, pure: parsing, rendering, usage, drift and matching."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions.memory import ENTRY_DELIMITER, entries_usage, parse_entries, render_entries
from hermes_sessions.memory._format import drift_reason, find_entry


def test_parse_splits_on_the_full_delimiter_only():
    """Entries split on a line holding only '§'; a '§' inside a line or an entry stays."""
    text = "price § 5\nsecond line\n§\n§ leading sign\n§\nlast §"
    assert parse_entries(text) == ("price § 5\nsecond line", "§ leading sign", "last §")


def test_parse_strips_drops_empty_and_duplicate_entries():
    """Entries are stripped; empty ones and exact duplicates (the later copy) are dropped."""
    text = "  one  \n§\n\n§\n   \n§\ntwo\n§\none\n§\nOne"
    assert parse_entries(text) == ("one", "two", "One")


def test_parse_ignores_editor_artefacts():
    """A byte-order mark and CRLF line endings do not change the entries."""
    assert parse_entries("\ufeffa\r\n§\r\nb\rc") == ("a", "b\nc")


def test_render_joins_without_trailing_newline():
    """A file is its entries joined by the delimiter, nothing more."""
    assert render_entries(["a", "b"]) == "a\n§\nb"
    assert ENTRY_DELIMITER == "\n§\n"


def test_usage_counts_the_delimiters():
    """Usage is the length of the entries joined by the three-character delimiter."""
    assert entries_usage([]) == 0
    assert entries_usage(["abcd"]) == 4
    assert entries_usage(["abcd", "efgh"]) == 11
    assert entries_usage(["中文", "한국어"]) == 8


valid_entry = st.text(min_size=1, max_size=40).filter(
    lambda s: (
        s == s.strip() and "\r" not in s and not s.startswith("\ufeff") and "§" not in s.split("\n")
    )
)


@settings(deadline=None, max_examples=200)
@given(st.lists(valid_entry, unique=True, max_size=8))
def test_valid_entries_round_trip(entries):
    """Any list of clean, distinct entries renders to a file that parses back to it."""
    rendered = render_entries(entries)
    assert parse_entries(rendered) == tuple(entries)
    assert drift_reason(rendered.encode("utf-8"), 10_000) is None


@settings(deadline=None, max_examples=200)
@given(st.text(max_size=200))
def test_parsing_is_idempotent(text):
    """Parsing what was rendered from a parse changes nothing, whatever the input."""
    entries = parse_entries(text)
    assert parse_entries(render_entries(entries)) == entries


def test_several_identical_matches_take_the_first():
    """When every match is the same text, the first one is the match."""
    assert find_entry(["no", "same x", "same x", "other"], "x", "memory", "remove") == 1
