"""Row groups as a reader that skips them sees them (`skipping.row_groups`): footers read into
statistics, and the share of a kept file such a reader reads."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.estimate.replay import Query, query_bytes
from optimizer.skipping.filestats import Bounds, FileStats
from optimizer.skipping.pruning import might_match, prepare
from optimizer.skipping.row_groups import RowGroup, footer_row_groups, group_footers, read_share
from optimizer.table.access import DataFile

TYPES = {"x": "bigint", "s": "string", "d": "date", "f": "double"}


def _footer(tmp_path, table: pa.Table, rows_per_group: int) -> pq.FileMetaData:
    path = tmp_path / "part.parquet"
    pq.write_table(table, path, row_group_size=rows_per_group)
    return pq.ParquetFile(path).metadata


def _table(count: int) -> pa.Table:
    return pa.table(
        {
            "x": pa.array(range(count), pa.int64()),
            "s": pa.array([f"k{i:05d}" for i in range(count)]),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i // 100) for i in range(count)]),
            "f": pa.array([float(i) for i in range(count)]),
        }
    )


def test_each_row_group_gets_its_footers_bounds_and_bytes(tmp_path):
    metadata = _footer(tmp_path, _table(4000), 1000)
    groups = footer_row_groups(DataFile("part.parquet", 0, 4000), group_footers(metadata), TYPES)
    assert len(groups) == 4
    for g, group in enumerate(groups):
        x = group.stats.columns["x"]
        assert (x.low, x.high, x.nulls) == (g * 1000, g * 1000 + 999, 0)
        assert group.stats.columns["s"].low == f"k{g * 1000:05d}"
        assert group.stats.columns["d"].low == dt.date(2024, 1, 1) + dt.timedelta(days=g * 10)
        assert group.stats.rows == 1000
        chunk = metadata.row_group(g)
        assert group.bytes == {c: float(chunk.column(i).total_compressed_size) for i, c in enumerate(TYPES)}


def test_a_double_gets_no_bounds_from_a_footer_so_a_filter_on_it_reads_every_group(tmp_path):
    """A footer leaves NaN out of a double's maximum where Spark orders NaN above every number."""
    metadata = _footer(tmp_path, _table(2000), 1000)
    groups = footer_row_groups(DataFile("part.parquet", 0, 2000), group_footers(metadata), TYPES)
    assert all(g.stats.columns["f"].low is None for g in groups)
    assert read_share(prepare("f = 5.0"), groups, None) == {c: 1.0 for c in TYPES}


def test_a_range_in_one_group_reads_that_group_alone(tmp_path):
    metadata = _footer(tmp_path, _table(4000), 1000)
    groups = footer_row_groups(DataFile("part.parquet", 0, 4000), group_footers(metadata), TYPES)
    share = read_share(prepare("x BETWEEN 1100 AND 1200"), groups, frozenset({"x", "s"}))
    sizes = [g.bytes for g in groups]
    assert set(share) == {"x", "s"}
    for column in ("x", "s"):
        assert share[column] == pytest.approx(sizes[1][column] / sum(s[column] for s in sizes))


def test_column_mapping_reads_physical_columns_under_their_logical_names(tmp_path):
    physical = _table(2000).rename_columns(["col-1", "col-2", "col-3", "col-4"])
    metadata = _footer(tmp_path, physical, 1000)
    names = {"col-1": "x", "col-2": "s", "col-3": "d"}  # col-4 was dropped: no logical column
    groups = footer_row_groups(DataFile("part.parquet", 0, 2000), group_footers(metadata), TYPES, names)
    assert set(groups[0].bytes) == {"x", "s", "d"}
    assert groups[1].stats.columns["x"].low == 1000


def test_a_file_the_files_statistics_drop_reads_nothing_whatever_its_groups():
    stats = [
        FileStats("a", 200, {"x": Bounds("number", 0, 99, 0, type_name="bigint")}),
        FileStats("b", 200, {"x": Bounds("number", 100, 199, 0, type_name="bigint")}),
    ]
    halves = [
        RowGroup(
            FileStats(f"a#{h}", 100, {"x": Bounds("number", 50 * h, 50 * h + 49, 0, type_name="bigint")}),
            {"x": 10.0, "y": 30.0},
        )
        for h in (0, 1)
    ]
    groups = {"a": halves}
    sizes = {"a": {"x": 20.0, "y": 60.0}, "b": {"x": 20.0, "y": 60.0}}
    query = Query(prepare("x = 60"), frozenset({"x", "y"}), 1.0)
    assert query_bytes(query, stats, sizes) == (80.0, 160.0)  # files alone: a is read whole
    assert query_bytes(query, stats, sizes, groups) == (40.0, 160.0)  # a's second group; b dropped
    narrower = Query(prepare("x = 60"), frozenset({"x"}), 1.0)
    assert query_bytes(narrower, stats, sizes, groups) == (10.0, 40.0)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-50, 50), min_size=1, max_size=200),
    per_group=st.integers(1, 40),
    low=st.integers(-60, 60),
    width=st.integers(0, 20),
)
def test_a_group_holding_a_matching_row_is_always_read(tmp_path_factory, values, per_group, low, width):
    """Footer bounds hold every row of their group: the priced share never leaves out a matching row."""
    directory = tmp_path_factory.mktemp("groups")
    metadata = _footer(directory, pa.table({"x": pa.array(values, pa.int64())}), per_group)
    groups = footer_row_groups(DataFile("p", 0, len(values)), group_footers(metadata), {"x": "bigint"})
    predicate = prepare(f"x BETWEEN {low} AND {low + width}")
    for g, group in enumerate(groups):
        rows = values[g * per_group : (g + 1) * per_group]
        if any(low <= v <= low + width for v in rows):
            assert might_match(predicate, group.stats)


def test_a_footer_string_that_is_not_utf8_is_no_bound_not_an_error(tmp_path):
    """A writer that stored bytes in a string column: the footer cannot be decoded as text; the group
    then has no bound on it (read), and the file's column sizes still come through."""
    table = pa.table({"s": pa.array([b"\xff\xfe", b"a"], pa.binary())})
    path = tmp_path / "bad.parquet"
    pq.write_table(table.cast(pa.schema([("s", pa.string())]), safe=False), path)
    footers = group_footers(pq.ParquetFile(path).metadata)
    assert footers[0].chunks["s"].low is None and footers[0].chunks["s"].bytes > 0


def test_long_strings_keep_a_prefix_of_their_minimum_and_no_maximum(tmp_path):
    long = "x" * 40
    metadata = _footer(tmp_path, pa.table({"s": [long + "a", long + "b"]}), 10)
    (footer,) = group_footers(metadata)
    assert footer.chunks["s"].low == long[:32] and footer.chunks["s"].high is None
