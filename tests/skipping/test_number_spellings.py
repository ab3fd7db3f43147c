"""Numbers as Spark compares them: every spelling of a number constant (decimal, E notation, D and F
suffixes, casts, integers past float32's and double's exact range) against every value a DOUBLE or
FLOAT column holds that no decimal names exactly, in files of one and two rows, with statistics as
each writer leaves them. A file holding a row that matches in either ANSI mode is kept (exhaustive,
where the property tests in test_pruning.py sample)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from optimizer.skipping.pruning import might_match, prepare
from tests.skipping.oracle import BASE, INEXACT, SINGLES, SPELLED, compare, compared_values, stats_for

OPS = ["=", "<>", "<", "<=", ">", ">="]
VALUES = {"f": [*INEXACT, 2.0, float("nan")], "g": SINGLES}


def _files(column: str) -> list[list[dict[str, Any]]]:
    values = VALUES[column]
    return [[{**BASE, column: v}] for v in values] + [
        [{**BASE, column: a}, {**BASE, column: b}] for a, b in itertools.combinations(values, 2)
    ]


def _predicates(column: str) -> list[tuple[str, list[tuple[str, str, Any]], str]]:
    """(SQL, its constants, comparison): each spelling with each operator, and IN lists of two."""
    single = [(f"{column} {op} {e[0]}", [e], op) for op in OPS for e in SPELLED]
    listed = [e for e in SPELLED if e[1] != "float"]
    pairs = [(f"{column} IN ({a[0]}, {b[0]})", [a, b], "=") for a, b in itertools.combinations(listed, 2)]
    return single + pairs


def _matches(column: str, constants: list[tuple[str, str, Any]], op: str, row: dict[str, Any]) -> bool:
    value = row[column]
    return any(
        compare(op, value, c) is True for ansi in (True, False) for c in compared_values(column, constants, ansi)
    )


@pytest.mark.parametrize("column", ["f", "g"])
@pytest.mark.parametrize("writer", ["ours", "foreign"])
def test_no_file_with_a_row_matching_a_spelled_number_is_skipped(column, writer):
    files = [(rows, stats_for(rows, writer, f"f{n}")) for n, rows in enumerate(_files(column))]
    wrong = []
    for text, constants, op in _predicates(column):
        prepared = prepare(text)
        for rows, stats in files:
            if any(_matches(column, constants, op, r) for r in rows) and not might_match(prepared, stats):
                wrong.append((text, [r[column] for r in rows]))
    assert not wrong, wrong[:10]


@pytest.mark.parametrize(
    ("text", "values", "kept"),
    [
        ("g = 16777217", [16777216.0], True),  # without ANSI, Spark compares in float32: 16777216 = 16777216
        ("g >= 16777217", [1.0, 16777216.0], True),
        ("g > 16777216", [1.0, 16777216.0], False),  # exact in float32: both modes agree, and prune
        ("f = 9007199254740993", [9007199254740992.0], True),  # the literal rounds to this double
        ("f = 16777217", [16777216.0], False),
        ("g > CAST(2.5 AS INT)", [2.5], True),  # Spark compares with 2, not 2.5
        ("g = 0.1", [SINGLES[0]], False),  # the float32 0.1 is not the double 0.1
        ("g = 0.1F", [SINGLES[0]], True),
        ("g > 0.1000000001", [SINGLES[0]], True),
        ("f = 0.1", [0.1], True),
        ("f IN (0.3, 2)", [0.30000000000000004], False),  # 0.1 + 0.2 is not the double 0.3 names
    ],
)
def test_what_a_spelled_number_keeps(text, values, kept):
    """Cases named one by one; where `kept` is False, the file really holds no match (checked above)."""
    column = text[0]
    assert might_match(prepare(text), stats_for([{**BASE, column: v} for v in values])) is kept, text
