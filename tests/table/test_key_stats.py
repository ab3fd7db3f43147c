"""Statistics on the clustering keys: a key past the table's statistics columns gets min/max before the
rewrite (so standard readers skip on it), never at the cost of a column the table already collects."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from optimizer.features import FeatureSet, SopFeature, ZFeature
from optimizer.table.access import Snapshot
from optimizer.table.key_stats import INDEXED_COLUMNS, STATS_COLUMNS, indexing_properties, key_statistics, unindexed
from querylog.records import ScanRecord
from querylog.store import QueryLogTable
from tests.service.test_service import NOW, write_config

WIDE = 40  # columns c0 .. c39; Delta collects statistics for the first 32 by default


def snapshot(configuration: dict[str, str] | None = None, nested: bool = False) -> Snapshot:
    fields = [{"name": f"c{i}", "type": "long", "nullable": True, "metadata": {}} for i in range(WIDE)]
    if nested:
        inner = {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}]}
        fields.insert(0, {"name": "s", "type": inner, "nullable": True, "metadata": {}})
    schema = json.dumps({"type": "struct", "fields": fields})
    return Snapshot("/t", 0, schema, (), (), configuration or {})


def test_a_key_past_the_first_32_columns_raises_the_indexed_count_to_cover_it():
    assert unindexed(snapshot(), ["c3", "c36", "c38", "nope"]) == ["c36", "c38"]
    assert indexing_properties(snapshot(), ["c36"]) == {INDEXED_COLUMNS: "37"}
    assert indexing_properties(snapshot(), ["c36", "c38"]) == {INDEXED_COLUMNS: "39"}
    assert indexing_properties(snapshot(), ["c3"]) == {}  # already collected
    # a nested leaf counts in the order Delta counts leaves: s.a is the first
    assert indexing_properties(snapshot(nested=True), ["c36"]) == {INDEXED_COLUMNS: "38"}


def test_the_tables_own_settings_are_extended_never_narrowed():
    assert indexing_properties(snapshot({INDEXED_COLUMNS: "50"}), ["c36"]) == {}
    assert indexing_properties(snapshot({INDEXED_COLUMNS: "-1"}), ["c39"]) == {}
    assert indexing_properties(snapshot({INDEXED_COLUMNS: "5"}), ["c3"]) == {}
    assert indexing_properties(snapshot({INDEXED_COLUMNS: "5"}), ["c7"]) == {INDEXED_COLUMNS: "8"}
    explicit = snapshot({STATS_COLUMNS: "c1, c2"})
    assert indexing_properties(explicit, ["c2", "c36"]) == {STATS_COLUMNS: "c1,c2,c36"}
    assert indexing_properties(explicit, ["c1"]) == {}


def test_the_decision_says_what_happens_to_keys_without_statistics():
    features = FeatureSet(z=(ZFeature("c36"),), sop=(SopFeature("c37 = 1"), SopFeature("c2 > 0")))
    note, record = key_statistics(snapshot(), features, enabled=True)
    assert "c36, c37 get min/max statistics first" in note and record is not None
    assert record["properties"] == {INDEXED_COLUMNS: "38"}
    note, record = key_statistics(snapshot(), features, enabled=False)
    assert "standard readers cannot skip on c36, c37" in note and "stats_for_clustering_keys: true" in note
    assert record is not None and record["properties"] == {}
    assert key_statistics(snapshot(), FeatureSet(z=(ZFeature("c1"),)), enabled=True) == ("", None)


@pytest.mark.spark
def test_serve_once_makes_a_key_past_column_32_skippable_for_standard_readers(spark, tmp_path):
    """40 columns, the workload filters c36: the run commits the property first, every file it writes
    carries c36's min/max, and DuckDB's Delta extension skips files on c36."""
    from pyspark.sql import functions as F

    from benchmarks.standard_reader import DuckDBReader
    from optimizer.config import load_config
    from optimizer.service.service import context, run_once
    from optimizer.table import open_table
    from optimizer.table.fingerprint import fingerprint

    path = str(tmp_path / "wide")
    columns = [((F.col("id") * (i + 7919)) % 1000).alias(f"c{i}") for i in range(WIDE)]
    table = open_table(path)
    table.create(spark, spark.range(0, 20000).select(*columns).repartition(6))
    before = table.snapshot()
    assert all("c36" not in f.min_values for f in before.files)  # Delta's default: the first 32 only
    expected = fingerprint(table.read_files(spark, before.files, before))
    QueryLogTable(path + "_querylog").append(
        [
            ScanRecord(
                f"q{i}", NOW - timedelta(minutes=i), "wide", (f"c36 >= {i * 15}", f"c36 < {i * 15 + 20}"), ("c36",), "t"
            )
            for i in range(60)
        ]
    )
    write_config(tmp_path, [{"name": "wide", "path": path}])
    ctx = context(load_config(tmp_path / "deltaopt.yaml"), spark=lambda: spark)
    (record,) = run_once(ctx, NOW)
    assert record.action.value == "optimize", record.reason
    assert "c36 get min/max statistics first" in record.reason

    after = table.snapshot()
    assert after.configuration.get(INDEXED_COLUMNS) == "37"
    written = [f for f in after.files if f.path not in before.by_path()]
    assert written and all("c36" in f.min_values and "c36" in f.max_values for f in written)
    assert fingerprint(table.read_files(spark, after.files, after)) == expected
    duck = DuckDBReader()
    try:
        scanned = duck.files_scanned(path, "c36 >= 300 AND c36 < 320")
        assert duck.count(path, "c36 >= 300 AND c36 < 320") == 400
    finally:
        duck.close()
    assert scanned is not None and scanned.files < scanned.total, scanned


def test_the_delta_rs_committer_sets_properties_in_one_commit(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from optimizer.table import open_table
    from optimizer.table.deltars_commit import DeltaRsCommitter

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({f"c{i}": list(range(10)) for i in range(WIDE)}))
    table = open_table(path)
    DeltaRsCommitter(table).set_properties({INDEXED_COLUMNS: "37"}, {"run_id": "r1"})
    assert table.snapshot().version == 1 and table.snapshot().configuration[INDEXED_COLUMNS] == "37"
    assert table.snapshot().num_records == 10


def test_stats_columns_are_matched_case_insensitively_as_delta_matches_them():
    """``'A,cc'`` on columns ``a`` and ``Cc`` already names both: nothing is appended (it was rewritten to
    ``A,cc,cc`` and the new files carried no statistics for the key)."""
    fields = [{"name": n, "type": "long", "nullable": True, "metadata": {}} for n in ("a", "Cc", "other")]
    mixed = Snapshot("/t", 0, json.dumps({"type": "struct", "fields": fields}), (), (), {STATS_COLUMNS: "A,cc"})
    assert unindexed(mixed, ["a", "cc"]) == []
    assert indexing_properties(mixed, ["a", "cc"]) == {}
    assert indexing_properties(mixed, ["other"]) == {STATS_COLUMNS: "A,cc,other"}
