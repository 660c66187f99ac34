"""Contract: the natural search mode ranks sessions alike on every backend, under the same rules."""

from __future__ import annotations

from hermes_sessions.queries import Visibility
from hermes_sessions.store import SessionStore
from hermes_sessions.testing._support import ContractBase, SearchableBackend, say, seed


def _story(backend: SearchableBackend) -> None:
    """Three sessions: the answer spread over two messages, and two that share its words."""
    seed(
        backend,
        "oom",
        None,
        say("The api container keeps restarting on staging"),
        say("It was OOM killed; we raised the memory limit", role="assistant"),
        user_id="me",
    )
    seed(backend, "net", None, say("Two docker containers cannot reach each other"), user_id="me")
    seed(backend, "docs", None, say("The docs site deployment is stale"), user_id="me")


class NaturalSearchContract(ContractBase):
    """search(mode="natural"): questions find sessions; weak or hidden ones are not offered."""

    def ask(self, backend: SearchableBackend, question: str, **filters: object) -> list[str]:
        """The ids of the confident matches for ``question``."""
        found = SessionStore(backend).search(question, mode="natural", **filters)  # type: ignore[call-overload]
        return [match.session.id for match in found if match.confident]

    def test_word_forms_and_words_spread_over_messages(self, searchable: SearchableBackend) -> None:
        """Other forms of the words count, in different messages of one session."""
        _story(searchable)
        assert self.ask(searchable, "why were the containers restarted? memory kill?") == ["oom"]
        match, *others = SessionStore(searchable).search(
            "containers restarted memory", mode="natural"
        )
        assert match.session.id == "oom"
        assert not any(other.confident for other in others)  # "net" holds only "containers"
        assert match.matched == "all words"
        assert match.confident
        assert match.coverage == 1.0
        assert {m.message.id for m in match.messages} == {1, 2}
        assert any(">>>container<<<" in m.snippet for m in match.messages)

    def test_cjk_question_with_function_words(self, searchable: SearchableBackend) -> None:
        """A Chinese question's filler words do not count against the session holding its terms."""
        seed(searchable, "zh", None, say("飞书机器人的证书过期了，回调失败"))
        seed(searchable, "zh2", None, say("机器学习的模型"))
        assert self.ask(searchable, "上周飞书机器人为什么回调失败了？") == ["zh"]

    def test_questions_without_an_answer_find_nothing_confident(
        self, searchable: SearchableBackend
    ) -> None:
        """A question naming what no session holds gets no confident match."""
        _story(searchable)
        assert self.ask(searchable, "how did we configure kafka consumer lag alerts") == []
        assert self.ask(searchable, "what did we say about it?") == []

    def test_the_same_access_rules_apply(self, searchable: SearchableBackend) -> None:
        """visible_to, excluded sessions and inactive messages bound the natural mode too."""
        _story(searchable)
        seed(searchable, "theirs", None, say("api container OOM killed, memory limit"), user_id="x")
        seed(searchable, "gone", None, say("api container OOM killed", active=False))
        rule = Visibility(session_key=None, platform="telegram", user_id="me")
        question = "api container oom killed memory limit"
        assert self.ask(searchable, question, visible_to=rule) == ["oom"]
        assert "theirs" in self.ask(searchable, question)
        assert "gone" not in self.ask(searchable, question, include_inactive=False)
        assert self.ask(searchable, question, visible_to=rule, exclude_session_ids=("oom",)) == []

    def test_limit_counts_sessions(self, searchable: SearchableBackend) -> None:
        """Limit and offset page through sessions, not messages."""
        for number in range(4):
            seed(searchable, f"s{number}", None, say("mango harvest"), say("mango prices"))
        store = SessionStore(searchable)
        first = store.search("mango harvest", mode="natural", limit=2)
        second = store.search("mango harvest", mode="natural", limit=2, offset=2)
        ids = [m.session.id for m in first + second]
        assert len(first) == 2
        assert sorted(ids) == ["s0", "s1", "s2", "s3"]
