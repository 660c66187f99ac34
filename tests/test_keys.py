"""Session keys: the Hermes vectors, percent-encoding, parsing and canonicalisers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_sessions import (
    InvalidKeyError,
    KeyPolicy,
    SessionSource,
    WhatsAppIdentity,
    build_session_key,
    parse_session_key,
    session_key_parts,
)

GROUP_OFF = KeyPolicy(group_sessions_per_user=False)
THREAD_ON = KeyPolicy(thread_sessions_per_user=True)
GROUP_OFF_THREAD_ON = KeyPolicy(group_sessions_per_user=False, thread_sessions_per_user=True)

VECTORS = [
    ("telegram", "dm", "99", None, None, None, KeyPolicy(), "agent:main:telegram:dm:99"),
    (
        "telegram",
        "dm",
        "99",
        "topic-1",
        "42",
        None,
        KeyPolicy(),
        "agent:main:telegram:dm:99:topic-1",
    ),
    ("telegram", "dm", "", None, "jordan", None, KeyPolicy(), "agent:main:telegram:dm:jordan"),
    ("telegram", "dm", "", None, "primary", "alt", KeyPolicy(), "agent:main:telegram:dm:alt"),
    ("telegram", "dm", None, "7", None, None, KeyPolicy(), "agent:main:telegram:dm:7"),
    ("telegram", "dm", None, None, None, None, KeyPolicy(), "agent:main:telegram:dm"),
    (
        "discord",
        "group",
        "guild-123",
        None,
        None,
        None,
        KeyPolicy(),
        "agent:main:discord:group:guild-123",
    ),
    (
        "discord",
        "group",
        "guild-123",
        None,
        "alice",
        None,
        KeyPolicy(),
        "agent:main:discord:group:guild-123:alice",
    ),
    (
        "discord",
        "group",
        "guild-123",
        None,
        "alice",
        None,
        GROUP_OFF,
        "agent:main:discord:group:guild-123",
    ),
    (
        "telegram",
        "group",
        "-1002285219667",
        "17585",
        "alice",
        None,
        KeyPolicy(),
        "agent:main:telegram:group:-1002285219667:thread:17585",
    ),
    (
        "telegram",
        "group",
        "-1002285219667",
        "17585",
        "alice",
        None,
        THREAD_ON,
        "agent:main:telegram:group:-1002285219667:thread:17585:alice",
    ),
    (
        "telegram",
        "group",
        "-1002285219667",
        "17585",
        "alice",
        None,
        GROUP_OFF_THREAD_ON,
        "agent:main:telegram:group:-1002285219667:thread:17585",
    ),
    (
        "discord",
        "thread",
        "guild-123",
        "thread-456",
        "bob",
        None,
        KeyPolicy(),
        "agent:main:discord:thread:guild-123:thread:thread-456",
    ),
    ("feishu", "dm", "ou_xxx", None, None, None, KeyPolicy(), "agent:main:feishu:dm:ou_xxx"),
    (
        "feishu",
        "group",
        "oc_xxx",
        None,
        "ou_user1",
        None,
        KeyPolicy(),
        "agent:main:feishu:group:oc_xxx:ou_user1",
    ),
    (
        "feishu",
        "group",
        "oc_xxx",
        "t_1",
        "ou_user1",
        None,
        KeyPolicy(),
        "agent:main:feishu:group:oc_xxx:thread:t_1",
    ),
    (
        "whatsapp",
        "dm",
        "15551234567@s.whatsapp.net",
        None,
        None,
        None,
        KeyPolicy(),
        "agent:main:whatsapp:dm:15551234567",
    ),
]


@pytest.mark.parametrize(
    ("platform", "chat_type", "chat_id", "thread_id", "user_id", "user_id_alt", "policy", "key"),
    VECTORS,
)
def test_design_vectors(platform, chat_type, chat_id, thread_id, user_id, user_id_alt, policy, key):
    """Every vector of DESIGN §3.2 builds exactly its key (Hermes's, but for the thread marker)."""
    source = SessionSource(
        platform=platform,
        chat_type=chat_type,
        chat_id=chat_id,
        thread_id=thread_id,
        user_id=user_id,
        user_id_alt=user_id_alt,
    )
    assert build_session_key(source, policy) == key
    assert policy.build(source) == key


def test_dm_never_adds_the_user_when_a_chat_id_exists():
    """A DM with a chat id ignores the user id, and the group flags do not matter."""
    source = SessionSource(platform="slack", chat_id="D1", user_id="U1")
    for policy in (KeyPolicy(), GROUP_OFF, THREAD_ON):
        assert build_session_key(source, policy) == "agent:main:slack:dm:D1"


def test_numbers_are_converted_with_str():
    """Integer ids from platform SDKs become their decimal strings."""
    source = SessionSource(platform="telegram", chat_type="group", chat_id=-100, user_id=42)
    assert build_session_key(source) == "agent:main:telegram:group:-100:42"


def test_namespace_prefixes_the_key():
    """A profile namespace replaces ``main``."""
    source = SessionSource(platform="telegram", chat_id="99")
    assert build_session_key(source, KeyPolicy(namespace="work")) == "agent:work:telegram:dm:99"


def test_other_chat_types_follow_the_group_rule():
    """A channel (or any non-DM type) isolates members like a group does."""
    source = SessionSource(platform="slack", chat_type="channel", chat_id="C1", user_id="U1")
    assert build_session_key(source) == "agent:main:slack:channel:C1:U1"


def test_group_without_chat_id_uses_the_remaining_parts():
    """A group source missing its chat id still yields a key from thread and participant."""
    source = SessionSource(platform="matrix", chat_type="group", user_id="u")
    assert build_session_key(source) == "agent:main:matrix:group:u"


def test_colon_and_percent_are_percent_encoded():
    """Components containing ``:`` or ``%`` are encoded so keys never gain segments."""
    source = SessionSource(platform="matrix", chat_type="group", chat_id="!room:example.org")
    key = build_session_key(source)
    assert key == "agent:main:matrix:group:!room%3Aexample.org"
    source = SessionSource(platform="matrix", chat_id="50%")
    assert build_session_key(source) == "agent:main:matrix:dm:50%25"


def test_parse_returns_the_decoded_parts():
    """Parsing a key returns namespace, platform, chat type and decoded segments."""
    parsed = parse_session_key("agent:work:matrix:group:!room%3Aexample.org:u%25")
    assert parsed.namespace == "work"
    assert parsed.platform == "matrix"
    assert parsed.chat_type == "group"
    assert parsed.segments == ("!room:example.org", "u%")
    assert not parsed.is_dm
    assert str(parsed) == "agent:work:matrix:group:!room%3Aexample.org:u%25"


def test_parse_a_bare_dm_key():
    """A DM key with no components parses with no segments."""
    parsed = parse_session_key("agent:main:telegram:dm")
    assert parsed.is_dm
    assert parsed.segments == ()


def test_parse_leaves_unknown_escapes_alone():
    """Only ``%3A`` and ``%25`` are escapes; other percent sequences are kept as written."""
    assert parse_session_key("agent:main:x:dm:a%20b%3a").segments == ("a%20b:",)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "agent",
        "agent:main:telegram",
        "session:main:telegram:dm",
        "agent::telegram:dm",
        "agent:main:Telegram:dm",
        "agent:main:telegram:DM",
        "agent:main:telegram:dm::7",
        "agent:main:telegram:dm:7:",
    ],
)
def test_parse_rejects_malformed_keys(key):
    """Malformed keys raise InvalidKeyError, a ValueError."""
    with pytest.raises(InvalidKeyError) as info:
        parse_session_key(key)
    assert isinstance(info.value, ValueError)
    assert info.value.key == key


def test_parse_rejects_non_strings():
    """A key that is not a string is an InvalidKeyError, not an AttributeError."""
    with pytest.raises(InvalidKeyError):
        parse_session_key(42)  # type: ignore[arg-type]


def test_namespace_is_validated():
    """A namespace with a colon would corrupt every key, so it is refused."""
    with pytest.raises(InvalidKeyError):
        KeyPolicy(namespace="a:b")


def test_flags_must_be_booleans():
    """Policy flags are booleans; a string such as 'false' is a TypeError."""
    with pytest.raises(TypeError):
        KeyPolicy(group_sessions_per_user="false")  # type: ignore[arg-type]


# -- canonicalisers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("15551234567@s.whatsapp.net", "15551234567"),
        ("+15551234567", "15551234567"),
        ("15551234567:12@s.whatsapp.net", "15551234567"),
        ("207548392011@lid", "207548392011"),
        ("15551234567", "15551234567"),
    ],
)
def test_whatsapp_identity_strips_plus_device_and_domain(raw, canonical):
    """WhatsApp ids lose a leading +, the device suffix and the JID/LID domain."""
    assert WhatsAppIdentity()(raw) == canonical


def test_whatsapp_aliases_pick_shortest_then_first():
    """Aliases map to the shortest alias, ties broken lexicographically; groups merge."""
    identity = WhatsAppIdentity([["222", "1111"], ["1111", "333@lid"], ["99999", "88888"]])
    assert identity("333@lid") == "222"
    assert identity("+1111") == "222"
    assert identity("99999:2@s.whatsapp.net") == "88888"
    assert identity("444") == "444"


def test_whatsapp_users_in_groups_are_canonicalised_but_group_ids_are_not():
    """Canonicalisers apply to user ids and DM chat ids, never to group chat ids."""
    source = SessionSource(
        platform="whatsapp",
        chat_type="group",
        chat_id="120363000000000000@g.us",
        user_id="+15551234567:3@s.whatsapp.net",
    )
    assert (
        build_session_key(source) == "agent:main:whatsapp:group:120363000000000000@g.us:15551234567"
    )


def test_custom_canonicalizers_merge_over_the_builtin_ones():
    """A host's canonicaliser is added beside WhatsApp's; mapping to None removes one."""
    policy = KeyPolicy(canonicalizers={"signal": str.upper})
    assert policy.canonical("signal", "abc") == "ABC"
    assert policy.canonical("whatsapp", "+1@s.whatsapp.net") == "1"
    bare = KeyPolicy(canonicalizers={"whatsapp": None})
    assert bare.canonical("whatsapp", "+1@s.whatsapp.net") == "+1@s.whatsapp.net"


def test_canonicalizers_must_be_callable():
    """A non-callable canonicaliser is refused when the policy is built."""
    with pytest.raises(TypeError):
        KeyPolicy(canonicalizers={"x": "upper"})  # type: ignore[dict-item]


def test_a_canonicaliser_returning_nothing_keeps_the_raw_id():
    """If canonicalising empties an id, the raw id is used rather than dropping it."""
    source = SessionSource(platform="whatsapp", chat_id="@broadcast")
    assert build_session_key(source) == "agent:main:whatsapp:dm:@broadcast"


def test_key_policies_are_hashable_values():
    """Equal policies are equal and hash alike, so hosts can key caches by them."""
    assert KeyPolicy(namespace="a") == KeyPolicy(namespace="a")
    assert hash(KeyPolicy(namespace="a")) == hash(KeyPolicy(namespace="a"))


# -- properties ------------------------------------------------------------------------------------

present = st.text(min_size=1, max_size=12)
ids = st.none() | present
platforms = st.sampled_from(["telegram", "discord", "feishu", "slack", "whatsapp", "x-1"])
chat_types = st.sampled_from(["dm", "group", "channel", "thread", "forum"])
policies = st.builds(
    KeyPolicy,
    namespace=st.sampled_from(["main", "work", "a.b-c_1"]),
    group_sessions_per_user=st.booleans(),
    thread_sessions_per_user=st.booleans(),
)
sources = st.builds(
    SessionSource,
    platform=platforms,
    chat_type=chat_types,
    chat_id=ids,
    user_id=ids,
    user_id_alt=ids,
    thread_id=ids,
)


@given(sources, policies)
def test_build_then_parse_round_trips(source, policy):
    """Parsing a built key gives back exactly the components the builder used."""
    key = build_session_key(source, policy)
    parsed = parse_session_key(key)
    parts = session_key_parts(source, policy)
    assert (parsed.platform, parsed.chat_type) == (parts[0], parts[1])
    assert parsed.namespace == policy.namespace
    assert list(parsed.segments) == parts[2:]
    assert str(parsed) == key


@given(sources, sources, policies)
def test_sources_with_different_lanes_never_collide(first, second, policy):
    """Two sources get the same key only if the components the rules use are the same."""
    if session_key_parts(first, policy) != session_key_parts(second, policy):
        assert build_session_key(first, policy) != build_session_key(second, policy)


@given(platforms, present, present, present, policies)
def test_distinct_group_members_are_isolated(platform, chat_id, alice, bob, policy):
    """With per-user groups, two members of one group never share a key."""
    if alice == bob or policy.canonical(platform, alice) == policy.canonical(platform, bob):
        return
    isolating = KeyPolicy(namespace=policy.namespace, group_sessions_per_user=True)

    def member(user):
        return SessionSource(platform=platform, chat_type="group", chat_id=chat_id, user_id=user)

    assert build_session_key(member(alice), isolating) != build_session_key(member(bob), isolating)


@given(platforms, present, present)
def test_distinct_dm_chats_never_collide(platform, first, second):
    """Two DMs with different chat ids never share a key, whatever the ids contain."""
    if KeyPolicy().canonical(platform, first) == KeyPolicy().canonical(platform, second):
        return
    keys = {
        build_session_key(SessionSource(platform=platform, chat_id=chat))
        for chat in (first, second)
    }
    assert len(keys) == 2
