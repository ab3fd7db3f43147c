"""The small liquid table the liquid tests start from, built once per run and copied (`tests.templates`)."""

from __future__ import annotations

from pathlib import Path

from tests.templates import copy_of


def append(session, path: str, start: int) -> None:  # type: ignore[no-untyped-def]
    """600 rows written by delta-spark as two files: `a` (7 values) and `b`."""
    rows = session.range(start, start + 600).selectExpr("cast(id % 7 as int) a", "(id * 7919) % 1000 b")
    rows.repartition(2).write.format("delta").mode("append").save(path)


def build_liquid(spark, path: str) -> str:  # type: ignore[no-untyped-def]
    """A small liquid table clustered by `a`, written in three appends (several files to cluster)."""
    spark.sql(f"CREATE TABLE delta.`{path}` (a INT, b BIGINT) USING delta CLUSTER BY (a)")
    for start in (0, 600, 1200):
        append(spark, path, start)
    return path


def liquid_table(spark, path: str) -> str:  # type: ignore[no-untyped-def]
    """A copy of `build_liquid`'s table at `path`. The template is chosen by the path's last name, so two
    tables one test makes (``one``, ``two``) are two tables, each with its own Delta table id."""
    name = Path(path).name
    copy_of(f"liquid-{name}", Path(path), lambda built: build_liquid(spark, str(built)))
    return path
