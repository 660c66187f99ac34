"""Contract: full-text search semantics and filters, identical on every backend."""

from __future__ import annotations

import pytest

from hermes_sessions.models import Message
from hermes_sessions.queries import SearchQuery, Visibility
from hermes_sessions.testing._support import (
    ContractBase,
    SearchableBackend,
    minutes,
    say,
    seed,
)

CORPUS = {
    "en1": "The network is down again, check the router",
    "en2": "Set up the net for fishing",
    "en3": "docker-compose up fails on staging",
    "en4": "Use docker compose v2, not the old binary",
    "en5": "docker部署redis失败了",
    "zh1": "修改youer服务端的配置",
    "zh2": "飞书机器人怎么接入？",
    "zh3": "机器学习的模型",
    "ja1": "東京タワーに行きました",
    "ko1": "서울에서 회의가 있습니다",
    "emoji": "Deploy finished 🚀 at noon",
    "id1": "the variable sp_new1 is unused",
    "ver": "upgrade to P2.2 please",
}


def contents(hits: list[object]) -> set[str]:
    """The message texts of a hit list."""
    return {str(hit.message.content) for hit in hits}  # type: ignore[attr-defined]


class SearchContract(ContractBase):
    """search(): the query language of DESIGN §6 and every filter."""

    @pytest.fixture
    def corpus(self, searchable: SearchableBackend) -> SearchableBackend:
        """A session ``s1`` holding the mixed-language corpus as user messages."""
        seed(searchable, "s1", None, *(say(text) for text in CORPUS.values()))
        return searchable

    def find(self, backend: SearchableBackend, text: str, **filters: object) -> set[str]:
        """The contents of every hit for ``text``."""
        query = SearchQuery(text=text, limit=None, **filters)  # type: ignore[arg-type]
        return contents(backend.search(query))  # type: ignore[arg-type]

    def test_latin_terms_match_whole_tokens(self, corpus: SearchableBackend) -> None:
        """``net`` finds the word net, not network."""
        assert self.find(corpus, "net") == {CORPUS["en2"]}

    def test_matching_ignores_case(self, corpus: SearchableBackend) -> None:
        """Latin matching is case-insensitive."""
        assert self.find(corpus, "NETWORK") == {CORPUS["en1"]}

    def test_terms_must_all_match(self, corpus: SearchableBackend) -> None:
        """Space-separated terms (or AND) must all appear."""
        assert self.find(corpus, "docker staging") == {CORPUS["en3"]}
        assert self.find(corpus, "docker AND staging") == {CORPUS["en3"]}

    def test_compound_identifiers(self, corpus: SearchableBackend) -> None:
        """``docker-compose`` matches the token sequence, with or without the hyphen."""
        assert self.find(corpus, "docker-compose") == {CORPUS["en3"], CORPUS["en4"]}
        assert self.find(corpus, "P2.2") == {CORPUS["ver"]}
        assert self.find(corpus, "new1") == {CORPUS["id1"]}
        assert self.find(corpus, "sp_new1") == {CORPUS["id1"]}

    def test_phrases_need_adjacent_tokens(self, corpus: SearchableBackend) -> None:
        """A phrase matches consecutive tokens; a CJK run between Latin words breaks it."""
        assert self.find(corpus, '"docker compose"') == {CORPUS["en3"], CORPUS["en4"]}
        assert self.find(corpus, '"docker redis"') == set()
        assert self.find(corpus, "docker redis") == {CORPUS["en5"]}

    def test_or_binds_tighter_than_and(self, corpus: SearchableBackend) -> None:
        """``a b OR c`` means a AND (b OR c)."""
        assert self.find(corpus, "docker staging OR binary") == {CORPUS["en3"], CORPUS["en4"]}
        assert self.find(corpus, "router OR fishing") == {CORPUS["en1"], CORPUS["en2"]}

    def test_not_excludes(self, corpus: SearchableBackend) -> None:
        """NOT term and -term exclude; a query with no positive term matches nothing."""
        assert self.find(corpus, "docker NOT staging") == {CORPUS["en4"], CORPUS["en5"]}
        assert self.find(corpus, "docker -staging -binary") == {CORPUS["en5"]}
        assert self.find(corpus, "NOT docker") == set()
        assert self.find(corpus, "-docker") == set()

    def test_lowercase_operators_are_words(self, corpus: SearchableBackend) -> None:
        """Lower-case and/or/not are searched as ordinary words."""
        assert self.find(corpus, "not binary") == {CORPUS["en4"]}

    def test_prefix_queries(self, corpus: SearchableBackend) -> None:
        """``term*`` matches tokens starting with term."""
        assert self.find(corpus, "netw*") == {CORPUS["en1"]}
        assert self.find(corpus, "fish*") == {CORPUS["en2"]}

    @pytest.mark.parametrize(
        ("query", "keys"),
        [
            ("机", ["zh2", "zh3"]),
            ("器", ["zh2", "zh3"]),
            ("机器", ["zh2", "zh3"]),
            ("机器人", ["zh2"]),
            ("器人怎", ["zh2"]),
            ("学习", ["zh3"]),
            ("部署", ["en5"]),
            ("置", ["zh1"]),
            ("タワー", ["ja1"]),
            ("東京", ["ja1"]),
            ("회의", ["ko1"]),
            ("서", ["ko1"]),
        ],
    )
    def test_cjk_substrings_of_any_length(
        self, corpus: SearchableBackend, query: str, keys: list[str]
    ) -> None:
        """A CJK query of 1, 2 or 3+ characters finds exactly the messages containing it."""
        assert self.find(corpus, query) == {CORPUS[k] for k in keys}

    def test_latin_inside_cjk_is_its_own_token(self, corpus: SearchableBackend) -> None:
        """``youer`` written without spaces inside Chinese text is found."""
        assert self.find(corpus, "youer") == {CORPUS["zh1"]}
        assert self.find(corpus, "redis") == {CORPUS["en5"]}

    def test_cjk_punctuation_splits_terms(self, corpus: SearchableBackend) -> None:
        """Punctuation inside a term splits it into terms that must all match."""
        assert self.find(corpus, "飞书，机器人") == {CORPUS["zh2"]}
        assert self.find(corpus, "飞书，学习") == set()

    def test_emoji_are_searchable(self, corpus: SearchableBackend) -> None:
        """An emoji finds the messages containing it."""
        assert self.find(corpus, "🚀") == {CORPUS["emoji"]}

    @pytest.mark.parametrize(
        "query",
        [
            '"unbalanced',
            "AND",
            "OR OR",
            "NOT",
            "***",
            "content:",
            "^",
            "NEAR(a b)",
            "'; DROP TABLE messages; --",
            "\x00\x01\x1f",
            "(((",
            "docker AND",
            "x" * 10_000,
            "a " * 5_000,
        ],
    )
    def test_hostile_queries_never_raise(self, corpus: SearchableBackend, query: str) -> None:
        """Malformed or hostile queries return results or nothing, never an error."""
        hits = corpus.search(SearchQuery(text=query, limit=None))
        assert isinstance(hits, list)

    def test_sql_fragments_are_plain_words(self, corpus: SearchableBackend) -> None:
        """A query that looks like SQL searches for its words, and the data survives."""
        assert self.find(corpus, "'; DROP TABLE messages; --") == set()
        assert self.find(corpus, "router' --") == {CORPUS["en1"]}
        assert self.find(corpus, "router") == {CORPUS["en1"]}

    def test_column_filters_are_not_operators(self, corpus: SearchableBackend) -> None:
        """``content:router`` searches the words content and router, both required."""
        assert self.find(corpus, "content:router") == set()
        assert self.find(corpus, "check:router") == {CORPUS["en1"]}

    # -- filters -----------------------------------------------------------------------------------

    def test_roles_default_to_user_and_assistant(self, searchable: SearchableBackend) -> None:
        """Tool and system messages are searched only when the roles allow them."""
        seed(
            searchable,
            "s1",
            None,
            say("kiwi from user"),
            say("kiwi from assistant", role="assistant"),
            say("kiwi from tool", role="tool"),
            say("kiwi from system", role="system"),
        )
        assert len(self.find(searchable, "kiwi")) == 2
        assert len(self.find(searchable, "kiwi", roles=None)) == 4
        assert self.find(searchable, "kiwi", roles=("tool",)) == {"kiwi from tool"}

    def test_tool_and_subagent_sessions_are_skipped_by_default(
        self, searchable: SearchableBackend
    ) -> None:
        """Sources tool and subagent are excluded unless asked for."""
        seed(searchable, "s1", None, say("mango here"))
        seed(searchable, "s2", None, say("mango in tool"), source="tool")
        seed(searchable, "s3", None, say("mango in subagent"), source="subagent")
        assert self.find(searchable, "mango") == {"mango here"}
        everything = self.find(searchable, "mango", exclude_sources=())
        assert len(everything) == 3
        assert self.find(searchable, "mango", sources=("tool",), exclude_sources=()) == {
            "mango in tool"
        }

    def test_soft_deleted_messages_are_hidden(self, searchable: SearchableBackend) -> None:
        """Soft-deleted messages are found only with include_inactive."""
        seed(searchable, "s1", None, say("papaya gone", active=False), say("papaya here"))
        assert self.find(searchable, "papaya") == {"papaya here"}
        assert len(self.find(searchable, "papaya", include_inactive=True)) == 2

    def test_session_filters(self, searchable: SearchableBackend) -> None:
        """session_ids, exclude_session_ids, session_key, user_id and archived all filter."""
        seed(searchable, "a", "agent:main:telegram:dm:1", say("lime a"))
        seed(searchable, "b", None, say("lime b"), user_id="u2", archived=True)
        assert self.find(searchable, "lime", session_ids=("a",)) == {"lime a"}
        assert self.find(searchable, "lime", exclude_session_ids=("a",)) == {"lime b"}
        assert self.find(searchable, "lime", session_key="agent:main:telegram:dm:1") == {"lime a"}
        assert self.find(searchable, "lime", user_id="u2") == {"lime b"}
        assert self.find(searchable, "lime", archived=False) == {"lime a"}

    def test_visibility_filter(self, searchable: SearchableBackend) -> None:
        """visible_to hides other users' sessions."""
        seed(searchable, "mine", None, say("plum mine"), user_id="me")
        seed(searchable, "theirs", None, say("plum theirs"), user_id="them")
        rule = Visibility(session_key=None, platform="telegram", user_id="me")
        assert self.find(searchable, "plum", visible_to=rule) == {"plum mine"}

    def test_time_range(self, searchable: SearchableBackend) -> None:
        """Since is inclusive and until exclusive, on message time."""
        seed(
            searchable,
            "s1",
            None,
            say("pear early", timestamp=minutes(1)),
            say("pear middle", timestamp=minutes(5)),
            say("pear late", timestamp=minutes(9)),
        )
        found = self.find(searchable, "pear", since=minutes(5), until=minutes(9))
        assert found == {"pear middle"}

    def test_order_and_paging(self, searchable: SearchableBackend) -> None:
        """newest/oldest order by message time; limit and offset page through hits."""
        seed(searchable, "s1", None, *(say(f"fig {n}", timestamp=minutes(n)) for n in range(5)))
        newest = searchable.search(SearchQuery(text="fig", order="newest", limit=2))
        assert [h.message.content for h in newest] == ["fig 4", "fig 3"]
        oldest = searchable.search(SearchQuery(text="fig", order="oldest", limit=2, offset=1))
        assert [h.message.content for h in oldest] == ["fig 1", "fig 2"]
        assert len(searchable.search(SearchQuery(text="fig", limit=None))) == 5

    def test_rank_prefers_more_relevant_messages(self, searchable: SearchableBackend) -> None:
        """Under rank order, a message dense in the term outranks one that mentions it once."""
        seed(
            searchable,
            "s1",
            None,
            say("grape " + "filler " * 40),
            say("grape grape grape harvest"),
        )
        hits = searchable.search(SearchQuery(text="grape"))
        assert hits[0].message.content == "grape grape grape harvest"
        assert hits[0].score >= hits[1].score

    def test_hits_carry_session_snippet_and_spans(self, searchable: SearchableBackend) -> None:
        """A hit has its session record, a marked snippet and match offsets."""
        seed(searchable, "s1", None, say("the quick brown fox jumps"), title="animals")
        (hit,) = searchable.search(SearchQuery(text="fox"))
        assert hit.session.id == "s1"
        assert hit.session.title == "animals"
        assert ">>>fox<<<" in hit.snippet
        assert hit.spans == ((16, 19),)
        assert isinstance(hit.message, Message)

    def test_tool_calls_and_multimodal_text_are_searchable(
        self, searchable: SearchableBackend
    ) -> None:
        """Tool names, tool-call arguments and the text parts of multimodal content match."""
        call = {"id": "c", "function": {"name": "kubectl_apply", "arguments": '{"file": "x.yaml"}'}}
        seed(
            searchable,
            "s1",
            None,
            say(None, role="assistant", tool_calls=[call]),
            say([{"type": "text", "text": "看看这张截图"}, {"type": "image_url", "image_url": {}}]),
        )
        assert len(self.find(searchable, "kubectl_apply")) == 1
        assert len(self.find(searchable, "yaml")) == 1
        assert len(self.find(searchable, "截图")) == 1

    def test_index_follows_rewrites(self, searchable: SearchableBackend) -> None:
        """Edits, deletions and transcript replacement are reflected in search at once."""
        seed(searchable, "s1", None, say("walnut"), say("almond"), say("cashew"))
        walnut, almond, cashew = searchable.get_messages("s1")
        searchable.replace_message("s1", walnut.id or 0, say("pecan"))
        searchable.delete_messages("s1", [almond.id or 0])
        assert self.find(searchable, "walnut") == set()
        assert self.find(searchable, "pecan") == {"pecan"}
        assert self.find(searchable, "almond") == set()
        searchable.replace_messages("s1", [say("hazelnut")])
        assert self.find(searchable, "cashew") == set()
        assert self.find(searchable, "hazelnut") == {"hazelnut"}
        assert cashew.content == "cashew"

    def test_deleted_sessions_leave_the_index(self, searchable: SearchableBackend) -> None:
        """Deleting a session removes its messages from search."""
        seed(searchable, "s1", None, say("chestnut"))
        searchable.delete_session("s1")
        assert self.find(searchable, "chestnut") == set()
