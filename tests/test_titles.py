"""Titles: sanitising and lineage numbering (DESIGN §5.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import InvalidTitleError, next_title_in_lineage, sanitize_title, title_key


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("my project", "my project"),
        ("  padded  ", "padded"),
        ("tab\there", "tab here"),
        ("line\r\nbreak", "line break"),
        ("bell\x07s", "bells"),
        ("del\x7fete", "delete"),
        ("zero\u200bwidth", "zerowidth"),
        ("bidi\u202eoverride\u202c", "bidioverride"),
        ("isolate\u2066d\u2069", "isolated"),
        ("bom\ufeff", "bom"),
        ("obj\ufffcect", "object"),
        ("anno\ufff9tation\ufffb", "annotation"),
        ("many    spaces", "many spaces"),
        ("项目规划", "项目规划"),
        ("line\u2028sep", "linesep"),
    ],
)
def test_sanitize_cleans(raw, clean):
    """Controls become spaces or vanish, invisible characters vanish, whitespace collapses."""
    assert sanitize_title(raw) == clean


@pytest.mark.parametrize("raw", [None, "", "   ", "\u200b\u200c", "\t\n"])
def test_sanitize_empty_means_no_title(raw):
    """A title with nothing visible left is no title at all."""
    assert sanitize_title(raw) is None


def test_sanitize_refuses_more_than_100_characters():
    """Over 100 characters after cleaning is an InvalidTitleError (a ValueError)."""
    assert sanitize_title("x" * 100) == "x" * 100
    assert sanitize_title("x" * 100 + "\u200b" * 10) == "x" * 100
    with pytest.raises(InvalidTitleError) as info:
        sanitize_title("x" * 101)
    assert isinstance(info.value, ValueError)
    assert "100" in str(info.value)


def test_sanitize_rejects_non_strings():
    """A title must be text."""
    with pytest.raises(TypeError):
        sanitize_title(42)  # type: ignore[arg-type]


def test_title_key_folds_case_and_normalises():
    """Titles compare after NFC normalisation and case folding."""
    assert title_key("Café") == title_key("CAFE\u0301")
    assert title_key("Straße") == title_key("STRASSE")


@pytest.mark.parametrize(
    ("title", "existing", "expected"),
    [
        ("my project", set(), "my project"),
        ("my project", {"my project"}, "my project #2"),
        ("my project", {"my project", "my project #2"}, "my project #3"),
        ("my project #2", {"my project", "my project #2"}, "my project #3"),
        ("my project", {"my project", "my project #7", "other #9"}, "my project #8"),
        ("my project", {"My Project", "MY PROJECT #4"}, "my project #5"),
        ("my project", {"my project #3"}, "my project #4"),
        ("100% done_", {"100% done_"}, "100% done_ #2"),
        ("100% done_", {"100x done-"}, "100% done_"),
        ("项目规划", {"项目规划"}, "项目规划 #2"),
        ("a #b", {"a #b"}, "a #b #2"),
    ],
)
def test_next_title_in_lineage(title, existing, expected):
    """The next title continues the numbering of the lineage's highest member."""
    assert next_title_in_lineage(title, existing) == expected


def test_wildcards_are_literal():
    """``%`` and ``_`` in titles are plain characters, never patterns."""
    assert next_title_in_lineage("a_c", {"abc", "a%c"}) == "a_c"


clean_titles = st.text(min_size=1, max_size=90).map(sanitize_title).filter(bool)


@given(st.text(max_size=300))
def test_sanitize_is_idempotent_and_bounded(raw):
    """Sanitising twice changes nothing, and a result never exceeds 100 characters."""
    try:
        clean = sanitize_title(raw)
    except InvalidTitleError:
        return
    assert sanitize_title(clean) == clean
    if clean is not None:
        assert len(clean) <= 100
        assert clean == clean.strip()
        assert "  " not in clean


@given(clean_titles, st.sets(clean_titles, max_size=6))
def test_next_title_is_never_taken(title, existing):
    """The title proposed for a lineage is never one that already exists (after folding)."""
    proposed = next_title_in_lineage(title, existing)
    assert title_key(proposed) not in {title_key(t) for t in existing} or (
        proposed == title and title_key(title) not in {title_key(t) for t in existing}
    )
