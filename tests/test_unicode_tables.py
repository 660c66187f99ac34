"""The generated Unicode tables, checked against the property's definition, and their generator."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
import unicodedata
from pathlib import Path

import pytest

from hermes_sessions._unicode_tables import (
    CONFUSABLE_SOURCES,
    CONFUSABLE_TARGETS,
    DEFAULT_IGNORABLE_RANGES,
    UNICODE_VERSION,
)

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_DERIVED = Path("/usr/share/unicode/DerivedCoreProperties.txt")  # Debian's unicode-data


def load_generator():
    """Import scripts/generate_unicode_tables.py as a module."""
    path = ROOT / "scripts" / "generate_unicode_tables.py"
    spec = importlib.util.spec_from_file_location("generate_unicode_tables", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def ignorable(code: int) -> bool:
    """Whether ``code`` is in the generated table."""
    return any(start <= code <= end for start, end in DEFAULT_IGNORABLE_RANGES)


def test_ranges_are_sorted_disjoint_and_merged():
    """The ranges are increasing, non-overlapping and never adjacent (merged)."""
    for (_, end), (start, _) in itertools.pairwise(DEFAULT_IGNORABLE_RANGES):
        assert end + 1 < start
    assert all(start <= end for start, end in DEFAULT_IGNORABLE_RANGES)
    assert tuple(int(part) for part in UNICODE_VERSION.split(".")) >= (15, 0, 0)


# The property's published definition (DerivedCoreProperties.txt):
#   Other_Default_Ignorable_Code_Point + Cf + Variation_Selector
#   - White_Space - FFF9..FFFB - 13430..13440 - Prepended_Concatenation_Mark.
EXCLUDED_FORMAT = {
    *range(0xFFF9, 0xFFFC),  # interlinear annotation
    *range(0x13430, 0x13441),  # Egyptian hieroglyph format controls
    *range(0x0600, 0x0606),  # Prepended_Concatenation_Mark ...
    0x06DD,
    0x070F,
    0x0890,
    0x0891,
    0x08E2,
    0x110BD,
    0x110CD,
}
VARIATION_SELECTORS = [*range(0x180B, 0x180E), 0x180F, *range(0xFE00, 0xFE10)]
VARIATION_SELECTORS += range(0xE0100, 0xE01F0)


def test_every_format_character_is_ignorable_unless_the_definition_excludes_it():
    """Each Cf character of this Python's Unicode is in the table, save the listed exceptions."""
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)) == "Cf" and code not in EXCLUDED_FORMAT:
            assert ignorable(code), f"U+{code:04X}"
    assert not any(ignorable(code) for code in EXCLUDED_FORMAT)


def test_variation_selectors_fillers_and_tags_are_ignorable():
    """The variation selectors, the Hangul fillers and the tag block are all in the table."""
    assert all(ignorable(code) for code in VARIATION_SELECTORS)
    assert all(ignorable(code) for code in (0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x180E))
    assert all(ignorable(code) for code in range(0xE0000, 0xE1000))


def test_visible_characters_are_not_ignorable():
    """Letters, digits, spaces and ordinary punctuation are not in the table."""
    for char in "aZ09 \t\n.,\u00a0\u3000\u4e00\u0430\u05d0\u0627\u0915\U0001f600":
        assert not ignorable(ord(char)), repr(char)


@pytest.mark.skipif(not SYSTEM_DERIVED.exists(), reason="Debian's unicode-data is not installed")
def test_table_matches_the_unicode_data_file():
    """Re-reading DerivedCoreProperties.txt gives the committed ranges (when the file is here)."""
    version, ranges = load_generator().read_ignorable(SYSTEM_DERIVED)
    if version != UNICODE_VERSION:
        pytest.skip(f"this machine has Unicode {version}, the table {UNICODE_VERSION}")
    assert tuple(ranges) == DEFAULT_IGNORABLE_RANGES


def test_confusables_fold_other_scripts_to_ascii_letters():
    """Sources are non-ASCII letters NFKC leaves alone; targets are ASCII letters of their look."""
    assert len(CONFUSABLE_SOURCES) == len(CONFUSABLE_TARGETS) > 200
    folding = dict(zip(CONFUSABLE_SOURCES, CONFUSABLE_TARGETS, strict=True))
    for source, target in folding.items():
        assert not source.isascii()
        assert unicodedata.category(source).startswith("L")
        assert unicodedata.normalize("NFKC", source) == source
        assert not unicodedata.name(source).startswith("CJK")
        assert target.isascii()
        assert target.isalpha()
    cyrillic = "\u0430\u0435\u043e\u0440\u0441\u0445\u0443\u0456\u0406\u0410"
    assert "".join(folding[char] for char in cyrillic) == "aeopcxyiIA"
    assert folding["\u03bf"] == "o"  # Greek omicron


# -- the generator, on small files -----------------------------------------------------------------


DERIVED_SAMPLE = """# DerivedCoreProperties-99.1.0.txt
# Date: whenever

00AD          ; Default_Ignorable_Code_Point # Cf       SOFT HYPHEN
0041..005A    ; Alphabetic # L&  [26] not this property
200B..200F    ; Default_Ignorable_Code_Point # Cf   [5] ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK
2010          ; Default_Ignorable_Code_Point # made up, to test merging
E0000         ; Default_Ignorable_Code_Point # Cn       <reserved-E0000>
"""

CONFUSABLES_TXT = """# confusables.txt sample
0430 ;\t0061 ;\tMA\t# ( а → a ) CYRILLIC SMALL LETTER A → LATIN SMALL LETTER A
0406 ;\t006C ;\tMA\t# ( І → l )
0049 ;\t006C ;\tMA\t# ( I → l )
FF41 ;\t0061 ;\tMA\t# full-width a: NFKC already folds it
0441 ;\t0063 ;\tMA\t# ( с → c )
0431 ;\t0036 ;\tMA\t# ( б → 6 ): a digit, not a letter
2474 ;\t0028 0031 0029 ;\tMA\t# several characters: skipped
"""


def test_generator_reads_and_merges_the_property(tmp_path):
    """Only the property's lines are read, and adjacent ranges are merged."""
    path = tmp_path / "DerivedCoreProperties.txt"
    path.write_text(DERIVED_SAMPLE, encoding="utf-8")
    version, ranges = load_generator().read_ignorable(path)
    assert version == "99.1.0"
    assert ranges == [(0xAD, 0xAD), (0x200B, 0x2010), (0xE0000, 0xE0000)]


def test_generator_refuses_a_file_without_the_property(tmp_path):
    """A file that is not DerivedCoreProperties.txt, or lacks the property, stops the script."""
    generator = load_generator()
    path = tmp_path / "other.txt"
    path.write_text("# something else\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="does not start"):
        generator.read_ignorable(path)
    path.write_text("# DerivedCoreProperties-1.0.0.txt\n0041 ; Alphabetic\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no Default_Ignorable_Code_Point"):
        generator.read_ignorable(path)


def test_generator_reads_unicode_confusables_txt(tmp_path):
    """Classes are joined through prototypes; a capital maps to the capital of its class."""
    path = tmp_path / "confusables.txt"
    path.write_text(CONFUSABLES_TXT, encoding="utf-8")
    folding = load_generator().read_confusable_letters(path)
    assert folding == {"\u0406": "I", "\u0430": "a", "\u0441": "c"}


def test_generator_reads_the_json_of_confusable_homoglyphs(tmp_path):
    """The JSON form (``{char: [{"c": ...}]}``) gives the same folding."""
    data = {
        "a": [{"c": "\u0430", "n": "CYRILLIC SMALL LETTER A"}],
        "\u0430": [{"c": "a", "n": "LATIN SMALL LETTER A"}],
        "l": [{"c": "I", "n": "x"}, {"c": "\u0406", "n": "y"}],
        "rn": [{"c": "m", "n": "two letters: skipped"}],
    }
    path = tmp_path / "confusables.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_generator().read_confusable_letters(path) == {"\u0406": "I", "\u0430": "a"}


def test_generator_writes_a_module_and_checks_it(tmp_path, capsys):
    """The script writes an importable module; --check passes on it and fails once it changes."""
    generator = load_generator()
    derived = tmp_path / "DerivedCoreProperties.txt"
    derived.write_text(DERIVED_SAMPLE, encoding="utf-8")
    confusables = tmp_path / "confusables.txt"
    confusables.write_text(CONFUSABLES_TXT, encoding="utf-8")
    output = tmp_path / "tables.py"
    arguments = ["--derived", str(derived), "--confusables", str(confusables)]
    assert generator.main([*arguments, "--output", str(output)]) == 0
    assert "3 ignorable ranges, 3 confusable letters" in capsys.readouterr().out
    namespace: dict[str, object] = {}
    exec(compile(output.read_text(encoding="utf-8"), str(output), "exec"), namespace)  # noqa: S102
    assert namespace["DEFAULT_IGNORABLE_RANGES"] == ((0xAD, 0xAD), (0x200B, 0x2010), (0xE0000,) * 2)
    assert namespace["CONFUSABLE_SOURCES"] == "\u0406\u0430\u0441"
    assert namespace["CONFUSABLE_TARGETS"] == "Iac"
    assert generator.main([*arguments, "--output", str(output), "--check"]) == 0
    output.write_text("# edited by hand\n", encoding="utf-8")
    assert generator.main([*arguments, "--output", str(output), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
