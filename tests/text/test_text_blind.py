"""Blinded queries: a keyed transform of the query's tokens, rendered back as query text."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_sessions import text


def _blind(token: str) -> str:
    return (
        hashlib.sha256(token.encode())
        .hexdigest()[:12]
        .translate(str.maketrans("0123456789", "ghijklmnop"))
    )


def test_phrases_clauses_and_exclusions_keep_their_shape() -> None:
    """Every token is replaced; AND, OR, phrases and NOT stay as they were."""
    parsed = text.parse_query('deploy "docker compose" OR podman 飞书机器人 -helm')
    blinded = text.blind_query(parsed, _blind)
    assert blinded is not None
    assert [[p.tokens for p in c.phrases] for c in blinded.clauses] == [
        [tuple(map(_blind, p.tokens)) for p in c.phrases] for c in parsed.clauses
    ]
    assert [p.tokens for p in blinded.excluded] == [(_blind("helm"),)]


def test_a_prefix_has_no_blinded_form() -> None:
    """``dock*`` and a lone CJK character (a prefix of its bigrams) give None."""
    assert text.blind_query(text.parse_query("docker dock*"), _blind) is None
    assert text.blind_query(text.parse_query("部"), _blind) is None
    assert text.blind_query(text.parse_query("docker -comp*"), _blind) is None


@settings(deadline=None, max_examples=200)
@given(st.text(alphabet='ab cd-"*OR NOT飞书部署', max_size=40))
def test_query_text_reads_back_as_the_blinded_query(raw: str) -> None:
    """The rendered text of a blinded query parses to that query (what a backend receives)."""
    blinded = text.blind_query(text.parse_query(raw), _blind)
    if blinded is not None:
        assert text.parse_query(text.query_text(blinded)) == blinded


def test_matching_blinded_streams_equals_matching_plain_ones() -> None:
    """A blinded query on a blinded document matches exactly when the plain pair does."""
    document = "Deploy docker-compose 到飞书机器人, then helm"
    blinded_doc = text.Document.from_tokens([_blind(t) for t in text.index_tokens(document)])
    plain_doc = text.Document.from_text(document)
    for raw in ["docker compose", "飞书机", "compose docker", "helm -docker", "机器 OR podman"]:
        parsed = text.parse_query(raw)
        blinded = text.blind_query(parsed, _blind)
        assert blinded is not None
        assert blinded.matches(blinded_doc) == parsed.matches(plain_doc), raw
