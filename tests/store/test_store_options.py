"""The typed keyword arguments of the store stay in step with the classes they feed."""

from __future__ import annotations

import attrs

from hermes_sessions.queries import SearchQuery, SearchQueryFields, SessionQuery, SessionQueryFields
from hermes_sessions.store import SessionStore, StoreOptions


def init_names(cls: type) -> set[str]:
    """The keyword names of an attrs class's ``__init__``."""
    return {field.alias for field in attrs.fields(cls) if field.init}


def test_session_query_fields_name_every_session_query_field():
    """SessionQueryFields has exactly the keywords SessionQuery takes."""
    assert set(SessionQueryFields.__annotations__) == init_names(SessionQuery)


def test_search_query_fields_name_every_search_query_field_but_text():
    """SearchQueryFields has the keywords SearchQuery takes, except the query text."""
    assert set(SearchQueryFields.__annotations__) == init_names(SearchQuery) - {"text"}


def test_store_options_name_every_store_keyword():
    """StoreOptions has the keywords SessionStore takes besides its backend."""
    assert set(StoreOptions.__annotations__) == init_names(SessionStore) - {"backend"}
