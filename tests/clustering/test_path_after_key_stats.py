"""A run whose clustering keys first get statistics (a property commit) writes its files for the table
after that commit: the rewrite path is chosen again there, so a feature enabled since the run was planned
(row tracking here) puts Delta's writer in charge, and the result says so."""

from __future__ import annotations

import pytest

from optimizer.features import FeatureSet
from optimizer.table import open_table

pytestmark = pytest.mark.spark


def test_files_are_written_for_the_table_after_the_key_statistics_commit(spark, tmp_path):
    from optimizer.clustering.job import optimize

    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, pad STRING, x BIGINT) USING delta "
        "TBLPROPERTIES ('delta.dataSkippingNumIndexedCols'='1', 'delta.feature.rowTracking'='supported')"
    )
    for i in range(3):
        rows = spark.range(i * 500, (i + 1) * 500).selectExpr("id", "cast(id as string) pad", "id % 97 x")
        rows.repartition(2).write.format("delta").mode("append").save(path)
    before = sorted(spark.read.format("delta").load(path).collect())
    table = open_table(path)
    planned = table.snapshot()
    assert not planned.features.needs_delta_writer
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking'='true')")

    result = optimize(spark, table, FeatureSet.from_dict({"z": ["x"]}), 16_000, snapshot=planned)

    assert result.properties, "the run was meant to give its key statistics first"
    assert result.output.get("writer") == "delta", result.output
    assert result.path is not None and result.path.delta_writer
    assert sorted(spark.read.format("delta").load(path).collect()) == before
