"""Joined features looked up while rows are laid out: each fact row gets its dimension attribute.

The dimension is read once at its current version, reduced to one row per key (the smallest
attribute when a key repeats, so the lookup can never duplicate a fact row), and broadcast-joined to
the fact rows on the join key, left outer: a fact row whose key is NULL or absent from the dimension
keeps a NULL attribute (Z range 0), never leaves the layout. The job's row verification proves the
written rows equal the input as for any layout.

A dimension that cannot be read, or is too large to broadcast, drops its feature with a warning: the
attribute only orders rows, so the layout is still written, by the other features.

After the files are written, `joined_ranges` joins their fact keys to the dimension again (at its
version then, recorded) for each file's attribute ranges (`skipping.joined` prunes with them).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from optimizer.clustering.zorder import Helpers
from optimizer.errors import DeltaOptError
from optimizer.features import JoinedFeature
from optimizer.skipping.extended import JoinedRanges, ValueRange, encode_value, location_key
from optimizer.table import open_table
from optimizer.table.stats import file_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

MAX_DIMENSION_ROWS = 20_000_000  # larger tables are facts, not dimensions (as `optimizer.joins`)


def with_joined(frame: DataFrame, joined: Sequence[JoinedFeature]) -> tuple[DataFrame, list[str]]:
    """`frame` with each joined feature's helper column that it lacks, and the names added."""
    from pyspark.sql import functions as F

    added: list[str] = []
    present = {c.lower() for c in frame.columns}
    for feature in joined:
        if feature.helper in present or feature.fact_column not in present:
            continue
        lookup = _lookup(frame, feature)
        if lookup is None:
            continue
        key = f"{feature.helper}__key"
        frame = frame.join(F.broadcast(lookup), F.col(f"`{feature.fact_column}`") == F.col(f"`{key}`"), "left")
        frame = frame.drop(key)
        added.append(feature.helper)
        present.add(feature.helper)
    return frame, added


def _lookup(frame: DataFrame, feature: JoinedFeature) -> DataFrame | None:
    """(key, attribute) of the dimension, one row per non-NULL key; None (with a warning) when the
    dimension cannot serve."""
    from pyspark.sql import functions as F

    found = _dimension(frame.sparkSession, feature.location, feature.key, [feature.attribute], feature.helper)
    if found is None:
        return None
    dimension, _, names = found
    key = F.col(f"`{names[feature.key]}`")
    value = F.col(f"`{names[feature.attribute]}`")
    keyed = dimension.where(key.isNotNull()).groupBy(key.alias(f"{feature.helper}__key"))
    return keyed.agg(F.min(value).alias(feature.helper))


def _dimension(
    spark: SparkSession, location: str, key: str, attributes: Sequence[str], purpose: str
) -> tuple[DataFrame, int, dict[str, str]] | None:
    """The dimension's rows at its current version, that version and {lower-cased name: column name};
    None (with a warning naming `purpose`) when it cannot be read, is too large or lacks a column."""
    try:
        table = open_table(location)
        snapshot = table.snapshot()
        if (snapshot.num_records or 0) > MAX_DIMENSION_ROWS:
            log.warning("%s: %s is not a dimension (too many rows)", purpose, location)
            return None
        dimension = table.read_files(spark, snapshot.files, snapshot)
    except DeltaOptError as err:
        log.warning("%s left out: %s", purpose, err)
        return None
    names = {c.lower(): c for c in dimension.columns}
    missing = [c for c in (key, *attributes) if c not in names]
    if missing:
        log.warning("%s: %s lacks %s", purpose, location, ", ".join(missing))
        return None
    return dimension, snapshot.version, names


def joined_ranges(
    spark: SparkSession, uris: Mapping[str, str], joined: Sequence[JoinedFeature]
) -> dict[str, tuple[JoinedRanges, ...]]:
    """Per written file ({path: URI Spark reads}): for each dimension of `joined`, the min/max of its
    joined attributes over the dimension rows the file's fact rows join (every dimension row of a
    key, so a repeated key cannot hide a value), recorded with the dimension version read. A file
    none of whose rows joins gets no ranges (it is read), and so does every file when the dimension
    cannot be read."""
    from optimizer.table.staging import row_for

    grouped: dict[tuple[str, str, str], list[str]] = {}
    for feature in joined:
        attributes = grouped.setdefault((feature.fact_column, feature.location, feature.key), [])
        if feature.attribute not in attributes:
            attributes.append(feature.attribute)
    found: dict[str, list[JoinedRanges]] = {path: [] for path in uris}
    for (fact_column, location, key), attributes in grouped.items():
        rows = _ranges_per_file(
            spark, list(uris.values()), fact_column, location=location, key=key, attributes=attributes
        )
        if rows is None:
            continue
        version, types, by_uri = rows
        for path in uris:
            try:
                row = row_for(path, by_uri)
            except DeltaOptError:
                continue  # no row joins: no ranges, the file is read
            ranges = {
                a: ValueRange(
                    types[a],
                    encode_value(types[a], row[f"min_{i}"], is_max=False),
                    encode_value(types[a], row[f"max_{i}"], is_max=True),
                    int(row[f"nulls_{i}"]),
                )
                for i, a in enumerate(attributes)
            }
            found[path].append(JoinedRanges(fact_column, location_key(location), key, version, ranges))
    return {path: tuple(ranges) for path, ranges in found.items() if ranges}


def _ranges_per_file(
    spark: SparkSession, uris: list[str], fact_column: str, *, location: str, key: str, attributes: list[str]
) -> tuple[int, dict[str, str], dict[str, dict[str, Any]]] | None:
    """(dimension version, {attribute: Spark type}, {file URI: aggregates}) of one dimension's joined
    attributes; None when the dimension cannot serve."""
    from pyspark.sql import functions as F

    found = _dimension(spark, location, key, attributes, f"joined ranges of {location}")
    if found is None or not uris:
        return None
    dimension, version, names = found
    prefix = Helpers.avoiding([fact_column]).prefix  # the join's own columns sit beside the fact column
    per_key = [F.col(f"`{names[a]}`") for a in attributes]
    lookup = dimension.where(F.col(f"`{names[key]}`").isNotNull()).select(
        F.col(f"`{names[key]}`").alias(f"{prefix}key"), *[c.alias(f"{prefix}a{i}") for i, c in enumerate(per_key)]
    )
    types = {a: lookup.schema[f"{prefix}a{i}"].dataType.simpleString() for i, a in enumerate(attributes)}
    facts = spark.read.parquet(*uris)
    if fact_column not in {c.lower() for c in facts.columns}:
        log.warning("joined ranges of %s: the files lack %s (a partition column?)", location, fact_column)
        return None
    facts = facts.select(file_path(facts).alias(f"{prefix}file"), F.col(f"`{fact_column}`"))
    joined = facts.join(F.broadcast(lookup), F.col(f"`{fact_column}`") == F.col(f"{prefix}key"), "inner")
    aggregates = []
    for i in range(len(attributes)):
        value = F.col(f"{prefix}a{i}")
        aggregates += [F.min(value).alias(f"min_{i}"), F.max(value).alias(f"max_{i}")]
        aggregates.append(F.sum(F.when(value.isNull(), 1).otherwise(0)).alias(f"nulls_{i}"))
    rows = joined.groupBy(F.col(f"{prefix}file").alias("__file")).agg(*aggregates).collect()
    return version, types, {r["__file"]: r.asDict() for r in rows}
