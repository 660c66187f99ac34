"""Generate ``src/hermes_sessions/_unicode_tables.py`` from the Unicode data files.

The threat scanner needs two tables that the standard library does not have:

* the ``Default_Ignorable_Code_Point`` property (``unicodedata`` has no binary properties), read
  from the Unicode Character Database file ``DerivedCoreProperties.txt``;
* the letters of other scripts that look like ASCII letters (Cyrillic U+0430, Greek U+03BF, ...),
  read from the Unicode security data ``confusables.txt`` (UTS #39), or from the JSON copy of it
  that the ``confusable-homoglyphs`` package ships.

Where the files come from (this machine has no access to unicode.org, so both come from packages):

* Debian's ``unicode-data`` package installs ``/usr/share/unicode/DerivedCoreProperties.txt``
  (``apt-get install unicode-data``); the default path below.
* ``pip download confusable-homoglyphs --no-deps`` gives a wheel holding
  ``confusable_homoglyphs/confusables.json``; unzip it and pass the path, or pass Unicode's own
  ``confusables.txt`` if you have it.

Usage::

    python scripts/generate_unicode_tables.py --confusables PATH [--derived PATH] [--check]

``--check`` compares instead of writing, and exits 1 when the committed module is stale. The
output is deterministic: running the script twice on the same files gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "src" / "hermes_sessions" / "_unicode_tables.py"
DEFAULT_DERIVED = Path("/usr/share/unicode/DerivedCoreProperties.txt")
PROPERTY = "Default_Ignorable_Code_Point"
_BMP_LAST = 0xFFFF
_LINE = re.compile(r"^([0-9A-F]{4,6})(?:\.\.([0-9A-F]{4,6}))?\s*;\s*(\w+)\s*(?:#.*)?$")
_VERSION = re.compile(r"^#\s*DerivedCoreProperties-(\d+\.\d+\.\d+)\.txt")


def read_ignorable(path: Path) -> tuple[str, list[tuple[int, int]]]:
    """The Unicode version of ``path`` and its Default_Ignorable_Code_Point ranges, merged."""
    text = path.read_text(encoding="utf-8")
    version_match = _VERSION.match(text)
    if version_match is None:
        raise SystemExit(f"{path} does not start with '# DerivedCoreProperties-X.Y.Z.txt'")
    ranges: list[tuple[int, int]] = []
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match is None or match.group(3) != PROPERTY:
            continue
        start = int(match.group(1), 16)
        end = int(match.group(2) or match.group(1), 16)
        if ranges and ranges[-1][1] + 1 == start:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
    if not ranges:
        raise SystemExit(f"{path} lists no {PROPERTY} code points")
    return version_match.group(1), ranges


def _pairs_from_txt(text: str) -> list[tuple[str, str]]:
    """``source ; target ; MA`` lines of Unicode's confusables.txt, single characters only."""
    pairs = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 3:  # noqa: PLR2004  # source ; prototype ; type
            continue
        source = fields[0].split()
        target = fields[1].split()
        if len(source) == 1 and len(target) == 1:
            pairs.append((chr(int(source[0], 16)), chr(int(target[0], 16))))
    return pairs


def _pairs_from_json(text: str) -> list[tuple[str, str]]:
    """``{char: [{"c": homoglyph, ...}]}`` of confusable-homoglyphs, single characters only."""
    data = json.loads(text)
    return [
        (char, entry["c"])
        for char, entries in data.items()
        for entry in entries
        if len(char) == 1 and len(entry["c"]) == 1
    ]


def _is_ascii_letter(char: str) -> bool:
    return char.isascii() and char.isalpha()


def _classes(pairs: list[tuple[str, str]]) -> list[list[str]]:
    """The classes of characters that ``pairs`` join (union-find)."""
    parent: dict[str, str] = {}

    def find(char: str) -> str:
        while parent.setdefault(char, char) != char:
            parent[char] = parent[parent[char]]
            char = parent[char]
        return char

    for source, target in pairs:
        parent[find(source)] = find(target)
    classes: dict[str, list[str]] = {}
    for char in parent:
        classes.setdefault(find(char), []).append(char)
    return list(classes.values())


def read_confusable_letters(path: Path) -> dict[str, str]:
    """Map each non-ASCII letter that looks like an ASCII letter to that letter.

    Confusable characters form classes (everything with one prototype). A letter of another
    script maps to an ASCII letter of its class, of its own case when the class has one (U+0406,
    Cyrillic capital I, is in the class of ``l`` with ``I``: it maps to ``I``). Letters that NFKC
    changes (full-width and mathematical letters) and CJK ideographs are left out: the scanner
    applies NFKC first and folds what it gives, and ideographs are not disguises of Latin words.
    """
    text = path.read_text(encoding="utf-8")
    pairs = _pairs_from_json(text) if path.suffix == ".json" else _pairs_from_txt(text)
    folding: dict[str, str] = {}
    for members in _classes(pairs):
        letters = sorted(char for char in members if _is_ascii_letter(char))
        if not letters:
            continue
        for char in members:
            if char.isascii() or not unicodedata.category(char).startswith("L"):
                continue
            if unicodedata.normalize("NFKC", char) != char:
                continue
            if unicodedata.name(char, "").startswith("CJK"):
                continue
            same_case = [letter for letter in letters if letter.isupper() == char.isupper()]
            folding[char] = (same_case or letters)[0]
    return dict(sorted(folding.items()))


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= _BMP_LAST else f"\\U{code:08x}"


def render(
    version: str, ranges: list[tuple[int, int]], folding: dict[str, str], source: str
) -> str:
    """The text of the generated module."""
    lines = [
        '"""Unicode tables for the threat scanner: generated, do not edit.',
        "",
        "Generated by scripts/generate_unicode_tables.py from:",
        f"* DerivedCoreProperties.txt, Unicode {version} ({PROPERTY});",
        f"* {source} (confusable letters).",
        "",
        "Re-run the script (see its docstring for where the files come from) when Unicode changes.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Final",
        "",
        f'UNICODE_VERSION: Final = "{version}"',
        '"""The Unicode version of :data:`DEFAULT_IGNORABLE_RANGES`."""',
        "",
        "DEFAULT_IGNORABLE_RANGES: Final[tuple[tuple[int, int], ...]] = (",
    ]
    lines.extend(f"    (0x{start:04X}, 0x{end:04X})," for start, end in ranges)
    lines += [
        ")",
        '"""The ``Default_Ignorable_Code_Point`` code points: inclusive ranges, sorted, merged."""',
        "",
        "# Non-ASCII letters that look like ASCII letters, and the letter each looks like: the",
        "# character at position i of the first string folds to position i of the second.",
        "CONFUSABLE_SOURCES: Final = (",
    ]
    chars = list(folding)
    for start in range(0, len(chars), 12):
        chunk = "".join(_escape(char) for char in chars[start : start + 12])
        lines.append(f'    "{chunk}"')
    lines += [")", "CONFUSABLE_TARGETS: Final = ("]
    targets = "".join(folding.values())
    lines.extend(f'    "{targets[i : i + 80]}"' for i in range(0, len(targets), 80))
    lines += [")", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the generated module."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--derived", type=Path, default=DEFAULT_DERIVED)
    parser.add_argument("--confusables", type=Path, required=True)
    parser.add_argument("--source-name", help="how the header names the confusables source")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    version, ranges = read_ignorable(args.derived)
    folding = read_confusable_letters(args.confusables)
    source = args.source_name or args.confusables.name
    text = render(version, ranges, folding, source)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            sys.stderr.write(f"{args.output} is stale: re-run {Path(__file__).name}\n")
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    sys.stdout.write(
        f"wrote {args.output}: {len(ranges)} ignorable ranges, {len(folding)} confusable letters\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
