"""An order-insensitive fingerprint of a multiset of rows: row count plus the sum of per-row hashes.

Layout rewrites must leave the rows identical; comparing fingerprints before and after proves it up to
hash collisions (two independent 64-bit hashes per row). Sums are taken as decimal(38,0), which cannot
overflow for fewer than ~10^19 rows, so the result is exact and the same on every Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructField


@dataclass(frozen=True)
class Fingerprint:
    rows: int
    xxhash_sum: int
    murmur_sum: int


def fingerprint(df: DataFrame) -> Fingerprint:
    """Fingerprint of every row of `df` over all its columns, in column-name order."""
    from pyspark.sql import functions as F

    columns = hashable_columns([df.schema[name] for name in sorted(df.columns)])
    row = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.xxhash64(*columns).cast("decimal(38,0)")).alias("xx"),
        F.sum(F.hash(*columns).cast("decimal(38,0)")).alias("mm"),
    ).collect()[0]
    return Fingerprint(int(row["rows"]), int(row["xx"] or 0), int(row["mm"] or 0))


def hashable_columns(fields: Sequence[StructField]) -> list[Column]:
    """The columns of `fields` in a form Spark's row hashes accept, equal exactly when the values are:
    maps become their entries sorted by key (Spark refuses to hash maps), variants their JSON text
    (nor variants), at any depth inside structs and arrays; every other type is hashed as it is."""
    from pyspark.sql import functions as F

    return [_hashable(F.col(f"`{f.name}`"), f.dataType).alias(f.name) for f in fields]


def _needs_form(kind: DataType) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(kind, MapType):
        return True
    if isinstance(kind, ArrayType):
        return _needs_form(kind.elementType)
    if isinstance(kind, StructType):
        return any(_needs_form(f.dataType) for f in kind.fields)
    return kind.typeName() == "variant"


def _hashable(column: Column, kind: DataType) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if not _needs_form(kind):
        return column
    if kind.typeName() == "variant":
        return F.to_json(column)
    if isinstance(kind, MapType):
        entries = F.transform(
            F.map_entries(column),
            lambda e: F.struct(
                _hashable(e.getField("key"), kind.keyType).alias("k"),
                _hashable(e.getField("value"), kind.valueType).alias("v"),
            ),
        )
        return F.array_sort(entries)
    if isinstance(kind, ArrayType):
        return F.transform(column, lambda x: _hashable(x, kind.elementType))
    assert isinstance(kind, StructType)
    shaped = F.struct(*[_hashable(column.getField(f.name), f.dataType).alias(f.name) for f in kind.fields])
    return F.when(column.isNull(), F.lit(None)).otherwise(shaped)
