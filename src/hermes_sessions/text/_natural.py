"""Natural questions: content terms of a question, their word forms, and ranking sessions by them.

The exact language (:mod:`hermes_sessions.text._query`) answers what was typed. A question such as
"why did the container deployment fail" or "上周docker部署失败怎么办" holds a few content terms
among words that carry no topic. This module turns a question into :class:`NaturalTerm` values,
decides whether a text holds a term (:func:`term_count`) and ranks *sessions* by the terms they
cover (:func:`rank_sessions`). Backends are not involved: the store retrieves candidates for each
term with the exact language (:attr:`NaturalTerm.query`) through any backend, then calls these.

* **Content words only.** English stop words and question filler (:data:`STOP_WORDS`) and CJK
  function words (:data:`CJK_FUNCTION_WORDS`) are dropped. A question made only of them has no
  terms.
* **Word forms.** English words (ASCII letters only) are reduced with the Snowball English
  stemmer (the ``snowballstemmer`` package); a text word matches a question word when their stems
  are equal, or when one stem of at least four letters starts the other (``fail`` and ``failur``
  of "failure", ``deploy`` of "deployed" and "deployment"). Other words (with digits, other
  scripts, accents) match as written.
* **CJK.** A CJK run is cut at function words (Chinese and Korean) and at the boundaries between
  hiragana and other script (Japanese), then split into candidate terms by the index: from left
  to right the longest stretch of two to :data:`MAX_CJK_TERM` characters that occurs anywhere in
  the searchable messages is a term (``exists``, a callback the store answers with a one-hit
  exact search under the caller's filters). What no stretch covers counts as a missing term when
  it is two characters or more (after Korean particles and endings are removed).
* **Ranking.** Each term has a weight that grows with its rarity across sessions
  (``ln(1 + K / (df + 1))``, ``df`` the number of sessions holding it); a term no session holds
  weighs most. A session's *coverage* is the weight of the terms it holds over the weight of all
  terms, and its BM25 is computed over sessions as documents (term frequency: the term's
  occurrences in the session's matching messages; length: the session's message count). The
  score is ``coverage`` plus a bonus of at most :data:`BM25_SHARE` for BM25 (relative to the best
  candidate), :data:`TOGETHER_BONUS` when one message holds every term and :data:`EXACT_BONUS`
  when the question also matches as an exact query.
* **Silence over noise.** A session is a confident match only when its coverage reaches
  :data:`CONFIDENT_COVERAGE`; the natural search returns confident matches only.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
import snowballstemmer  # type: ignore[import-untyped]  # pure Python, no type hints shipped

from hermes_sessions.text._tokens import Run, Word, scan
from hermes_sessions.text._width import fold_width

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "BM25_SHARE",
    "CJK_FUNCTION_WORDS",
    "CONFIDENT_COVERAGE",
    "EXACT_BONUS",
    "GENERAL_WEIGHT",
    "GENERAL_WORDS",
    "MAX_CJK_TERM",
    "STOP_WORDS",
    "TOGETHER_BONUS",
    "UNUSED_GENERAL_WEIGHT",
    "WEAK_COVERAGE",
    "Evidence",
    "MatchKind",
    "NaturalTerm",
    "SessionScore",
    "natural_terms",
    "rank_sessions",
    "stem",
    "term_count",
]

MatchKind = Literal["exact", "all words", "partial"]

CONFIDENT_COVERAGE: Final = 0.8
"""The share of a question's weighted terms a session must hold to be a confident match.

Set on the recall benchmark (``benchmarks/recall.py``): at 0.8, 14 of its 16 questions without
an answer get no confident match while the answering session stays in the top 5.

.. versionadded:: 0.1.0
"""
WEAK_COVERAGE: Final = 0.25
"""Below this share a session is not offered at all, not even as a weak candidate.

.. versionadded:: 0.1.0
"""
GENERAL_WEIGHT: Final = 0.25
"""What an everyday English word weighs against a rare or technical one of the same rarity."""
UNUSED_GENERAL_WEIGHT: Final = 0.1
"""What an everyday English word that no session holds weighs against a rare technical one."""
BM25_SHARE: Final = 0.25
"""The most BM25 adds to a session's score (the best candidate gets all of it)."""
TOGETHER_BONUS: Final = 0.1
"""Added when one message of the session holds every term."""
EXACT_BONUS: Final = 0.2
"""Added when the question, read as an exact query, matches a message of the session."""
MAX_CJK_TERM: Final = 6
"""The longest CJK stretch tried as one term."""
_RARITY: Final = 200.0
_K1: Final = 1.2
_B: Final = 0.75
_MIN_PREFIX: Final = 4
_MAX_TERMS: Final = 16


def _words(text: str) -> list[str]:
    return text.split()


_DERIVATIONS: Final = frozenset(
    _words(
        "e ur ure er or ion ation ment al ic ive ing ed s es ant ent anc enc ity abl ibl ist ism"
    )
)


STOP_WORDS: Final = frozenset(
    _words(
        """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't having he
    her here hers herself him himself his how i if in into is isn't it it's its itself just let
    me more most mustn't my myself no nor not now of off on once only or other ought our ours
    ourselves out over own same shall she should shouldn't so some such than that the their
    theirs them themselves then there these they this those through to too under until up upon
    us very was wasn't we were weren't what when where which while who whom whose why will with
    won't would wouldn't you your yours yourself yourselves also any anything anyone something
    someone thing things stuff get got getting go going gone went make made way ways use used
    one ones lot lots really actually maybe please thanks thank hi hello hey ok okay yes yeah
    again ever still already yet there's what's how's where's who's that's here's
    remember recall recalled remind told tell telling say said says saying talk talked talking
    discuss discussed discussing discussion mention mentioned mentioning conversation
    conversations chat chats chatted session sessions earlier previous previously before last
    ago yesterday today week weeks month months year recently recent time times day days
    find found look looking search know knew think thought wonder need needed want wanted
    happen happened happening happens did does done whatever kind sort ask asked asking
    question questions answer answered explain explained figure figured decide decided
    """
    )
)
"""English words that carry no topic: function words and the filler of questions about the past.

.. versionadded:: 0.1.0
"""

GENERAL_WORDS: Final = frozenset(
    _words(
        """
    able accept act add added advice afraid age agree air allow almost alone along already
    always amount angry another answer anyway appear apply area arm around arrive art asleep
    attempt attention avoid away awful back bad badly bag ball bank base basic bear beat
    beautiful become bed begin behind believe belong best better big bill bit black blame block
    blue board body book boring born borrow bottom box boy brain break bright bring broad broke
    broken brother brown busy buy call calm came car card care careful carry case catch cause
    certain chance change cheap check child choice choose city claim class clean clear clearly
    close closed cold come common company complain complete completely concern consider
    continue control cool correct cost count country couple course cover crazy cut damage dark
    date dead deal dear deep definitely describe detail die different difficult dinner direct
    dirty discover doctor dog door double doubt draw dream drink drive drop dry due early earn
    easy eat eating edge effect effort else empty end ended enjoy enough enter entire equal
    especially even evening event every everybody everyone everything exact exactly example
    except expect expensive experience extra eye face fact fail failed fair fall false family
    far fast father fear feel feeling fell felt few field fight fill final finally fine finish
    fire first fit fix fixed floor follow food foot force forget form forward free friend front
    full fun funny future game gave general gentle girl give given glad good great green ground
    group grow growing grown guess guy half hand handle hang happy hard hate head health hear
    heard heart heavy held help high hit hold hole home hope horrible hot hour house huge human
    idea imagine important improve include instead interest interesting job join joke jump keep
    kept key kid kill kind knew large late later laugh lay lead learn least leave led left less
    level life light like likely line list listen little live local long lose loss lost loud
    love low luck lucky main major man manage many mark matter mean meet member mind minute
    miss mistake modern moment money morning mother move much music must name near nearly
    necessary need never new next nice night nobody noise none normal note nothing notice
    number obvious odd offer often old open opinion order ordinary original outside page pain
    paper parent part party pass past pay people perfect perhaps period person pick picture
    piece place plan play pleasant plenty point poor popular possible power practice prefer
    prepare present press pretty prevent price probably problem produce promise proper pull
    push put quick quickly quiet quite race raise random rather reach read ready real reason
    receive red reduce refuse regular remain remove repeat reply report rest result return
    right rise risk road room round rule run running sad safe sale save saw school second see
    seem seen sell send sense serious set several shape share short show shut sick side sign
    signed simple since single sit site situation size sleep slow slowly small smart smell
    smile soft solve son soon sorry sound speak special spend spent stand start state stay step
    stop story strange street strong student study stupid succeed success suddenly suggest
    summer sun sure surprise sweet take taken talk tall taste teach team terrible test thin
    third though threw throw tiny tired together told took top total touch town trouble true
    trust try turn type understand unless usual usually value view visit wait walk wall warm
    wash watch water weak wear weird well whole wide wife win window wish woman wonderful word
    work worked worry worse worst write wrong young
    """
    )
)
"""Everyday English words: they count, but weigh a quarter of a technical or rare word.

A question that names something no session mentions (a product, a command, a place) has no
answer; a question phrased with everyday words that the conversation happened not to use may
still have one. Compared by stem.

.. versionadded:: 0.1.0
"""

CJK_FUNCTION_WORDS: Final = frozenset(
    _words(
        """
    上周 上星期 上个月 上次 之前 以前 前几天 昨天 今天 最近 当时 那时 那天 上回 早些时候
    怎么 怎样 怎么样 如何 为什么 为何 什么 哪个 哪些 哪里 哪儿 多少 是否 有没有 是不是 能不能
    可以 应该 需要 我们 你们 他们 咱们 大家 这个 那个 这些 那些 这次 那次 一下 一些 一个
    关于 有关 讨论 讨论过 说过 聊过 提到 提到过 提过 问过 记得 还记得 告诉 当初 原来 后来 然后
    问题 情况 时候 事情 东西 办法 处理 解决 原因 理由 为啥 请问 帮我 帮忙 找找 找到
    找一下 查一下 看看 一下子
    吗 呢 吧 啊 呀 嘛 的 了 过 地 得 着 是 在 有 和 与 及 把 被 给 也 都 就 还 又 很 我 你 他 她 它
    这 那 哪 谁 啥 怎 么 办 去 来 到 对 从 向 让 用 会 要 能 想 说 问 找
    について に関して 原因 理由 方法 先週 先月 昨日 前回 以前 この前 どう どうして
    どうやって なぜ なに 何 いつ
    どこ どれ どの 教えて ください でしたか ましたか ですか ました でした 話した 話しました
    私たち 僕ら
    어떻게 왜 무엇 무슨 뭐 뭐였지 언제 어디 어느 지난주 지난번 저번 이전 예전 어제 오늘 최근
    우리 우리가 제가 내가 관련 관련된 대해 대해서 대한 했나요 했어요 했던 했지 했었나요
    됐나요 되었나요
    이야기 얘기 말했던 알려줘 알려주세요 찾아줘 있었나요 있나요 인가요 이었나요 였나요 하나요
    해결 해결했나요 방법 문제 解決 方法 問題
    """
    )
)
"""Chinese, Japanese and Korean words that carry no topic in a question.

.. versionadded:: 0.1.0
"""

_CJK_SINGLE_FUNCTION: Final = frozenset(w for w in CJK_FUNCTION_WORDS if len(w) == 1)
_CJK_CUTS: Final = tuple(
    sorted((w for w in CJK_FUNCTION_WORDS if len(w) > 1), key=len, reverse=True)
)
_KOREAN_ENDINGS: Final = tuple(
    sorted(
        _words(
            """
        에서는 에서 에게 으로 까지 부터 처럼 보다 했나요 했어요 했던 했지 했다 하는 하기 하고 해서
        되었나요 됐나요 됐던 되는 된 인가요 이었나요 였나요 나요 어요 아요 었나요 었던
        가 이 을 를 은 는 의 에 로 와 과 도 만 랑
        """
        ),
        key=len,
        reverse=True,
    )
)
_HIRAGANA: Final = re.compile(r"[\u3041-\u309f]+")
_HANGUL_START: Final = 0xAC00
_HANGUL_END: Final = 0xD7A3


@functools.cache
def _stemmer() -> Any:  # snowballstemmer ships no types
    return snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of a lower-case ASCII word; any other word as it is.

    >>> stem("deployments"), stem("containers"), stem("k8s")
    ('deploy', 'contain', 'k8s')

    .. versionadded:: 0.1.0
    """
    if not word.isascii() or not word.isalpha():
        return word
    result: str = _stemmer().stemWord(word)
    return result


def _forms_meet(one: str, other: str) -> bool:
    """Whether two stems name one word.

    Equal, or the longer is the shorter (of four letters or more) and a derivational ending that
    Snowball keeps (``failur`` of "failure" meets ``fail``).
    """
    if one == other:
        return True
    short, long_ = (one, other) if len(one) <= len(other) else (other, one)
    return (
        len(short) >= _MIN_PREFIX
        and long_.startswith(short)
        and long_[len(short) :] in _DERIVATIONS
    )


@attrs.frozen
class NaturalTerm:
    """One content term of a question.

    .. versionadded:: 0.1.0
    """

    text: str
    """The term as it is matched: a folded word, or a CJK stretch."""
    kind: Literal["word", "cjk"]
    query: str
    """An exact-language query whose hits hold every occurrence of the term (and maybe more)."""
    stem: str | None = None
    """For an English word, its stem: a text word matches when :func:`_forms_meet` says so."""
    missing: bool = False
    """A CJK stretch that occurs in no searchable message (it still counts against coverage)."""
    general: bool = False
    """An everyday English word (:data:`GENERAL_WORDS`): it weighs :data:`GENERAL_WEIGHT`."""


def _word_term(word: str) -> NaturalTerm:
    root = stem(word)
    if root == word and not (word.isascii() and word.isalpha()):
        return NaturalTerm(word, "word", f'"{_quotable(word)}"')
    common = 0
    for a, b in zip(root, word, strict=False):
        if a != b:
            break
        common += 1
    prefix = word[: max(common, 0)]
    if root != word and len(prefix) > _MIN_PREFIX + 2:
        prefix = prefix[: max(_MIN_PREFIX, len(prefix) - 2)]  # "failure" finds "fail" too
    if len(prefix) >= _MIN_PREFIX:
        query = f"{prefix}*"
    else:
        query = f'"{word}"'
        if root != word:
            query += f' OR "{root}"'
    return NaturalTerm(word, "word", query, stem=root, general=root in _general_stems())


@functools.cache
def _general_stems() -> frozenset[str]:
    return frozenset(map(stem, GENERAL_WORDS))


def _quotable(text: str) -> str:
    return text.replace('"', " ")


def _cjk_pieces(units: list[str]) -> list[str]:
    """A CJK run's stretches between function words (and, for Japanese, hiragana)."""
    text = "".join(units)
    for cut in _CJK_CUTS:
        text = text.replace(cut, " ")
    pieces: list[str] = []
    for piece in text.split():
        has_other = _HIRAGANA.sub("", piece) != ""
        if has_other and _HIRAGANA.search(piece):
            pieces.extend(_HIRAGANA.sub(" ", piece).split())
        else:
            pieces.append(piece)
    return pieces


def _is_hangul(text: str) -> bool:
    return any(_HANGUL_START <= ord(char) <= _HANGUL_END for char in text)


def _leftover(text: str) -> str:
    """What of an uncovered CJK stretch still names something (function characters removed)."""
    if _is_hangul(text):
        changed = True
        while changed and len(text) > 1:
            changed = False
            for ending in _KOREAN_ENDINGS:
                if text.endswith(ending) and len(text) > len(ending):
                    text, changed = text[: -len(ending)], True
                    break
        return text if len(text) >= 2 else ""  # noqa: PLR2004
    kept = "".join(char for char in text if char not in _CJK_SINGLE_FUNCTION)
    return kept if len(kept) >= 2 else ""  # noqa: PLR2004


def _cjk_terms(piece: str, exists: Callable[[str], bool]) -> list[NaturalTerm]:
    """Split one stretch into the longest stretches the index holds, left to right."""
    terms: list[NaturalTerm] = []
    uncovered = ""
    position = 0
    while position < len(piece):
        found = 0
        for length in range(min(MAX_CJK_TERM, len(piece) - position), 1, -1):
            candidate = piece[position : position + length]
            if candidate[0] in _CJK_SINGLE_FUNCTION and length == 2:  # noqa: PLR2004
                continue
            if exists(candidate):
                found = length
                break
        if found:
            if rest := _leftover(uncovered):
                terms.append(NaturalTerm(rest, "cjk", f'"{rest}"', missing=True))
            uncovered = ""
            term = piece[position : position + found]
            terms.append(NaturalTerm(term, "cjk", f'"{term}"'))
            position += found
        else:
            uncovered += piece[position]
            position += 1
    if rest := _leftover(uncovered):
        terms.append(NaturalTerm(rest, "cjk", f'"{rest}"', missing=True))
    return terms


def natural_terms(question: str, exists: Callable[[str], bool]) -> list[NaturalTerm]:
    """The content terms of ``question`` (at most 16, duplicates dropped).

    ``exists(stretch)`` says whether a CJK stretch occurs in a searchable message; it is asked
    only for CJK questions.

    >>> [t.text for t in natural_terms("Why did the Docker containers crash?", lambda s: False)]
    ['docker', 'containers', 'crash']

    .. versionadded:: 0.1.0
    """
    terms: dict[str, NaturalTerm] = {}
    for piece in scan(fold_width(question[:1000])):
        if isinstance(piece, Word):
            word = piece.text
            if word in STOP_WORDS or len(word) < 2:  # noqa: PLR2004
                continue
            term = _word_term(word)
            terms.setdefault(term.stem or term.text, term)
        elif isinstance(piece, Run):
            for stretch in _cjk_pieces(piece.units):
                if stretch in CJK_FUNCTION_WORDS:
                    continue
                for term in _cjk_terms(stretch, exists):
                    terms.setdefault(term.text, term)
    return list(terms.values())[:_MAX_TERMS]


def term_count(term: NaturalTerm, words: Iterable[str], text: str) -> int:
    """How often ``term`` occurs in a text, given its folded words and its folded text.

    A word term counts the words whose form meets it; a CJK term counts its occurrences in the
    text (``words`` unused).

    .. versionadded:: 0.1.0
    """
    if term.kind == "cjk":
        return text.count(term.text)
    if term.stem is None:
        return sum(1 for word in words if word == term.text)
    return sum(1 for word in words if word == term.text or _forms_meet(stem(word), term.stem))


@attrs.frozen
class Evidence:
    """What one session holds of a question: per term, the messages holding it and how often.

    .. versionadded:: 0.1.0
    """

    session_id: str
    message_count: int
    counts: Mapping[int, Mapping[int, int]]
    """term index → message id → occurrences."""
    exact: bool = False
    """Whether the question, as an exact query, matched a message of the session."""


@attrs.frozen
class SessionScore:
    """A ranked session: its score, coverage and how it matched.

    .. versionadded:: 0.1.0
    """

    session_id: str
    score: float
    coverage: float
    matched: MatchKind
    terms: tuple[int, ...]
    """Indexes of the terms the session holds."""
    best_messages: tuple[int, ...]
    """Message ids, best first: the messages holding the most terms."""

    @property
    def confident(self) -> bool:
        """Whether the session covers enough of the question to be offered as a match."""
        return self.coverage >= CONFIDENT_COVERAGE or self.matched == "exact"


def term_weights(terms: list[NaturalTerm], evidence: Iterable[Evidence]) -> list[float]:
    """Each term's weight: ``ln(1 + K / (df + 1))``, ``df`` its sessions in ``evidence``.

    An everyday word's weight is multiplied by :data:`GENERAL_WEIGHT`, or by
    :data:`UNUSED_GENERAL_WEIGHT` when no session holds it.
    """
    frequency = [0] * len(terms)
    for item in evidence:
        for index in item.counts:
            frequency[index] += 1
    weights = []
    for index, term in enumerate(terms):
        if not term.general:
            weights.append(math.log1p(_RARITY / (frequency[index] + 1.0)))
        elif frequency[index]:
            weights.append(GENERAL_WEIGHT * math.log1p(_RARITY / (frequency[index] + 1.0)))
        else:  # an everyday word no session uses tells little
            weights.append(UNUSED_GENERAL_WEIGHT * math.log1p(_RARITY))
    return weights


def rank_sessions(
    terms: list[NaturalTerm], evidence: list[Evidence], *, messages: int = 3
) -> list[SessionScore]:
    """Rank sessions by coverage and BM25, best first (every candidate, confident or not).

    .. versionadded:: 0.1.0
    """
    if not terms or not evidence:
        return []
    weights = term_weights(terms, evidence)
    total = sum(weights) or 1.0
    average = sum(max(e.message_count, 1) for e in evidence) / len(evidence)
    scored: list[tuple[Evidence, float, float]] = []
    for item in evidence:
        saturation = _K1 * (1 - _B + _B * max(item.message_count, 1) / average)
        bm25 = 0.0
        for index, by_message in item.counts.items():
            frequency = sum(by_message.values())
            bm25 += weights[index] * frequency * (_K1 + 1) / (frequency + saturation)
        covered = sum(weights[index] for index in item.counts)
        scored.append((item, covered / total, bm25))
    best_bm25 = max(bm25 for _, _, bm25 in scored) or 1.0
    results = []
    for item, coverage, bm25 in scored:
        per_message: dict[int, set[int]] = {}
        for index, by_message in item.counts.items():
            for message_id in by_message:
                per_message.setdefault(message_id, set()).add(index)
        together = any(len(held) == len(terms) for held in per_message.values())
        all_words = len(item.counts) == len(terms)
        matched: MatchKind = "exact" if item.exact else "all words" if all_words else "partial"
        score = coverage + BM25_SHARE * bm25 / best_bm25
        score += TOGETHER_BONUS if together else 0.0
        score += EXACT_BONUS if item.exact else 0.0
        order = sorted(per_message, key=lambda m: (-len(per_message[m]), m))
        results.append(
            SessionScore(
                session_id=item.session_id,
                score=score,
                coverage=coverage,
                matched=matched,
                terms=tuple(sorted(item.counts)),
                best_messages=tuple(order[:messages]),
            )
        )
    results.sort(key=lambda s: (-s.score, s.session_id))
    return results
