"""A standard reader priced at row-group granularity: virtual row groups cut in the job's in-file
order, real files' row groups from their footers, and a layout whose order inside one file is what a
reader skips by."""

from __future__ import annotations

import itertools

import pytest

from optimizer.config import Thresholds
from querylog.records import ScanRecord
from tests.estimate.workloads import NOW

pytestmark = pytest.mark.spark

ROWS = 8000


@pytest.fixture(scope="module")
def unsorted(spark, tmp_path_factory):
    """4 files of 2,000 rows, each holding x over its whole range (one row group each), and the rows
    as the estimate's sample."""
    from pyspark.sql import functions as F

    from optimizer.table import open_table

    table = open_table(str(tmp_path_factory.mktemp("row-groups") / "t"))
    frame = spark.range(ROWS).withColumn("x", ((F.col("id") * 7919) % ROWS).cast("int"))
    frame = frame.withColumn("pad", F.sha2(F.col("id").cast("string"), 256))
    snapshot = table.create(spark, frame.repartition(4))
    sample = table.read_files(spark, snapshot.files, snapshot).cache()
    return table, snapshot, sample


def test_virtual_row_groups_follow_the_order_the_job_sorts_a_file_in(unsorted):
    """Z on one column sorts each file by it: its row groups are consecutive, disjoint ranges; the same
    groups whether the virtual files are aggregated by file index or moved into partitions."""
    from optimizer.estimate.virtual_files import virtual_files
    from optimizer.features import FeatureSet

    _, snapshot, sample = unsorted
    features = FeatureSet.from_dict({"z": ["x"]})
    by_index = virtual_files(sample, snapshot, features, 2, row_groups=(4, ()))
    moved = virtual_files(sample, snapshot, features, 2, measure=lambda _: {}, row_groups=(4, ()))
    assert by_index.groups == moved.groups
    assert sorted(by_index.groups) == sorted(by_index.rows)  # every file cut
    for path, groups in by_index.groups.items():
        assert len(groups) == 4 and sum(g.rows or 0 for g in groups) == by_index.rows[path]
        ranges = [(g.columns["x"].low, g.columns["x"].high) for g in groups]
        assert all(high < next_low for (_, high), (next_low, _) in itertools.pairwise(ranges)), ranges
    assert virtual_files(sample, snapshot, features, 2).groups == {}  # one group per file: nothing to cut


def test_a_writer_that_sorts_no_file_gets_no_row_groups_along_the_layout_and_its_rows_written_shuffled(unsorted):
    """Delta's OPTIMIZE range-partitions rows into files and leaves each file's rows unsorted by default:
    priced so (`sorted_within=False`), a file has no row groups along the layout, and the rows measured
    for compression come in no order of it; the files themselves (their rows, their x ranges) are the same."""
    from optimizer.estimate.virtual_files import virtual_files
    from optimizer.features import FeatureSet

    _, snapshot, sample = unsorted
    features = FeatureSet.from_dict({"z": ["x"]})
    written: dict[bool, list[list[int]]] = {}

    def capture(order: bool):  # type: ignore[no-untyped-def]
        def measure(frame):  # type: ignore[no-untyped-def]
            written[order] = [part for part in frame.rdd.glom().map(lambda rows: [r.x for r in rows]).collect() if part]
            return {}

        return measure

    ordered = virtual_files(sample, snapshot, features, 2, capture(True), row_groups=(4, ()))
    shuffled = virtual_files(sample, snapshot, features, 2, capture(False), row_groups=(4, ()), sorted_within=False)
    assert ordered.groups and shuffled.groups == {}
    assert all(part == sorted(part) for part in written[True]) and len(written[True]) == 2
    assert not any(part == sorted(part) for part in written[False])
    assert sorted(map(sorted, written[False])) == sorted(written[True])  # the same files, rows in another order
    assert sorted(shuffled.rows.values()) == sorted(ordered.rows.values())


@pytest.mark.parametrize(
    "layout",
    [{"z": ["x"], "sop": ["x % 3 = 0"]}, {"z": ["x % 100", "x"]}, {}],
    ids=["Z + SOP", "expression Z", "none"],
)
def test_file_statistics_merged_from_row_groups_equal_those_aggregated_per_file(unsorted, layout):
    """With row groups, a virtual file's statistics (Delta's, expression ranges, SOP bits) are merged
    from its groups' and equal those aggregated per file directly; groups are bounded on the column the
    rows are ordered by, and a layout that orders none is not cut."""
    from optimizer.estimate.virtual_files import virtual_files
    from optimizer.features import FeatureSet

    _, snapshot, sample = unsorted
    features = FeatureSet.from_dict(layout)
    grouped = virtual_files(sample, snapshot, features, 3, row_groups=(4, ()))
    whole = virtual_files(sample, snapshot, features, 3)
    if layout:  # ordered by x within each file: cut, and bounded on x
        assert sum(len(g) for g in grouped.groups.values()) >= 3 * 3
        assert all(g.columns["x"].low is not None for groups in grouped.groups.values() for g in groups)
    else:  # rows in no order within a file: the sample cannot tell what a real group spans
        assert grouped.groups == {}
    key = lambda f: f.path  # noqa: E731
    assert grouped.rows == whole.rows
    assert sorted(grouped.files, key=key) == sorted(whole.files, key=key)
    assert sorted(grouped.standard, key=key) == sorted(whole.standard, key=key)


def selective_benefit(table, snapshot, sample, row_group_size: int):  # type: ignore[no-untyped-def]
    """The estimate of Z-ordering on x, in one target file of `row_group_size` row groups, for 20 scans of
    ``x < ROWS / 8`` reading x and pad, by standard readers and deltaopt's, without compression."""
    from optimizer.estimate.layouts import benefit_of
    from optimizer.features import FeatureSet

    records = [ScanRecord(f"q{i}", NOW, "t", (f"x < {ROWS // 8}",), ("x", "pad"), "test") for i in range(20)]
    size = sum(f.size for f in snapshot.files)
    thresholds = Thresholds(
        target_file_size=size, row_group_size=row_group_size, readers={"standard": 1.0}, estimate_compression=False
    )
    features = FeatureSet.from_dict({"z": ["x"]})
    return benefit_of(
        table,
        snapshot,
        snapshot.files,
        features=features,
        sample=sample,
        records=records,
        thresholds=thresholds,
        now=NOW,
    )


def test_a_standard_reader_is_priced_by_the_row_groups_it_skips(unsorted):
    """One target file: by files alone, a standard reader reads the whole file whatever its order (no
    benefit); with four row groups per file, x sorted inside it lets a selective filter read one."""
    table, snapshot, sample = unsorted
    size = sum(f.size for f in snapshot.files)

    def standard(row_group_size: int) -> dict[str, float]:
        return selective_benefit(table, snapshot, sample, row_group_size).readers["standard"]

    whole_files = standard(size)
    groups = standard(size // 4)
    assert whole_files["bytes_per_query_after"] == pytest.approx(whole_files["bytes_per_query_before"], rel=0.01)
    assert groups["bytes_per_query_before"] == pytest.approx(whole_files["bytes_per_query_before"])  # 1 group a file
    assert groups["bytes_per_query_after"] < 0.3 * groups["bytes_per_query_before"], groups


def test_the_files_as_they_are_are_priced_by_their_own_row_groups(spark, tmp_path):
    """A file already sorted by x in four row groups (written by delta-rs): a selective filter on x reads
    one of them now, so sorting it again gains nothing, and no layout is credited with skipping it has."""
    import pyarrow as pa
    from deltalake import WriterProperties, write_deltalake

    from optimizer.table import open_table

    data = pa.table({"x": pa.array(range(ROWS), pa.int64()), "pad": [f"{i * 7919:064x}" for i in range(ROWS)]})
    write_deltalake(str(tmp_path / "t"), data, writer_properties=WriterProperties(max_row_group_size=ROWS // 4))
    table = open_table(str(tmp_path / "t"))
    snapshot = table.snapshot()
    sample = table.read_files(spark, snapshot.files, snapshot).cache()
    benefit = selective_benefit(table, snapshot, sample, sum(f.size for f in snapshot.files) // 4)
    for reader in ("standard", "deltaopt"):
        figures = benefit.readers[reader]
        assert figures["bytes_per_query_before"] < 0.35 * benefit.bytes_per_query_total, figures
        assert figures["bytes_per_query_after"] == pytest.approx(figures["bytes_per_query_before"], rel=0.2), figures


def test_a_sample_too_small_for_row_groups_prices_whole_files(unsorted):
    """Virtual groups of fewer than GROUP_SAMPLE_ROWS sampled rows would look far narrower than real
    ones: with 8,000 sampled rows over 16 files (500 a file), a file is cut in 2 groups, not 8; over 40
    files, not at all."""
    from optimizer.estimate.virtual_files import GROUP_SAMPLE_ROWS, virtual_files
    from optimizer.features import FeatureSet

    _, snapshot, sample = unsorted
    features = FeatureSet.from_dict({"z": ["x"]})
    assert ROWS // (16 * GROUP_SAMPLE_ROWS) == 2
    cut = virtual_files(sample, snapshot, features, 16, row_groups=(8, ()))
    assert max(len(groups) for groups in cut.groups.values()) <= 3  # 2 groups; a cut at a repeated key moves
    assert virtual_files(sample, snapshot, features, 40, row_groups=(8, ())).groups == {}


def test_a_filtered_column_past_deltas_statistics_bounds_virtual_groups(unsorted):
    """Footers bound every column; Delta, the first 32 (here: 1). A filtered column past them gets group
    bounds, and the files' Delta statistics stay as Delta keeps them."""
    from dataclasses import replace

    from optimizer.estimate.virtual_files import virtual_files
    from optimizer.features import FeatureSet

    _, snapshot, sample = unsorted
    one_column = replace(snapshot, configuration={**snapshot.configuration, "delta.dataSkippingNumIndexedCols": "1"})
    made = virtual_files(sample, one_column, FeatureSet.from_dict({"z": ["x"]}), 2, row_groups=(4, {"x"}))
    assert all(f.columns["x"].low is None for f in made.standard)  # Delta keeps id's statistics only
    assert all(g.columns["x"].low is not None for groups in made.groups.values() for g in groups)


def test_virtual_groups_are_bounded_only_on_the_columns_rows_are_ordered_by(unsorted):
    """A few hundred sampled rows look narrow on a column the layout does not order, where a real group
    of 100,000s of rows spans it: only the Z column bounds a virtual group."""
    from optimizer.estimate.virtual_files import virtual_files
    from optimizer.features import FeatureSet

    _, snapshot, sample = unsorted
    made = virtual_files(sample, snapshot, FeatureSet.from_dict({"z": ["x"]}), 2, row_groups=(4, {"x", "id"}))
    groups = [g for found in made.groups.values() for g in found]
    assert groups and all(g.columns["x"].low is not None and g.columns["id"].low is None for g in groups)
