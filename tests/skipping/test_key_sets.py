"""Key sets: an OPTIMIZE keeps the exact values of the columns its key-list features test, in the
sidecar index only, and pruning answers any later list of keys with them, soundly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.clustering import optimize
from optimizer.features import FeatureSet, SopFeature
from optimizer.skipping.explain import explain
from optimizer.skipping.extended import load_index
from optimizer.skipping.scan import plan_scan
from optimizer.table import open_table

pytestmark = pytest.mark.spark
KEYS = 2000  # k takes every value of 0..1999; its category is k % 8


def listed(category: int, extra: tuple[int, ...] = ()) -> str:
    return f"k IN ({', '.join(map(str, sorted({*range(category, KEYS, 8), *extra})))})"


@pytest.fixture(scope="module")
def clustered(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """40,000 rows SOP-clustered on category 0's keys (a join-induced key set, scattered over 0..1999)."""
    from pyspark.sql import functions as F

    path = str(tmp_path_factory.mktemp("keys") / "t")
    frame = spark.range(40_000).withColumn("k", (F.col("id") * 7919) % KEYS).withColumn("v", F.col("id") % 97)
    table = open_table(path)
    table.create(spark, frame.repartition(4))
    optimize(spark, table, FeatureSet(sop=(SopFeature(listed(0)),)), 20_000)
    return table


def test_key_sets_live_in_the_sidecar_not_in_the_delta_log(clustered):
    snapshot = clustered.snapshot()
    index = load_index(clustered, snapshot)
    assert len(snapshot.files) >= 4 and set(index) == {f.path for f in snapshot.files}
    assert all(set(stats.key_sets) == {"k"} for stats in index.values())
    gathered = [stats for stats in index.values() if stats.key_sets["k"] <= set(range(0, KEYS, 8))]
    assert gathered, "SOP clustering gathered category 0's rows into files of their own"
    commit = sorted(Path(clustered.uri, "_delta_log").glob("*.json"))[-1]
    adds = [json.loads(line)["add"] for line in commit.read_text().splitlines() if '"add"' in line]
    assert adds and all("keys" not in json.loads(a["stats"])["deltaopt"] for a in adds)


@pytest.mark.parametrize("category,extra", [(3, ()), (5, ()), (3, (0, 8)), (0, ())])
def test_any_later_list_of_keys_skips_soundly(spark, clustered, category, extra):
    """Lists the layout never saw (another category, or keys a changed dimension moved into it) skip
    by key sets where min/max cannot, and never a file that holds a listed key."""
    from pyspark.sql import functions as F

    where = listed(category, extra)
    kept = {f.path for f in plan_scan(clustered, where).files}
    wanted = {*range(category, KEYS, 8), *extra}
    frame = spark.read.format("delta").load(clustered.uri).withColumn("f", F.input_file_name())
    holding = {
        r["f"].rsplit("/", 1)[-1] for r in frame.where(F.col("k").isin(sorted(wanted))).select("f").distinct().collect()
    }
    assert holding <= {p.rsplit("/", 1)[-1] for p in kept}, "a file holding a listed key was skipped"
    result = explain(clustered, where)
    assert result.standard.files == result.total_files, "min/max of k cannot exclude scattered keys"
    if category != 0 and not extra:
        assert result.skipped_by["key sets"] > 0 and result.deltaopt.files < result.total_files
