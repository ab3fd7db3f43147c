"""Skipping stays sound whatever the session's time zone: no reader may skip a file holding a matching row.

A table with timestamp, timestamp_ntz and boolean data columns is made by delta-spark, then rewritten by
deltaopt in a session whose zone is not UTC (Asia/Kolkata; America/Los_Angeles, whose values include the
spring-forward gap and the repeated fall-back hour). Its statistics are then used, for range predicates on
each column, by Delta's own scan and by deltaopt's pruning (`skipping.scan.read`), in a UTC and a non-UTC
reading session: both must count what a full read (``spark.databricks.delta.stats.skipping=false``)
counts. An NTZ maximum of ``10:00`` logged as ``04:30`` (read through the Kolkata wall clock) made both
skip files a query ``ntz >= '05:00'`` needs.
"""

from __future__ import annotations

import json
import re
from functools import reduce
from pathlib import Path

import pytest

from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.skipping.scan import read
from optimizer.table import open_table
from tests.session_conf import session_conf
from tests.templates import copy_of

pytestmark = [pytest.mark.spark, pytest.mark.every_change]  # session time zones: tests/tiers.py keeps them

ZONE_CONF = "spark.sql.session.timeZone"
SKIPPING_CONF = "spark.databricks.delta.stats.skipping"
# wall-clock values (timestamps: instants in UTC; NTZ: zone-less), among them Los Angeles's spring-forward
# gap (02:30 on 2024-03-10 does not exist there) and its repeated hour (01:30 on 2024-11-03, twice)
VALUES = (
    "2024-01-01 04:00:00",
    "2024-01-01 10:00:00",
    "2024-01-01 16:00:00",
    "2024-03-10 01:30:00",
    "2024-03-10 02:30:00",
    "2024-03-10 03:30:00",
    "2024-11-03 01:30:00",
    "2024-11-03 02:30:00",
)
# literals between the values, and the values themselves ('05:00' is the review's example)
LITERALS = ("2024-01-01 05:00:00", "2024-01-01 10:00:00", "2024-03-10 02:00:00", "2024-03-10 02:30:00")
LITERALS += ("2024-11-03 01:30:00", "2024-11-03 02:00:00")
OPERATORS = (">=", "<", "=")
VARIANTS = {
    "delta-stats": {},  # every column has Delta's min/max, written by deltaopt's plain path
    "extended": {"delta.dataSkippingStatsColumns": "id,k"},  # ts and ntz ranges only in deltaopt's index
}
NTZ_STAT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$")
TS_STAT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$")


@pytest.fixture
def delta_spark(spark):
    """The shared session, which must have Delta's engine: the tables are made and rewritten through it."""
    from optimizer.table.rewrite_path import commit_engine

    if commit_engine(spark) != "delta-spark":
        pytest.fail("the test session has no Delta engine: `make install` caches the jars (optimizer.delta_jars)")
    return spark


def _make_table(spark, path: str, properties: dict[str, str]) -> None:
    """Delta-spark's table: 4000 rows in 4 files, each value of `VALUES` in every file (so only a rewrite
    that clusters gives files narrow ranges); b is true for the first half of the values."""
    props = {"delta.feature.timestampNtz": "supported", **properties}
    rendered = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, k INT, ts TIMESTAMP, ntz TIMESTAMP_NTZ, b BOOLEAN, s STRING) "
        f"USING delta TBLPROPERTIES ({rendered})"
    )
    literals = ", ".join(f"'{v}'" for v in VALUES)
    with session_conf(spark, ZONE_CONF, "UTC"):
        frame = spark.range(4000).selectExpr(
            "id",
            "cast(id % 7 as int) k",
            f"cast(id % {len(VALUES)} as int) n",
            f"element_at(array({literals}), cast(id % {len(VALUES)} + 1 as int)) v",
        )
        rows = frame.selectExpr(
            "id", "k", "cast(v as timestamp) ts", "cast(v as timestamp_ntz) ntz", f"n < {len(VALUES) // 2} b",
            "sha2(cast(id as string), 256) s",
        )  # fmt: skip
        rows.repartition(4).write.format("delta").mode("append").save(path)


def _predicates() -> list[str]:
    found = [f"{column} {op} '{literal}'" for column in ("ts", "ntz") for literal in LITERALS for op in OPERATORS]
    return [*found, "b = true", "b = false", "NOT b"]


def _counts(spark, frames: list) -> dict[int, int]:
    """{i: rows of frames[i]} in one Spark job (one scan per frame, each planned with its own filter). The
    scans' many small splits are read by two tasks (`coalesce`, no shuffle): a task each cost more than
    reading them (measured: about half the job's time)."""
    from pyspark.sql import functions as F

    tagged = [frame.select(F.lit(i).alias("q")) for i, frame in enumerate(frames)]
    counted = reduce(lambda a, b: a.unionAll(b), tagged).coalesce(2).groupBy("q").count().collect()
    found = {row["q"]: row["count"] for row in counted}
    return {i: found.get(i, 0) for i in range(len(frames))}


def _full_counts(spark, path: str, predicates: list[str]) -> dict[int, int]:
    """{i: rows satisfying predicates[i]}, from one full read (skipping off, no filter to push down) on which
    Spark evaluates every predicate on every row: the reference, in one scan rather than a scan per predicate
    (whose planning, a Spark job each, cost about a third of the test)."""
    from pyspark.sql import functions as F

    with session_conf(spark, SKIPPING_CONF, "false"):
        every = spark.read.format("delta").load(path)
        row = every.select(*[F.count_if(F.expr(p)).alias(f"q{i}") for i, p in enumerate(predicates)]).first()
    return {i: row[f"q{i}"] for i in range(len(predicates))}


def _check_readers(spark, path: str, zone: str) -> list[str]:
    """The predicates whose row count differs, in a session in `zone`, between a full read and Delta's
    scan with skipping, or deltaopt's pruned read. Delta's scans and deltaopt's are counted in one job."""
    predicates = _predicates()
    with session_conf(spark, ZONE_CONF, zone):
        full = _full_counts(spark, path, predicates)
        delta_frames = [spark.read.format("delta").load(path).where(p) for p in predicates]
        counted = _counts(spark, delta_frames + [read(spark, path, p) for p in predicates])
    delta = {i: counted[i] for i in range(len(predicates))}
    ours = {i: counted[len(predicates) + i] for i in range(len(predicates))}
    wrong = []
    for i, predicate in enumerate(predicates):
        wrong += [f"Delta in {zone}: {predicate}: {delta[i]} != {full[i]}"] if delta[i] != full[i] else []
        wrong += [f"deltaopt in {zone}: {predicate}: {ours[i]} != {full[i]}"] if ours[i] != full[i] else []
    return wrong


def _latest_stats(path: str) -> list[dict]:
    """The stats of the add actions of the table's latest commit, as the log holds them."""
    log = sorted(Path(path, "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [json.loads(a["add"]["stats"]) for a in actions if "add" in a and a["add"].get("stats")]


# Each zone and each variant runs by default (a zone east and west of UTC, each once); every pairing under
# `make test-slow`.
_EVERY_PAIRING = [(zone, variant) for zone in ("Asia/Kolkata", "America/Los_Angeles") for variant in sorted(VARIANTS)]
_DEFAULT = {("Asia/Kolkata", "extended"), ("America/Los_Angeles", "delta-stats")}


@pytest.mark.parametrize(
    ("zone", "variant"),
    [pytest.param(z, v, marks=() if (z, v) in _DEFAULT else pytest.mark.slow) for z, v in _EVERY_PAIRING],
)
def test_readers_keep_every_matching_file_after_a_rewrite_in_a_non_utc_session(
    delta_spark, tmp_path: Path, zone: str, variant: str
):
    spark, path = delta_spark, str(tmp_path / "t")
    # a variant's table is built once per run and copied (`tests.templates`): `make test-slow` rewrites each
    # variant in both zones; the default run's two cases are of different variants, so each builds its own
    copy_of(f"ntz-{variant}", Path(path), lambda built: _make_table(spark, str(built), VARIANTS[variant]))
    table = open_table(path)
    with session_conf(spark, ZONE_CONF, zone):
        snapshot = table.snapshot()
        features = FeatureSet.from_dict({"z": ["ntz", "ts"]})
        result = optimize(spark, table, features, 16_000, files=snapshot.files, snapshot=snapshot)
    assert result.version is not None and result.files_out > 2, "the rewrite must leave files of narrow ranges"
    wrong = [line for reading in ("UTC", zone) for line in _check_readers(spark, path, reading)]
    assert not wrong, "files holding matching rows were skipped:\n" + "\n".join(wrong)
    if variant == "delta-stats":  # Delta's own forms: an instant with its offset; a zone-less NTZ
        stats = _latest_stats(path)
        assert stats and all(NTZ_STAT.match(s[bound]["ntz"]) for s in stats for bound in ("minValues", "maxValues"))
        assert all(TS_STAT.match(s[bound]["ts"]) for s in stats for bound in ("minValues", "maxValues"))
        logged = {s[bound]["ntz"].replace("T", " ")[:19] for s in stats for bound in ("minValues", "maxValues")}
        assert logged <= set(VALUES), f"NTZ bounds moved by the session zone: {sorted(logged - set(VALUES))}"


def test_an_offset_less_timestamp_literal_is_read_in_the_readers_zone_or_taken_as_unknown():
    """'2024-11-03 02:00:00' is 2024-11-02 20:30Z in Kolkata (and at +05:30), 10:00Z in Los Angeles,
    02:00Z in UTC, and any instant within 18 hours of 02:00Z in an unknown zone: a file holding only
    2024-11-02 21:00Z is kept for ``ts >= literal`` where the literal may be earlier, skipped elsewhere.
    In Los Angeles's spring-forward gap, 02:30 is read by Spark as 10:30Z: a file at 10:00Z is kept."""
    import datetime as dt

    from optimizer.skipping.filestats import FileStats, column_bounds
    from optimizer.skipping.pruning import might_match, prepare

    def holding(instant: dt.datetime) -> FileStats:
        return FileStats("f", 10, {"ts": column_bounds("timestamp", instant, instant, 0, nan_aware=True)})

    evening = holding(dt.datetime(2024, 11, 2, 21, tzinfo=dt.UTC))
    where = "ts >= '2024-11-03 02:00:00'"
    assert all(might_match(prepare(where, zone), evening) for zone in ("Asia/Kolkata", "+05:30", None))
    assert not any(might_match(prepare(where, zone), evening) for zone in ("UTC", "America/Los_Angeles"))
    gap = holding(dt.datetime(2024, 3, 10, 10, tzinfo=dt.UTC))
    assert might_match(prepare("ts < '2024-03-10 02:30:00'", "America/Los_Angeles"), gap)
