"""An order-insensitive fingerprint of a multiset of rows: row count plus the sum of per-row hashes.

Layout rewrites must leave the rows identical; comparing fingerprints before and after proves it up to
hash collisions (two independent 64-bit hashes per row). Sums are taken as decimal(38,0), which cannot
overflow for fewer than ~10^19 rows, so the result is exact and the same on every Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Fingerprint:
    rows: int
    xxhash_sum: int
    murmur_sum: int


def fingerprint(df: DataFrame) -> Fingerprint:
    """Fingerprint of every row of `df` over all its columns, in column-name order."""
    from pyspark.sql import functions as F

    columns = [F.col(f"`{name}`") for name in sorted(df.columns)]
    row = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.xxhash64(*columns).cast("decimal(38,0)")).alias("xx"),
        F.sum(F.hash(*columns).cast("decimal(38,0)")).alias("mm"),
    ).collect()[0]
    return Fingerprint(int(row["rows"]), int(row["xx"] or 0), int(row["mm"] or 0))
