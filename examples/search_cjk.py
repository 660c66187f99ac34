"""Search in Chinese, Japanese and English with one query language.

The one idea: a CJK query of any length is an exact substring search (one- and two-character
words are found), while English queries match whole words, phrases, prefixes, OR and NOT.
"""

from __future__ import annotations

from hermes_sessions import Message, SessionSource, SessionStore

MESSAGES = [
    "staging 的端口冲突怎么解决？",
    "飞书机器人今天部署好了",
    "東京のサーバーを再起動しました",
    "We deploy with docker compose on Friday",
    "podman works too, without helm",
]
QUERIES = ["端口", "书", "サーバー", '"docker compose"', "deplo*", "docker OR podman -helm"]


def main() -> None:
    """Store a few messages, then show which of them each query finds."""
    with SessionStore.open(backend="memory") as store:
        lookup = store.get_or_create(SessionSource(platform="cli", chat_id="demo"))
        store.append(lookup.session_id, *(Message(role="user", content=text) for text in MESSAGES))
        for query in QUERIES:
            found = [hit.message.content for hit in store.search(query)]
            print(f"{query!r:28} -> {found}")
        hostile = 'AND OR ((("'
        print(f"a hostile query never raises: {store.search(hostile)}")


if __name__ == "__main__":
    main()
