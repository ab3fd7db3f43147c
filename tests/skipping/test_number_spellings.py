"""Numbers as Spark compares them: every spelling of a number constant (decimal, E notation, D and F
suffixes, casts, integers past float32's and double's exact range) against every value a DOUBLE or
FLOAT column holds that no decimal names exactly, in files of one and two rows, with statistics as
each writer leaves them. A file holding a row that matches in either ANSI mode is kept (exhaustive,
where the property tests in test_pruning.py sample)."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from sqlglot import exp

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


def _one_value(type_name: str, value: Any, **more: Any) -> Any:
    """A file whose column x (of `type_name`) holds only `value`, with `more` (sop, keys, expressions)."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    return FileStats("f", 1, {"x": column_bounds(type_name, value, value, 0, True)}, **more)


D = Decimal
SPARK4_ROUNDS = [  # Spark 4 widens to one decimal type keeping integral digits, rounding scale half up
    ("decimal(38,0)", D("1"), "x = 0.5"),
    ("decimal(38,0)", D("1"), "x <= 0.9"),
    ("decimal(38,0)", D("1"), "x IN (0.5, 7)"),
    ("decimal(38,0)", D("1"), "x BETWEEN 0.5 AND 0.9"),
    ("decimal(38,0)", D("1"), "0.5 = x"),
    ("decimal(38,0)", D("-1"), "x >= -0.5"),
    ("decimal(38,2)", D("0.01"), "x = 0.005"),
    ("decimal(38,10)", D("1"), "x = 1.00000000001"),
    ("bigint", 1, "x = 1.0000000000000000001"),
    ("int", 1, "x = 1." + "0" * 28 + "1"),
    ("decimal(38,20)", D("1.00000000000000000001"), "x IN (1, 12345678901234567890)"),  # the column rounds
]


@pytest.mark.parametrize(("type_name", "value", "text"), SPARK4_ROUNDS)
def test_a_comparison_spark_4_rounds_keeps_the_file(type_name, value, text):
    """Each of these is TRUE in Spark 4.0 (both ANSI modes) on a row holding `value` (review 65's finding 1);
    compared exactly, the file was skipped."""
    keys = {"x": frozenset([value])} if type_name in ("bigint", "int") else {}
    assert might_match(prepare(text), _one_value(type_name, value, keys=keys)), text


@pytest.mark.parametrize(
    ("type_name", "value", "text"),
    [("decimal(10,2)", D("1.00"), "x = 1.005"), ("bigint", 1, "x = 1.5"), ("decimal(38,2)", D("0.01"), "x > 0.01")],
)
def test_an_exact_comparison_still_prunes(type_name, value, text):
    """One decimal type holds the column and the constant unrounded: compared exactly, as before."""
    assert not might_match(prepare(text), _one_value(type_name, value)), text


@pytest.mark.parametrize(
    ("type_name", "value", "feature", "text"),
    [
        ("double", 9007199254740992.0, "x > 9007199254740992", "x = 9007199254740993"),
        ("float", SINGLES[0], "x <= 0.1", "x = 0.1F"),
        ("float", 16777216.0, "x > 16777216", "x = 16777217"),
        ("bigint", 9007199254740992, "x > 9007199254740992", "x = 9007199254740993D"),
        ("double", 0.1, "x > 0.1", "x >= 0.10000000000000001"),
        ("decimal(10,2)", D("1.00"), "x > 1", "x >= 1.0000000000000000001E0"),
        ("decimal(38,0)", D("1"), "x < 0.7", "x = 0.5"),
    ],
)
def test_a_feature_is_implied_only_by_constants_every_type_holds_exactly(type_name, value, feature, text):
    """The file's bit for `feature` is 0 (Spark finds no row), yet `text` is TRUE on its row: the two
    constants differ as written and Spark rounds them to one value (review 65's finding 2). Min/max keeps
    the file; the implication skipped it."""
    wide = _one_value(type_name, value)
    bounds = replace(wide.columns["x"], low=None, high=None)  # min/max alone keeps the file
    stats = replace(wide, columns={"x": bounds}, sop={feature: False})
    assert might_match(prepare(text), stats), (feature, text)


def test_exact_integer_constants_still_imply_a_feature():
    stats = replace(_one_value("bigint", 3), sop={"x > 5": False})
    assert not might_match(prepare("x > 10"), replace(stats, columns={"x": replace(stats.columns["x"], high=None)}))


def test_bits_and_ranges_over_a_float_column_are_not_used_in_a_reader_s_ansi_session():
    """deltaopt computes SOP bits and expression ranges without ANSI; with ANSI on (Spark 4's default) a
    FLOAT column compares with an integer in double and adds in double (review 65's finding 3)."""
    from optimizer.skipping.filestats import Bounds

    row = _one_value("float", 16777216.0)
    wide = {"x": replace(row.columns["x"], low=None, high=None)}
    assert might_match(prepare("x < 16777217"), replace(row, columns=wide, sop={"x < 16777217": False}))
    ranged = replace(row, expressions={"x + 1": Bounds("number", 1.100000023841858, 1.100000023841858, 0)})
    assert might_match(prepare("x + 1 < 1.100000002"), ranged)
    sized = replace(row, sop={"SIZE(a) = -1": False})  # size(NULL) is -1 without ANSI, NULL with it
    assert might_match(prepare("SIZE(a) = -1"), sized)


def test_equalities_merged_into_a_list_keep_a_float_column_s_file():
    """``g = 16777217 OR g = 0.5`` becomes ``g IN (0.5, 16777217)``, which Spark types as one (in double);
    the equality alone is TRUE without ANSI on 16777216 (float32), so the file is kept (finding 4)."""
    assert might_match(prepare("x = 16777217 OR x = 0.5"), _one_value("float", 16777216.0))


def test_a_string_compared_with_numbers_does_not_use_bits_computed_in_another_mode():
    """Without ANSI, ``s = 1`` casts the string to INT while ``s IN (1, 2)`` (what the normaliser makes of
    ``s = 1 OR s = 2``) casts the numbers to strings: '01' matches the first, not the second, whose bit is
    0; with ANSI both cast the string to BIGINT, and '01' matches. Bits over string functions compared
    with strings are still used."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    row = FileStats("f", 1, {"s": column_bounds("string", "01", "01", 0, True)})
    listed = replace(row, sop={"s IN (1, 2)": False})
    assert might_match(prepare("s = 1 OR s = 2"), listed)
    assert might_match(prepare("s IN (1, 2)"), listed)
    prefixed = replace(row, sop={"SUBSTRING(s, 1, 4) = 'DELI'": False})
    assert not might_match(prepare("SUBSTRING(s, 1, 4) = 'DELI'"), prefixed)


def _no_row_satisfies(text: str) -> dict[str, bool]:
    """The SOP bits of a file none of whose rows satisfies `text` (as deltaopt computes it, without ANSI),
    keyed by the canonical text pruning looks up."""
    from querylog.predicates.tree import rendered

    (conjunct,) = prepare(text).conjuncts
    return {rendered(conjunct): False}


MODE_DEPENDENT = [  # (column, Spark type, value, predicate): FALSE or NULL without ANSI, TRUE with it
    ("s", "string", "3000000000", "s > 1"),  # INT overflows to NULL without ANSI; BIGINT with it
    ("i", "int", 5, "i < '3000000000'"),
    ("g", "decimal(38,0)", D("1"), "g < '1.4'"),
    ("s.f", "float", 16777216.0, "s.f < 16777217"),  # a struct's FLOAT field
    ("a", "array<float>", None, "a[0] < 16777217"),
    ("i", "int", 16777216, "CAST(i AS FLOAT) < 16777217"),
]


@pytest.mark.parametrize(("column", "type_name", "value", "text"), MODE_DEPENDENT)
def test_a_bit_computed_without_ansi_is_not_used_where_ansi_may_differ(column, type_name, value, text):
    """Review 65b's finding 1: each predicate is TRUE with ANSI on a row the bit (computed without it) says
    does not satisfy it; min/max alone keeps the file, and so must the bit."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    stats = FileStats("f", 1, {column: column_bounds(type_name, value, value, 0, True)}, zone="UTC")
    assert might_match(prepare(text, "UTC"), replace(stats, sop=_no_row_satisfies(text))), text


def test_a_float_range_is_not_used():
    """A FLOAT expression's range was computed in float32; with ANSI, Spark computes it in double."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    ranged = column_bounds("float", 1.100000023841858, 1.100000023841858, 0, True)
    stats = FileStats("f", 1, {"d": column_bounds("double", 0.1, 0.1, 0, True)}, {"CAST(d AS FLOAT) + 1": ranged})
    assert might_match(prepare("CAST(d AS FLOAT) + 1 < 1.100000002"), stats)


def test_an_in_list_on_a_wide_decimal_implies_no_comparison():
    """Spark 4 widens ``g IN (2, 3)`` on DECIMAL(38,29) with INT, rounding 1.99..9 (29 nines) to 2, where
    ``g >= 2`` compares unrounded (review 65b's finding 2)."""
    nines = D("1." + "9" * 29)
    stats = _one_value("decimal(38,29)", nines)
    wide = replace(stats, columns={"x": replace(stats.columns["x"], low=None, high=None)})
    assert might_match(prepare("x IN (2, 3)"), replace(wide, sop=_no_row_satisfies("x >= 2")))


@pytest.mark.parametrize("type_name", ["int", "bigint"])
def test_integer_literals_of_any_size_imply_on_an_integer_column(type_name):
    """Review 65b's finding 3: past 2**24 integers are exact on an integer column (yyyymmdd dates); on a
    DOUBLE they may round, and the bit is not used."""
    for column_type, value in ((type_name, 30000000), ("double", 30000000.0)):
        stats = _one_value(column_type, value)
        unbounded = replace(stats, columns={"x": replace(stats.columns["x"], low=None, high=None)})
        bits = replace(unbounded, sop=_no_row_satisfies("x <= 20240102"))
        assert might_match(prepare("x < 20240101"), bits) is (column_type == "double"), column_type


def test_decimal_constants_imply_on_a_decimal_column_spark_widens_unrounded():
    """On DECIMAL(12,2), 1.5 and 2.25 are the values Spark compares (it widens them unrounded): a query
    above the feature's range is implied by it. On a DOUBLE the two may round (no implication)."""
    for column_type, value, implied in (("decimal(12,2)", D("1.00"), True), ("double", 1.0, False)):
        stats = _one_value(column_type, value)
        unbounded = replace(stats, columns={"x": replace(stats.columns["x"], low=None, high=None)})
        bits = replace(unbounded, sop=_no_row_satisfies("x > 1.5"))
        assert might_match(prepare("x >= 2.25"), bits) is not implied, column_type


@pytest.mark.parametrize(
    "text",
    [
        "COALESCE(s, '0') = 1",
        "CASE WHEN s > 'a' THEN s ELSE 'x' END = 1",
        "LENGTH(s) = '5'",
        "s + 0 > 1",
        "REGEXP_EXTRACT(s, 'a', 0) = 2",
        "CAST(i AS STRING) = 1",
        "unknown_udf(s) = 1",
    ],
)
def test_a_string_may_meet_a_number_however_it_is_spelled(text):
    """Review 65c's finding 2: each mixes a string and a number through a function, a branch or arithmetic
    (TRUE with ANSI on a row whose bit, computed without it, is 0); a function of unknown result counts."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    stats = FileStats(
        "f", 1, {"s": column_bounds("string", "01", "01", 0, True), "i": column_bounds("int", 1, 1, 0, True)}
    )
    assert might_match(prepare(text), replace(stats, sop=_no_row_satisfies(text))), text


def test_bits_of_string_functions_compared_with_strings_are_used():
    from optimizer.skipping.filestats import FileStats, column_bounds

    stats = FileStats("f", 1, {"s": column_bounds("string", "01", "01", 0, True)})
    for text in ("SUBSTRING(s, 1, 2) = 'ab'", "UPPER(s) IN ('A', 'B')", "COALESCE(s, 'x') = 'y'"):
        assert not might_match(prepare(text), replace(stats, sop=_no_row_satisfies(text))), text


def test_a_list_implies_no_comparison_on_an_expression_of_unknown_type():
    """Review 65c's finding 3: ABS(g) on DECIMAL(38,29) has no recorded type; ``ABS(g) IN (2, 3)`` widens
    with INT and rounds 1.99..9 to 2, ``ABS(g) >= 2`` does not."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    stats = FileStats("f", 1, {"g": column_bounds("decimal(38,29)", None, None, 0, True)})
    assert might_match(prepare("ABS(g) IN (2, 3)"), replace(stats, sop=_no_row_satisfies("ABS(g) >= 2")))
    assert not might_match(prepare("ABS(g) > 3"), replace(stats, sop=_no_row_satisfies("ABS(g) >= 2")))


def test_a_date_meeting_a_list_of_strings_does_not_use_bits():
    """Review 65d's findings 2 and 3: without ANSI Spark compares ``d IN ('2020-1-1', ..)`` as strings (FALSE
    on 2020-01-01), with ANSI as dates (TRUE). Pruning keeps ``d = '2020-1-1' OR ..``, whose equalities
    compare as dates in both modes, an OR (the query log's canonical text makes it a list)."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    day = dt.date(2020, 1, 1)
    stats = FileStats("f", 1, {"d": column_bounds("date", day, day, 0, True)})
    listed = "d IN ('2020-1-1', '2020-01-02')"
    assert might_match(prepare(listed), replace(stats, sop=_no_row_satisfies(listed)))
    (ored,) = prepare("d = '2020-1-1' OR d = '2020-01-02'").conjuncts
    assert isinstance(ored, exp.Or) and might_match(prepare("d = '2020-1-1' OR d = '2020-01-02'"), stats)
    unbounded = replace(stats, columns={"d": replace(stats.columns["d"], low=None, high=None)})
    equal = "d = '2020-01-05'"  # a date and a string compare as dates in both modes: its bit is used
    assert not might_match(prepare(equal), replace(unbounded, sop=_no_row_satisfies(equal)))


@pytest.mark.parametrize("text", ["b1 = (b2 <=> b3)", "b1 = b2 < b3", "b = s LIKE 't%'", "b = (i > 2)"])
def test_a_predicate_used_as_a_value_does_not_use_bits(text):
    """Review 65e: Spark reads ``b = s LIKE 't%'`` as ``(b = s) LIKE 't%'`` where sqlglot reads ``b = (s LIKE
    't%')``, and a chain reordered or a ``<=>`` unparenthesised reads otherwise: the canonical text the bit
    was computed on may not be what Spark ran."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    columns = {c: column_bounds("boolean", None, None, 0, True) for c in ("b", "b1", "b2", "b3")}
    columns |= {"s": column_bounds("string", "yes", "yes", 0, True), "i": column_bounds("int", 5, 5, 0, True)}
    stats = FileStats("f", 1, columns)
    assert might_match(prepare(text), replace(stats, sop=_no_row_satisfies(text))), text


def test_a_concatenation_beside_arithmetic_does_not_use_bits():
    """Review 65f: Spark reads ``'900' || i + 1`` as ``('900' || i) + 1`` (a string plus a number), sqlglot
    as ``'900' || (i + 1)``: the canonical text the bit was computed on is not what Spark ran."""
    from optimizer.skipping.filestats import FileStats, column_bounds

    columns = {"i": column_bounds("bigint", 7199254740993, 7199254740993, 0, True)}
    stats = FileStats("f", 1, columns | {"s": column_bounds("string", "9", "9", 0, True)})
    text = "'900' || i + 1 = s"
    assert might_match(prepare(text), replace(stats, sop=_no_row_satisfies(text))), text
