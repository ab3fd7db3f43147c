"""The tables, concurrent operations and checks of the race battery (`benchmarks.races`).

Every table is made by delta-spark SQL in the session; every concurrent operation is a real Delta
statement run in the same session. A case's truth is the table after the operation alone (run on a
copy); the checks compare the raced table with it: every column's rows (count and two order-insensitive
hashes), the same rows rendered as text in two session time zones (timestamps and their partition
values), row ids and row commit versions where row tracking is on, and the history (what committed).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sqlglot import exp

from optimizer.table.locations import sql_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from optimizer.table.access import Commit

TZS = ("UTC", "America/Los_Angeles")  # every table is read and rendered in both
ROWS = 600
TZ_CONF = "spark.sql.session.timeZone"
# id, k, a timestamp per row (across the 2024 DST switch in Los Angeles), its timestamp_ntz, a string,
# and two partition candidates: the row's date and one of four timestamps (one falls in LA's missing hour)
ROWS_SQL = """
SELECT id, CAST(id % 10 AS INT) AS k, ts, CAST(ts AS TIMESTAMP_NTZ) AS ts_ntz,
       concat('s', CAST(id * 7919 % 1000 AS STRING)) AS s, CAST(ts AS DATE) AS day,
       TIMESTAMP '2024-03-10 08:30:00' + make_dt_interval(0, CAST(id % 4 AS INT) * 2, 0, 0) AS pt
FROM (SELECT id, TIMESTAMP '2024-03-09 20:00:00' + make_dt_interval(0, 0, CAST(id * 7 AS INT), 0) AS ts
      FROM range({start}, {stop}))
"""
RT = {"delta.enableRowTracking": "true"}


@dataclass(frozen=True)
class Shape:
    """A base table: its partition column, properties, and liquid clustering keys (set after creation,
    so its files start unclustered and Delta's OPTIMIZE has work)."""

    name: str
    partition_by: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    cluster_by: tuple[str, ...] = ()


SHAPES = {
    s.name: s
    for s in (
        Shape("rt", None, RT),
        Shape("rt_by_day", "day", RT),
        Shape("rt_by_pt", "pt", RT),
        Shape("dv_rt", None, {**RT, "delta.enableDeletionVectors": "true"}),
        Shape("plain"),
        Shape("plain_by_day", "day"),
        Shape("plain_by_pt", "pt"),
        Shape("liquid_rt", None, RT, ("k", "ts")),
    )
}
# the concurrent operations: Delta statements on `{t}` (the table's name, rendered by sqlglot)
OPERATIONS: dict[str, tuple[str, ...]] = {
    "DELETE": ("DELETE FROM {t} WHERE k = 3",),
    "UPDATE": ("UPDATE {t} SET s = concat(s, '-u') WHERE k = 5",),
    "MERGE": (
        "MERGE INTO {t} AS t USING race_source AS src ON t.id = src.id "
        "WHEN MATCHED THEN UPDATE SET s = src.s WHEN NOT MATCHED THEN INSERT *",
    ),
    "CLUSTER BY": ("ALTER TABLE {t} CLUSTER BY (k)",),
    "enable DV": ("ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",),
    "enable row tracking": ("ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')",),
    "enable column mapping": (
        "ALTER TABLE {t} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')",
    ),
    "ADD COLUMN": ("ALTER TABLE {t} ADD COLUMNS (extra STRING)",),
    "INSERT": ("INSERT INTO {t} SELECT * FROM race_source WHERE id >= 600",),
    "OPTIMIZE": ("OPTIMIZE {t}",),
    "enable DV + DELETE": (
        "ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        "DELETE FROM {t} WHERE k = 3",
    ),
}


def prepare_sources(spark: SparkSession) -> None:
    """The views every table and MERGE / INSERT read: `race_rows` (ids 0..599, six files' worth) and
    `race_source` (ids 590..619: ten matched, twenty new)."""
    spark.sql(ROWS_SQL.format(start=0, stop=ROWS)).repartition(6).createOrReplaceTempView("race_rows")
    source = spark.sql(ROWS_SQL.format(start=ROWS - 10, stop=ROWS + 20))
    source.selectExpr("*").withColumn("s", _merged()).createOrReplaceTempView("race_source")


def _merged() -> Any:
    from pyspark.sql import functions as F

    return F.concat(F.lit("m"), F.col("id").cast("string"))


def create(spark: SparkSession, shape: Shape, path: str) -> None:
    """The base table of `shape` at `path`, written by Delta's CREATE TABLE AS SELECT."""
    statement = f"CREATE TABLE {sql_name(path)} USING delta"
    if shape.partition_by:
        statement += f" PARTITIONED BY ({_identifier(shape.partition_by)})"
    if shape.properties:
        statement += f" TBLPROPERTIES ({_pairs(shape.properties)})"
    spark.sql(statement + " AS SELECT * FROM race_rows")
    if shape.cluster_by:
        keys = ", ".join(_identifier(k) for k in shape.cluster_by)
        spark.sql(f"ALTER TABLE {sql_name(path)} CLUSTER BY ({keys})")


def _identifier(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("spark")


def _pairs(properties: dict[str, str]) -> str:
    return ", ".join(
        f"{exp.Literal.string(k).sql('spark')} = {exp.Literal.string(v).sql('spark')}" for k, v in properties.items()
    )


def apply(spark: SparkSession, operation: str, path: str) -> None:
    """Run `operation`'s statements on the table at `path`."""
    for statement in OPERATIONS[operation]:
        spark.sql(statement.format(t=sql_name(path)))


@dataclass
class Read:
    """What a table holds, as the checks compare it: per time zone, the fingerprint of every column
    and of every column rendered as text; the base rows' row ids and commit versions (None without row
    tracking: a row an operation inserts gets the next free id, which depends on what committed before
    it) and whether every row's id is its own."""

    raw: dict[str, tuple[int, int, int]]
    rendered: dict[str, tuple[int, int, int]]
    row_ids: tuple[int, int, int] | None  # of the base table's rows (ids below `ROWS`)
    commit_versions: tuple[int, int, int] | None
    unique_row_ids: bool = True


def read(spark: SparkSession, path: str, row_tracking: bool) -> Read:
    """Read the table at `path` once in each of `TZS` (the session's zone is restored after); with
    `row_tracking` its row ids and row commit versions too."""
    previous = spark.conf.get(TZ_CONF)
    raw: dict[str, tuple[int, int, int]] = {}
    rendered: dict[str, tuple[int, int, int]] = {}
    try:
        for tz in TZS:
            spark.conf.set(TZ_CONF, tz)
            frame = _frame(spark, path)
            parts = {"raw": frame.columns, "text": [_text(c) for c in frame.columns]}
            sums = _fingerprints(frame, parts)
            raw[tz], rendered[tz] = sums["raw"], sums["text"]
    finally:
        spark.conf.set(TZ_CONF, previous)
    if not row_tracking:
        return Read(raw, rendered, None, None)
    base = _frame(spark, path).where(_base_rows())  # new rows' ids depend on when they landed
    parts = {"ids": ["id", "_metadata.row_id"], "versions": ["id", "_metadata.row_commit_version"]}
    sums = _fingerprints(base, parts)
    unique = _frame(spark, path).selectExpr("count(*) = count(DISTINCT _metadata.row_id) AS unique").first()
    return Read(raw, rendered, sums["ids"], sums["versions"], bool(unique and unique["unique"]))


def _base_rows() -> Any:
    from pyspark.sql import functions as F

    return F.col("id") < ROWS


def _text(column: str) -> Any:
    from pyspark.sql import functions as F

    return F.col(f"`{column}`").cast("string")


def _fingerprints(frame: DataFrame, parts: dict[str, list[Any]]) -> dict[str, tuple[int, int, int]]:
    """(rows, xxhash64 sum, murmur3 sum) of each part's columns (names, `_metadata` fields or columns),
    in one pass over `frame`: the sums of `optimizer.table.fingerprint` (these tables hold no map or variant)."""
    from pyspark.sql import functions as F

    def column(c: Any) -> Any:
        if not isinstance(c, str):
            return c
        return F.expr(c) if c.startswith("_metadata.") else F.col(f"`{c}`")

    sums = [F.count(F.lit(1)).alias("rows")]
    for name, columns in parts.items():
        cols = [column(c) for c in columns]
        sums += [
            F.sum(F.xxhash64(*cols).cast("decimal(38,0)")).alias(f"{name}_xx"),
            F.sum(F.hash(*cols).cast("decimal(38,0)")).alias(f"{name}_mm"),
        ]
    row = frame.agg(*sums).collect()[0]
    return {n: (int(row["rows"]), int(row[f"{n}_xx"] or 0), int(row[f"{n}_mm"] or 0)) for n in parts}


def _frame(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.format("delta").load(path)


def _as_text(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return frame.select(*[F.col(f"`{c}`").cast("string").alias(c) for c in frame.columns])


def row_differences(
    spark: SparkSession, actual: Read, expected: Read, paths: tuple[str, str], same_versions: bool
) -> list[str]:
    """What differs between the raced table (`paths[0]`) and the truth, one phrase each with an example
    row: the rows (in which time zones they differ), their text in a zone, row ids, row commit versions
    (only when `same_versions`: the operation committed at the same version in both)."""
    problems = []
    raw = [tz for tz in TZS if actual.raw[tz] != expected.raw[tz]]
    if raw:
        counts = _counts(actual.raw[raw[0]], expected.raw[raw[0]]) + _dups(spark, paths[0])
        problems.append(f"rows differ read in {' and '.join(raw)} ({counts}): {_example(spark, paths, raw[0])}")
    for tz in TZS:
        if tz not in raw and actual.rendered[tz] != expected.rendered[tz]:
            problems.append(f"values rendered in {tz} differ: {_example(spark, paths, tz)}")
    if expected.row_ids is not None and actual.row_ids != expected.row_ids:
        problems.append(f"row ids differ: {_example(spark, paths, None, '_metadata.row_id')}")
    if not actual.unique_row_ids:
        problems.append("two rows share a row id")
    elif same_versions and expected.commit_versions is not None and actual.commit_versions != expected.commit_versions:
        problems.append(f"row commit versions differ: {_example(spark, paths, None, '_metadata.row_commit_version')}")
    return problems


def _counts(actual: tuple[int, int, int], expected: tuple[int, int, int]) -> str:
    return (
        f"{actual[0]} rows, expected {expected[0]}" if actual[0] != expected[0] else f"{actual[0]} rows, values differ"
    )


def _dups(spark: SparkSession, path: str) -> str:
    duplicated = _frame(spark, path).groupBy("id").count().where("count > 1").count()
    return f", {duplicated} id(s) duplicated" if duplicated else ""


def _example(spark: SparkSession, paths: tuple[str, str], tz: str | None, column: str | None = None) -> str:
    """One row as the race left it against the same row in the truth."""
    from pyspark.sql import functions as F

    previous = spark.conf.get(TZ_CONF)
    try:
        if tz is not None:
            spark.conf.set(TZ_CONF, tz)
        frames = []
        for path in paths:
            frame = _frame(spark, path)
            frame = (
                frame.select("id", F.expr(column).alias("value")).where(F.col("id") < ROWS)
                if column
                else _as_text(frame)
            )
            frames.append(frame)
        extra = frames[0].exceptAll(frames[1])
        count = extra.count()
        row = extra.orderBy("id").first()
        if row is None:
            return "no example"
        truth = frames[1].where(F.col("id") == int(row["id"])).first()
        return f"{count} row(s), e.g. id {row['id']}: {_short(row, column)} (expected {_short(truth, column)})"
    finally:
        spark.conf.set(TZ_CONF, previous)


def _short(row: Any, column: str | None) -> str:
    if row is None:
        return "no such row"
    if column:
        return str(row["value"])
    return ", ".join(f"{k}={v}" for k, v in row.asDict().items() if k in ("ts", "pt", "day", "ts_ntz", "s"))


def log_actions(path: str, version: int) -> list[dict[str, Any]]:
    """The actions of one commit, as the log holds them (read only, to check dataChange)."""
    with open(Path(path) / "_delta_log" / f"{version:020d}.json") as commit:
        return [json.loads(line) for line in commit]


def data_change(path: str, version: int) -> list[bool]:
    actions = log_actions(path, version)
    return [a[k].get("dataChange", True) for a in actions for k in ("add", "remove") if k in a]


def leftover_files(path: str) -> list[str]:
    """Parquet files under the table that no version of its log references (written, never committed)."""
    referenced: set[str] = set()
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                if kind in action:
                    referenced.add(unquote(action[kind]["path"]))
    root = Path(path)
    written = {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}
    return sorted(written - referenced)


def operations_after(commits: Sequence[Commit], run_id: str) -> list[str]:
    """The operations of commits that are not the run's, oldest first."""
    return [str(c.operation) for c in commits if c.deltaopt.get("runId") != run_id]


def run_commits(commits: Sequence[Commit], run_id: str) -> list[Commit]:
    return [c for c in commits if c.deltaopt.get("runId") == run_id]


def history_problems(
    paths: tuple[str, str], start: int, run_id: str, reported: int | None, error: BaseException | None, liquid_ok: bool
) -> list[str]:
    """What the log of the raced table (`paths[0]`) says went wrong: the run committed more than once,
    committed and raised, reported another version, changed data, Z-ordered a liquid table, lost or
    reordered the operation's commits (against the truth's, `paths[1]`), left written files behind, or
    claims in its index files it did not write. `liquid_ok`: the run is Delta's OPTIMIZE of a liquid table."""
    from optimizer.errors import CommitOutcomeUnknownError, DeltaOptError
    from optimizer.table import open_table

    table = open_table(paths[0])
    commits = table.history(start + 1)
    ours, problems = run_commits(commits, run_id), []
    if error is not None and not isinstance(error, DeltaOptError):
        problems.append(f"raw {type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}")
    if len(ours) > 1:
        problems.append(f"the run committed {len(ours)} times")
    for commit in ours[:1]:
        problems += _commit_problems(table, paths[0], commit, reported, error, liquid_ok)
    if not ours and reported is not None:
        problems.append(f"reported version {reported} but the log has no commit of the run")
    truth, raced = (
        [str(c.operation) for c in open_table(paths[1]).history(start + 1)],
        operations_after(commits, run_id),
    )
    if liquid_ok:  # the operation lands after Delta's OPTIMIZE: a second OPTIMIZE then has nothing to commit
        truth, raced = [o for o in truth if o != "OPTIMIZE"], [o for o in raced if o != "OPTIMIZE"]
    if raced != truth:
        problems.append(f"history {raced} (the operation alone: {truth})")
    left = leftover_files(paths[0])
    if left and not isinstance(error, CommitOutcomeUnknownError):
        problems.append(f"{len(left)} written file(s) left behind (e.g. {left[0]})")
    return problems


def _commit_problems(
    table: Any, path: str, commit: Commit, reported: int | None, error: BaseException | None, liquid_ok: bool
) -> list[str]:
    """What is wrong with the run's commit itself."""
    problems = []
    if error is not None:
        problems.append(f"committed v{commit.version} but raised {type(error).__name__}")
    elif reported != commit.version:
        problems.append(f"reported version {reported}, the run's commit is v{commit.version}")
    if any(data_change(path, commit.version)):
        problems.append(f"v{commit.version} has dataChange=true actions")
    if not liquid_ok and table.snapshot(commit.version - 1).features.clustered:
        problems.append(f"a Z-order committed (v{commit.version}) on a liquid-clustered table")
    claimed = claimed_by_run(table, commit)
    if claimed:
        problems.append(f"the run's index claims {len(claimed)} file(s) its commit did not write (e.g. {claimed[0]})")
    return problems


def claimed_by_run(table: Any, commit: Commit) -> list[str]:
    """Active files the run's index entries claim that its commit did not add (another writer's files
    the service would then take for clustered, never optimising them)."""
    from optimizer.skipping.extended import load_index

    latest = table.snapshot()
    added = {f.path for f in table.snapshot(commit.version).files} - {
        f.path for f in table.snapshot(commit.version - 1).files
    }
    run = commit.deltaopt.get("runId")
    return sorted(p for p, stats in load_index(table, latest).items() if stats.run_id == run and p not in added)


class Bases:
    """Base tables under `root`, each created the first time a case asks for it."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark, self.root, self.made = spark, root, set[str]()

    def copy(self, shape: str, to: Path) -> str:
        base = self.root / shape
        if shape not in self.made:
            create(self.spark, SHAPES[shape], str(base))
            self.made.add(shape)
        shutil.copytree(base, to)
        return str(to)
