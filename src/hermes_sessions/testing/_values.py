"""Contract: one rule for odd values — what the models accept is stored and given back the same."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from hermes_sessions.exceptions import MessageTooLargeError
from hermes_sessions.models import Message
from hermes_sessions.options import DEFAULT_MAX_MESSAGE_BYTES
from hermes_sessions.protocols import RotationPlan
from hermes_sessions.testing._support import T0, ContractBase, evolve, record, say, seed

if TYPE_CHECKING:
    from hermes_sessions.protocols import Backend

ODD_BUT_VALID = {
    "nul": "a\x00b",
    "control": "\x01\x1f\x7f",
    "astral": "𝄞 😀 𠀋",
    "big": 2**70,
    "negative_zero": -0.0,
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "nested": [[[]], {"": {"k": [None, True, False]}}],
    "unicode keys": {"键": "值", "\x00": 0},
}


class ValueContract(ContractBase):
    """Strict JSON and UTF-8 text, U+0000 included, round-trip; oversize messages are refused."""

    def test_nul_and_odd_but_valid_values_round_trip(self, backend: Backend) -> None:
        """U+0000, control and astral characters, big and extreme numbers come back the same."""
        seed(backend, "s1")
        message = Message(
            role="user",
            content="before\x00after",
            sender_name="nul\x00name",
            tool_calls=[{"id": "c\x00", "arguments": "{}"}],
            extra=ODD_BUT_VALID,
        )
        (stored,) = backend.append_messages("s1", [message])
        assert stored == evolve(message, id=stored.id, session_id="s1")
        assert backend.get_messages("s1") == [stored]
        parts = Message(role="user", content=[{"type": "text", "text": "\x00"}])
        (with_parts,) = backend.replace_messages("s1", [parts])
        assert backend.get_messages("s1") == [with_parts]
        assert with_parts.content == [{"type": "text", "text": "\x00"}]

    def test_records_keep_odd_but_valid_json(self, backend: Backend) -> None:
        """Metadata and model_config hold the same strict JSON values as messages."""
        created = backend.create_session(
            record("s1", metadata=ODD_BUT_VALID, model_config={"t": 0.0, "n": "\x00"})
        )
        assert created.metadata == ODD_BUT_VALID
        stored = backend.get_session("s1")
        assert stored is not None
        assert (stored.metadata, stored.model_config) == (ODD_BUT_VALID, {"t": 0.0, "n": "\x00"})

    def test_a_message_over_the_default_limit_is_refused_everywhere(self, backend: Backend) -> None:
        """Over max_message_bytes (16 MiB by default) every write refuses and writes nothing."""
        seed(backend, "s1", None, say("kept"))
        huge = say("x" * DEFAULT_MAX_MESSAGE_BYTES)
        kept = backend.get_messages("s1")
        with pytest.raises(MessageTooLargeError) as info:
            backend.append_messages("s1", [say("fine"), huge])
        assert info.value.limit == DEFAULT_MAX_MESSAGE_BYTES
        assert info.value.size > DEFAULT_MAX_MESSAGE_BYTES
        with pytest.raises(MessageTooLargeError):
            backend.replace_message("s1", kept[0].id or 0, huge)
        with pytest.raises(MessageTooLargeError):
            backend.replace_messages("s1", [huge])
        with pytest.raises(MessageTooLargeError):
            backend.apply(RotationPlan(at=T0, create=record("s2"), messages=[huge]))
        assert backend.get_messages("s1") == kept
        assert backend.get_session("s2") is None
