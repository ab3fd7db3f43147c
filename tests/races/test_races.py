"""The race battery (`benchmarks.races`) as the slow tier: one test per (concurrent operation, commit
path), each a real Delta operation landed in the middle of a real deltaopt OPTIMIZE, checked against
the operation alone (rows, timestamps in two time zones, row ids, history). `make test-slow` runs them;
`python -m benchmarks races` prints the same cases as one table."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from benchmarks import race_cases, races
from benchmarks import race_checks as rc

pytestmark = [pytest.mark.slow, pytest.mark.spark]
PASSING = ("committed, rows ok", "gave up cleanly", "nothing committed, rows ok")


@pytest.fixture(scope="module")
def battery(spark, tmp_path_factory):
    """Base tables made once for the module (each copied per case), and where the copies go."""
    rc.prepare_sources(spark)
    root = tmp_path_factory.mktemp("races")
    (root / "runs").mkdir()
    return rc.Bases(spark, root / "bases"), root / "runs"


def _id(case: race_cases.Case) -> str:
    extra = "" if case.layout == "combined" else f"-{case.layout}-{case.shape}-{case.lands}"
    return f"{case.operation}-{case.path}{extra}".replace(" + ", "+").replace(" ", "_")


@pytest.mark.parametrize("case", race_cases.cases(full=False), ids=_id)
def test_a_concurrent_operation_mid_rewrite_keeps_every_row(spark, battery, case):
    bases, runs = battery
    outcome = races.run_case(spark, bases, case, runs)["outcome"]
    if outcome.startswith("not raced"):
        pytest.skip(outcome)
    assert outcome.startswith(PASSING), f"{case.name}: {outcome}"


TREE_RACES = race_cases.cases(False, ["DELETE", "UPDATE", "MERGE", "INSERT"], ["delta-spark", "delta-rs"], "tree")


@pytest.mark.parametrize("case", TREE_RACES, ids=_id)
def test_a_cut_tree_layout_keeps_every_row_when_an_operation_lands_mid_rewrite(spark, battery, case):
    """The layout the service picks for range workloads (file and row-group cuts, the leaf ids as helper
    columns, a timestamp cut in a Los Angeles session) commits or gives up as the combined layout does."""
    bases, runs = battery
    outcome = races.run_case(spark, bases, case, runs)["outcome"]
    assert outcome.startswith(PASSING), f"{case.name}: {outcome}"


@pytest.mark.parametrize("case", race_cases.committed_first("tree"), ids=_id)
def test_a_cut_tree_layout_commits_over_deletion_vectors_row_ids_and_partitions(spark, battery, case):
    """DELETE, UPDATE or MERGE committed first (deletion vectors on `dv_rt`, row ids on `rt*`, partition
    values by a date and by a timestamp): nothing races, so the rewrite must commit, and the rows, their ids
    and commit versions and their timestamps in both zones must be the operation's alone."""
    import pyarrow.parquet as pq

    from optimizer.table import open_table

    bases, runs = battery
    outcome = races.run_case(spark, bases, case, runs)["outcome"]
    assert outcome == "committed, rows ok", f"{case.name}: {outcome}"
    root = max(runs.glob("*-race"))
    raced = open_table(str(root))
    if case.shape == "dv_rt":  # the rewrite did run over deletion vectors: the operation wrote some
        (operation, *_) = raced.history(1)
        metrics = operation.metadata["operationMetrics"]  # MERGE names it numTargetDeletionVectorsAdded
        assert sum(int(v) for k, v in metrics.items() if k.endswith("DeletionVectorsAdded")) > 0, operation
    files = raced.snapshot().files  # laid out as the tree says: no file across its file cut, row groups
    assert not [f.path for f in files if f.min_values["k"] < 5 <= f.max_values["k"]], "a file mixes k < 5 and k >= 5"
    groups = [pq.ParquetFile(root / unquote(f.path)).metadata.num_row_groups for f in files]
    if not rc.SHAPES[case.shape].partition_by:  # a partition's files hold < 100 rows: Parquet's first size check
        assert max(groups) > 1, groups


def test_the_checks_see_what_a_lost_update_and_a_shifted_timestamp_look_like(spark, battery):
    """The checks are not blind: a copy where an UPDATE is missing, and one where a timestamp moved by an
    hour, both differ from the truth, with the row named."""
    bases, runs = battery
    truth = bases.copy("rt", runs / "check-truth")
    lost, shifted = bases.copy("rt", runs / "check-lost"), bases.copy("rt", runs / "check-shifted")
    rc.apply(spark, "UPDATE", truth)
    rc.apply(spark, "UPDATE", shifted)
    spark.sql(f"UPDATE delta.`{shifted}` SET ts = ts + INTERVAL 1 HOUR WHERE id = 7")
    expected = rc.read(spark, truth, True)

    missing = rc.row_differences(spark, rc.read(spark, lost, True), expected, (lost, truth), False)
    moved = rc.row_differences(spark, rc.read(spark, shifted, True), expected, (shifted, truth), False)

    assert missing and "rows differ" in missing[0] and "60 row(s)" in " ".join(missing)
    assert moved and "id 7" in " ".join(moved)
