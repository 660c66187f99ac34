"""The conformance suite fails backends that break the contract (it asserts something)."""

from __future__ import annotations

import textwrap

import pytest

BROKEN = {
    "non-idempotent-append": (
        """
        def append_messages(self, session_id, messages, *, touch_at=None):
            plain = [attrs.evolve(m, platform_message_id=None) for m in messages]
            return super().append_messages(session_id, plain, touch_at=touch_at)
        """,
        "platform_id or batch or redelivered or soft_deleted",
        ["test_repeated_platform_id_is_stored_once", "test_duplicates_within_one_batch"],
    ),
    "no-compare-and-swap": (
        """
        def put_entry(self, entry, *, expected_revision):
            current = self.get_entry(entry.session_key)
            actual = None if current is None else current.revision
            return super().put_entry(entry, expected_revision=actual)
        """,
        "revision or compare",
        ["test_stale_revision_conflicts_and_writes_nothing"],
    ),
    "last-end-reason-wins": (
        """
        def end_session(self, session_id, reason, *, at):
            self.reopen_session(session_id)
            return super().end_session(session_id, reason, at=at)
        """,
        "first_end_reason or plan_end",
        ["test_first_end_reason_wins", "test_plan_end_keeps_the_first_reason"],
    ),
    "substring-latin-search": (
        """
        def search(self, query):
            hits = super().search(attrs.evolve(query, text=query.text + "*"))
            return hits
        """,
        "latin",
        ["test_latin_terms_match_whole_tokens"],
    ),
    "nfkc-folded-query": (
        """
        def search(self, query):
            import unicodedata
            folded = unicodedata.normalize("NFKC", query.text)
            return super().search(attrs.evolve(query, text=folded))
        """,
        "only_width",
        ["test_only_width_is_folded"],
    ),
    "spans-of-the-folded-text": (
        """
        def search(self, query):
            from hermes_sessions import text
            parsed = text.parse_query(query.text)
            return [
                attrs.evolve(
                    hit,
                    spans=tuple(
                        text.match_spans(
                            parsed, text.fold_width(text.searchable_text(hit.message))
                        )
                    ),
                )
                for hit in super().search(query)
            ]
        """,
        "original_text",
        ["test_offsets_refer_to_the_original_text"],
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_suite_fails_a_broken_backend(pytester: pytest.Pytester, name: str) -> None:
    """A backend with one deliberate bug fails the tests that state the broken guarantee."""
    override, selection, must_fail = BROKEN[name]
    pytester.makepyfile(
        test_broken=textwrap.dedent(
            """
            import attrs
            from hermes_sessions.backends.inmemory import InMemoryBackend
            from hermes_sessions.testing import BackendContract

            class Broken(InMemoryBackend):
            {override}

            class TestBroken(BackendContract):
                def make_backend(self, directory):
                    return Broken()
            """
        ).format(override=textwrap.indent(textwrap.dedent(override), "    "))
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-k", selection)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= len(must_fail), result.stdout.str()
    for test in must_fail:
        result.stdout.fnmatch_lines([f"*FAILED*{test}*"])


def test_suite_passes_the_reference_backend(pytester: pytest.Pytester) -> None:
    """The same harness reports no failure for the unmodified in-memory backend."""
    pytester.makepyfile(
        test_reference="""
        from hermes_sessions.backends.inmemory import InMemoryBackend
        from hermes_sessions.testing import BackendContract

        class TestReference(BackendContract):
            def make_backend(self, directory):
                return InMemoryBackend()
        """
    )
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-k", "end or revision")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert outcomes["passed"] > 10
