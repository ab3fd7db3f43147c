"""The race battery (`benchmarks.races`) as the slow tier: one test per (concurrent operation, commit
path), each a real Delta operation landed in the middle of a real deltaopt OPTIMIZE, checked against
the operation alone (rows, timestamps in two time zones, row ids, history). `make test-slow` runs them;
`python -m benchmarks races` prints the same cases as one table."""

from __future__ import annotations

import pytest

from benchmarks import race_checks as rc
from benchmarks import races

pytestmark = [pytest.mark.slow, pytest.mark.spark]
PASSING = ("committed, rows ok", "gave up cleanly", "nothing committed, rows ok")


@pytest.fixture(scope="module")
def battery(spark, tmp_path_factory):
    """Base tables made once for the module (each copied per case), and where the copies go."""
    rc.prepare_sources(spark)
    root = tmp_path_factory.mktemp("races")
    (root / "runs").mkdir()
    return races.Bases(spark, root / "bases"), root / "runs"


@pytest.mark.parametrize(
    "case", races.cases(full=False), ids=lambda c: f"{c.operation}-{c.path}".replace(" + ", "+").replace(" ", "_")
)
def test_a_concurrent_operation_mid_rewrite_keeps_every_row(spark, battery, case):
    bases, runs = battery
    outcome = races.run_case(spark, bases, case, runs)["outcome"]
    if outcome.startswith("not raced"):
        pytest.skip(outcome)
    assert outcome.startswith(PASSING), f"{case.name}: {outcome}"


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
