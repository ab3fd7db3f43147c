"""Sidecar pruning: a run's extended-statistics file goes once none of its files is active and it is
old enough; a fresh one (a run that may still be committing) and one describing active files stay,
and the index read afterwards is the same."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import pytest

from optimizer.features import FeatureSet, ZFeature
from optimizer.skipping.extended import INDEX_DIR, load_index, prune_index
from tests.service.test_service import make_table

pytestmark = pytest.mark.spark


def test_a_sidecar_of_rewritten_files_is_pruned_once_old(spark, tmp_path):
    from optimizer.clustering import optimize

    table = make_table(spark, str(tmp_path / "t"), rows=4000, files=4)
    features = FeatureSet(z=(ZFeature("x"),))
    first = optimize(spark, table, features, 50_000, run_id="first")
    snapshot = table.snapshot()
    second = optimize(spark, table, features, 80_000, files=list(snapshot.files), snapshot=snapshot, run_id="second")
    assert first.version is not None and second.version is not None
    index_dir = tmp_path / "t" / INDEX_DIR
    assert sorted(p.name for p in index_dir.iterdir()) == ["first.json", "second.json"]
    latest = table.snapshot()
    before = load_index(table, latest)
    assert prune_index(table, latest, datetime.now(UTC)) == []  # both fresh: a run may still be committing
    (index_dir / "dying.json").write_text('{"v": 1, "run": "dying", "files": {"part-x.parquet": {"size": 1}}}')
    day_ago = time.time() - 2 * 86400
    for name in ("first.json", "second.json"):
        os.utime(index_dir / name, (day_ago, day_ago))
    pruned = prune_index(table, latest, datetime.now(UTC))
    assert [p.rsplit("/", 1)[-1] for p in pruned] == ["first.json"]  # second describes the active files
    assert sorted(p.name for p in index_dir.iterdir()) == ["dying.json", "second.json"]  # fresh one stays
    assert load_index(table, latest) == before
    assert prune_index(table, latest, datetime.now(UTC) + timedelta(days=3))[0].endswith("dying.json")
