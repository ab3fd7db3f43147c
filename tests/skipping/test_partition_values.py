"""Partition values bound a file: every row of the file holds them. Spelled as the Delta log spells them,
they prune like exact statistics, for strings, integers, decimals, dates and booleans; any other spelling
or type (timestamps, floats) keeps the file."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from optimizer.skipping.filestats import file_stats, partition_value
from optimizer.skipping.pruning import might_match, prepare
from optimizer.table.access import DataFile
from tests.skipping.oracle import TYPES, predicate_strategy, row_strategy

PARTITIONED = ("i", "s", "d", "b", "p")  # the oracle's columns a table may be partitioned by, all but t and f


def spelled(value: Any) -> str | None:
    """A partition value as a Delta writer records it in the log."""
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=row_strategy(), predicate=predicate_strategy())
def test_a_file_whose_partition_values_match_is_never_skipped(row, predicate):
    text, oracle = predicate
    data_file = DataFile("f", 100, 3, 0, {c: spelled(row[c]) for c in PARTITIONED})  # t and f: no statistics
    if oracle(row) is True:
        assert might_match(prepare(text), file_stats(data_file, TYPES, None)), (text, row)


@pytest.mark.parametrize(
    ("where", "kept"),
    [
        ("i = 4", False),
        ("i = 3", True),
        ("i > 3", False),
        ("d >= DATE '2024-03-02'", False),
        ("d = '2024-03-01'", True),
        ("p < 3.5", False),
        ("p = 3.50", True),
        ("b = FALSE", False),
        ("b", True),
        ("i IS NULL", False),
    ],
)
def test_partition_values_of_every_bounded_type_prune(where, kept):
    values = {"i": "3", "d": "2024-03-01", "p": "3.50", "b": "true", "s": "x"}
    stats = file_stats(DataFile("f", 100, 3, 0, values), TYPES, None)
    assert might_match(prepare(where), stats) is kept


@pytest.mark.parametrize(
    ("type_name", "value"),
    [
        ("bigint", "1_000"),
        ("bigint", ""),
        ("bigint", " 5"),
        ("int", "99999999999"),
        ("int", "٥"),
        ("date", "20240301"),
        ("date", "2024-02-30"),
        ("decimal(10,2)", "1.505"),
        ("decimal(4,2)", "123.5"),
        ("decimal(10,2)", "1e3"),
        ("boolean", "1"),
        ("timestamp", "2024-03-01 00:00:00"),
        ("double", "1.5"),
    ],
)
def test_a_spelling_a_reader_might_read_otherwise_bounds_nothing(type_name, value):
    """Python parses more than Spark casts (underscores, other digits, ISO weeks), and Spark reads a value
    past its type's range or scale as null or rounded: such a value must keep the file."""
    assert partition_value(type_name, value) is None
    stats = file_stats(DataFile("f", 100, 3, 0, {"x": value}), {"x": type_name}, None)
    assert stats.columns["x"].low is None and stats.columns["x"].high is None


@pytest.mark.parametrize(
    "where", ["x = 0.1", "x <= 0.1", "x >= 0.1", "x IN (0.1)", "x IN (0.3, 0.1)", "x = 1E-1", "x = CAST(0.1 AS DOUBLE)"]
)
def test_a_double_column_is_compared_with_a_number_literal_in_double(where):
    """Spark casts the literal to the nearest double: the file holding the double 0.1 matches ``x = 0.1``
    (review 64c: it compared Decimal('0.1') exactly with 0.1000000000000000055... and skipped the file)."""
    data_file = DataFile("f", 100, 2, 0, {}, {"x": 0.1}, {"x": 0.1}, {"x": 0})
    assert might_match(prepare(where), file_stats(data_file, {"x": "double"}, None))
    assert not might_match(prepare("x = 0.2"), file_stats(data_file, {"x": "double"}, None))


def test_an_unparsed_timestamp_partition_value_keeps_its_family():
    """No bounds, but a timestamp: expressions over it stay zone-dependent (`skipping.zones`)."""
    stats = file_stats(DataFile("f", 100, 3, 0, {"t": "2024-03-01 00:00:00"}), {"t": "timestamp"}, None)
    assert stats.columns["t"].family == "timestamp" and stats.columns["t"].low is None


@pytest.mark.parametrize(
    ("type_name", "value", "where"),
    [
        ("bigint", 5, "x >= 5.0000000000000001E0"),
        ("bigint", 5, "x IN (5.0000000000000001E0)"),
        ("bigint", 9007199254740993, "x = CAST(9007199254740992 AS DOUBLE)"),
        ("decimal(10,2)", Decimal("0.30"), "x >= 0.30000000000000001D"),
        ("decimal(38,20)", Decimal("0.10000000000000000001"), "x = 1E-1"),
        ("bigint", 16777217, "x = CAST(16777216 AS FLOAT)"),
        ("double", 0.10000000149011612, "x = 0.1F"),
    ],
)
def test_a_double_or_float_literal_is_compared_as_spark_promotes_it(type_name, value, where):
    """Against a double literal Spark casts an integer or decimal column to double; against a FLOAT it
    compares in float32, which pruning keeps the file for (review 64c: each of these skipped a file whose
    value Spark finds equal)."""
    data_file = DataFile("f", 100, 2, 0, {}, {"x": value}, {"x": value}, {"x": 0})
    assert might_match(prepare(where), file_stats(data_file, {"x": type_name}, None))


def test_exact_literals_still_prune_integer_and_decimal_columns():
    data_file = DataFile("f", 100, 2, 0, {}, {"x": 5}, {"x": 5}, {"x": 0})
    stats = file_stats(data_file, {"x": "bigint"}, None)
    assert not might_match(prepare("x > 5"), stats) and not might_match(prepare("x = 6E0"), stats)


SPELLINGS = {  # a valid spelling of a value of each type a partition column may have
    "tinyint": "7",
    "smallint": "7",
    "int": "7",
    "bigint": "7",
    "decimal(10,2)": "7.25",
    "date": "2024-02-29",
    "boolean": "true",
    "string": "x",
    "float": "7.5",
    "double": "7.5",
    "timestamp": "2024-02-29 10:00:00",
    "timestamp_ntz": "2024-02-29 10:00:00",
    "binary": "x",
}


@pytest.mark.parametrize("type_name", sorted(SPELLINGS))
def test_the_estimate_bounds_the_partition_types_real_files_are_bounded_by(type_name):
    """One rule for both sides (`partition_bounded`): a type whose partition values bound real files gets a
    range in the estimate's virtual files, and no other. A boolean partition column pruned the real files and
    none of the virtual ones, so the estimate priced a layout's files as reading both partitions."""
    from pyspark.sql import types as T

    from optimizer.estimate.virtual_files import _partition_stats
    from optimizer.skipping.filestats import partition_bounded

    value = SPELLINGS[type_name]
    bounds = file_stats(DataFile("f", 1, 1, 0, {"c": value}), {"c": type_name}).columns["c"]
    real = bounds.low is not None and bounds.high is not None
    kinds = {
        **{"tinyint": T.ByteType(), "smallint": T.ShortType(), "int": T.IntegerType(), "bigint": T.LongType()},
        **{"decimal(10,2)": T.DecimalType(10, 2), "date": T.DateType(), "boolean": T.BooleanType()},
        **{"string": T.StringType(), "float": T.FloatType(), "double": T.DoubleType(), "binary": T.BinaryType()},
        **{"timestamp": T.TimestampType(), "timestamp_ntz": T.TimestampNTZType()},
    }
    assert kinds[type_name].simpleString() == type_name
    schema = T.StructType().add("c", kinds[type_name])
    virtual = [c.name for c in _partition_stats(schema, ["c"])] == ["c"]
    assert real == virtual == partition_bounded(type_name), (real, virtual)
