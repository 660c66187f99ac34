"""Contract: search folds width and only width, with offsets into the original text."""

from __future__ import annotations

import pytest

from hermes_sessions.protocols import ReindexProgress, SupportsReindex
from hermes_sessions.queries import SearchQuery
from hermes_sessions.testing._support import ContractBase, SearchableBackend, say, seed

WIDTH_CORPUS = {
    "fullwidth": "ＡＰＩ ｋｅｙ for ｄｏｃｋｅｒ－ｃｏｍｐｏｓｅ，ｖ２",
    "ascii": "rotate the api key before v2",
    "halfwidth": "ｶﾞｲﾄﾞ を読んでください",
    "katakana": "ガイドはこちら",
    "space": "飞书\u3000机器人",
    "circled": "step ① done",
    "square": "㍿ 株式会社",
    "ligature": "the ﬁle is here",
    "accent": "un café noir",
}


class WidthContract(ContractBase):
    """search(): width folding on both sides, nothing else folded, offsets as written."""

    @pytest.fixture
    def wide(self, searchable: SearchableBackend) -> SearchableBackend:
        """A session ``w1`` holding the width corpus as user messages."""
        seed(searchable, "w1", None, *(say(text) for text in WIDTH_CORPUS.values()))
        return searchable

    def found(self, backend: SearchableBackend, text: str) -> set[str]:
        """The keys of the width corpus messages that ``text`` finds."""
        found = backend.search(SearchQuery(text=text, limit=None))
        hits = {str(hit.message.content) for hit in found}
        return {key for key, value in WIDTH_CORPUS.items() if value in hits}

    @pytest.mark.parametrize(
        ("query", "keys"),
        [
            ("api key", {"fullwidth", "ascii"}),
            ("ＡＰＩ ＫＥＹ", {"fullwidth", "ascii"}),
            ("v2", {"fullwidth", "ascii"}),
            ("docker-compose", {"fullwidth"}),
            ("ガイド", {"halfwidth", "katakana"}),
            ("ｶﾞｲﾄﾞ", {"halfwidth", "katakana"}),
            ('"飞书 机器人"', {"space"}),
        ],
    )
    def test_width_variants_match_each_other(
        self, wide: SearchableBackend, query: str, keys: set[str]
    ) -> None:
        """Full-width ASCII, half-width katakana and U+3000 meet their usual forms either way."""
        assert self.found(wide, query) == keys

    @pytest.mark.parametrize(
        ("query", "keys"),
        [
            ("ａｐｉ ＯＲ ｃａｆé", {"fullwidth", "ascii", "accent"}),
            ("ａｐｉ －ｒｏｔａｔｅ", {"fullwidth"}),
            ("ａｐｉ ＮＯＴ ｒｏｔａｔｅ", {"fullwidth"}),
            ("ｄｏｃｋ＊", {"fullwidth"}),
            ("＂ｋｅｙ ｆｏｒ＂", {"fullwidth"}),
        ],
    )
    def test_fullwidth_operators_act_as_ascii(
        self, wide: SearchableBackend, query: str, keys: set[str]
    ) -> None:
        """Full-width OR, NOT, minus, star and quotes are the query operators they look like."""
        assert self.found(wide, query) == keys

    @pytest.mark.parametrize(
        ("query", "keys"),
        [
            ("1", set()),  # ① is not 1
            ("①", {"circled"}),
            ("株式会社", {"square"}),  # ㍿ is not 株式会社, only the spelled-out one matches
            ("㍿", {"square"}),
            ("file", {"ligature"}),  # case folding turns ﬁ into fi
            ("cafe", set()),  # no accent folding
        ],
    )
    def test_only_width_is_folded(
        self, wide: SearchableBackend, query: str, keys: set[str]
    ) -> None:
        """Compatibility characters stay themselves; ligatures follow case folding; no accents."""
        assert self.found(wide, query) == keys

    def test_offsets_refer_to_the_original_text(self, searchable: SearchableBackend) -> None:
        """Spans and snippet marks cover the characters as written, not their folded forms."""
        seed(searchable, "w1", None, say("read the ｶﾞｲﾄﾞ for the ＡＰＩ"))
        (hit,) = searchable.search(SearchQuery(text="ガイド api"))
        assert hit.spans == ((9, 14), (23, 26))
        assert hit.snippet == "read the >>>ｶﾞｲﾄﾞ<<< for the >>>ＡＰＩ<<<"

    def test_a_current_index_needs_no_reindex(self, wide: SearchableBackend) -> None:
        """A backend that stores tokens and was written by this version has nothing to redo."""
        if not isinstance(wide, SupportsReindex):
            pytest.skip("the backend keeps no stored index (it does not implement SupportsReindex)")
        reports: list[ReindexProgress] = []
        assert not wide.reindex_needed()
        assert wide.reindex(progress=reports.append) == 0
        assert reports == [ReindexProgress(done=len(WIDTH_CORPUS), total=len(WIDTH_CORPUS))]
        assert self.found(wide, "ｶﾞｲﾄﾞ") == {"halfwidth", "katakana"}
