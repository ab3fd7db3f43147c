"""The SOP id leading the order: a SOP partition smaller than a file is gathered into about one file,
where the SOP id as one more Z dimension spreads it along the Z curve; the estimator compares both."""

from __future__ import annotations

import pytest

from optimizer.clustering import optimize
from optimizer.estimate.candidates import candidate_layouts
from optimizer.features import FeatureSet, SopFeature, ZFeature
from optimizer.skipping.extended import load_index
from optimizer.table import open_table

KEYS = f"k IN ({', '.join(str(k) for k in range(0, 1000, 25))})"  # 40 of 1,000 keys: 4% of the rows


def test_the_flag_round_trips_and_is_absent_when_false():
    features = FeatureSet(z=(ZFeature("d"),), sop=(SopFeature(KEYS),))
    assert "sop_leads" not in features.as_dict()
    leading = FeatureSet.from_dict({**features.as_dict(), "sop_leads": True})
    assert leading.sop_leads and FeatureSet.from_dict(leading.as_dict()) == leading
    names = [name for name, _ in candidate_layouts(features)]
    assert "SOP id leading" in names and "SOP id leading" not in [n for n, _ in candidate_layouts(leading)]


@pytest.mark.spark
@pytest.mark.parametrize("leads", [False, True])
def test_a_small_sop_partition_fills_files_of_its_own_only_when_it_leads(spark, tmp_path, leads):
    from pyspark.sql import functions as F

    frame = spark.range(60_000).withColumn("k", (F.col("id") * 7919) % 1000).withColumn("d", F.col("id") % 3650)
    table = open_table(str(tmp_path / "t"))
    table.create(spark, frame.repartition(3))
    before = spark.read.format("delta").load(table.uri).groupBy().agg(F.count("*"), F.sum("id")).collect()
    optimize(spark, table, FeatureSet(z=(ZFeature("d"),), sop=(SopFeature(KEYS),), sop_leads=leads), 30_000)
    after = spark.read.format("delta").load(table.uri).groupBy().agg(F.count("*"), F.sum("id")).collect()
    assert before == after
    index = load_index(table, table.snapshot())
    holding = [path for path, stats in index.items() if stats.sop_bit(KEYS)]
    assert len(index) >= 10
    if leads:
        assert len(holding) <= 2, f"{len(holding)} of {len(index)} files hold the partition's rows"
    else:
        assert len(holding) > 2, "interleaved, the SOP id spreads the partition (what leading fixes)"
