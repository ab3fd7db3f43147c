"""Joined features looked up while rows are laid out: each fact row gets its dimension attribute.

The dimension is read once at its current version, reduced to one row per key (the smallest
attribute when a key repeats, so the lookup can never duplicate a fact row), and broadcast-joined to
the fact rows on the join key, left outer: a fact row whose key is NULL or absent from the dimension
keeps a NULL attribute (Z range 0), never leaves the layout. The job's row verification proves the
written rows equal the input as for any layout.

A dimension that cannot be read, or is too large to broadcast, drops its feature with a warning: the
attribute only orders rows, so the layout is still written, by the other features.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from optimizer.errors import DeltaOptError
from optimizer.features import JoinedFeature
from optimizer.table import open_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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

    try:
        table = open_table(feature.location)
        snapshot = table.snapshot()
        if (snapshot.num_records or 0) > MAX_DIMENSION_ROWS:
            log.warning("joined feature %s: %s is not a dimension (too many rows)", feature.helper, feature.dimension)
            return None
        dimension = table.read_files(frame.sparkSession, snapshot.files, snapshot)
        names = {c.lower(): c for c in dimension.columns}
        if feature.key not in names or feature.attribute not in names:
            log.warning(
                "joined feature %s: %s lacks %s or %s",
                feature.helper,
                feature.dimension,
                feature.key,
                feature.attribute,
            )
            return None
        key = F.col(f"`{names[feature.key]}`")
        value = F.col(f"`{names[feature.attribute]}`")
        keyed = dimension.where(key.isNotNull()).groupBy(key.alias(f"{feature.helper}__key"))
        return keyed.agg(F.min(value).alias(feature.helper))
    except DeltaOptError as err:
        log.warning("joined feature %s left out: %s", feature.helper, err)
        return None
