"""Statistics on the clustering keys: which columns standard readers can skip on, and how to add one.

Delta writers collect min/max only for the first ``delta.dataSkippingNumIndexedCols`` leaf columns
(32 by default) or for the columns ``delta.dataSkippingStatsColumns`` names. A layout clustered on a
column past that limit gathers its values into few files, but the files' statistics do not say so:
Spark, Databricks, Trino and DuckDB still read every file (delta-rs#2427, #2709; Databricks liquid
clustering refuses such keys). `indexing_properties` is the property change that makes the clustering
keys' columns collected, without dropping any column the table already collects:

* a table with ``delta.dataSkippingStatsColumns`` gets the missing columns appended to the list;
* otherwise ``delta.dataSkippingNumIndexedCols`` is raised to cover the furthest missing column.

The OPTIMIZE job commits that change first (`Committer.set_properties`), so the files it writes carry
the keys' statistics and so do later writers' files; the estimate prices standard readers with the
same change when the setting is on (`Thresholds.stats_for_clustering_keys`), and without it when off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from optimizer.features import FeatureSet
from optimizer.table.stats import DEFAULT_INDEXED_COLUMNS, StatsColumn, data_columns, stats_columns
from querylog.predicates.classify import column_names
from querylog.predicates.normalize import parse_canonical

if TYPE_CHECKING:
    from optimizer.table.access import Snapshot

STATS_COLUMNS = "delta.dataSkippingStatsColumns"
INDEXED_COLUMNS = "delta.dataSkippingNumIndexedCols"
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def key_columns(features: FeatureSet) -> list[str]:
    """The columns the clustering features (Z, SOP, the cut tree's columns, joined features' fact keys)
    read, lower-cased, in feature order."""
    texts = [f.expression for f in features.z] + [f.predicate for f in features.sop]
    texts += list(features.cuts.columns) if features.cuts is not None else []
    found: dict[str, None] = {}
    for text in texts:
        for name in column_names(parse_canonical(text)):
            found.setdefault(name.lower(), None)
    for joined in features.joined:  # the fact's join key: dynamic file pruning checks keys against it
        found.setdefault(joined.fact_column, None)
    return list(found)


def unindexed(snapshot: Snapshot, columns: Iterable[str]) -> list[str]:
    """Those of `columns` (top-level or dotted leaf names) whose files carry no min/max in `snapshot`'s
    configuration; names the table does not have are left out."""
    stored = data_columns(snapshot.spark_schema(), snapshot.partition_columns)
    leaves = {c.name.lower(): c for c in _leaves(snapshot)}
    indexed = {c.name.lower() for c in stats_columns(stored, snapshot.configuration) if c.minmax}
    return [name for name in dict.fromkeys(columns) if name in leaves and leaves[name].minmax and name not in indexed]


def indexing_properties(snapshot: Snapshot, columns: Iterable[str]) -> dict[str, str]:
    """The table-property change after which every column of `columns` gets min/max statistics and no
    column loses them; empty when there is nothing to change (or no sound change: a name that would need
    quoting in ``dataSkippingStatsColumns``)."""
    missing = unindexed(snapshot, columns)
    if not missing:
        return {}
    configuration = snapshot.configuration
    explicit = configuration.get(STATS_COLUMNS)
    if explicit:
        if not all(_PLAIN_NAME.fullmatch(part) for name in missing for part in name.split(".")):
            return {}
        return {STATS_COLUMNS: ",".join([*(p.strip() for p in explicit.split(",") if p.strip()), *missing])}
    order = [c.name.lower() for c in _leaves(snapshot)]
    current = int(configuration.get(INDEXED_COLUMNS) or DEFAULT_INDEXED_COLUMNS)
    needed = max(order.index(name) for name in missing) + 1
    return {INDEXED_COLUMNS: str(max(needed, current))}


def _leaves(snapshot: Snapshot) -> list[StatsColumn]:
    """Every leaf column that could carry statistics, in the order Delta counts them."""
    return stats_columns(data_columns(snapshot.spark_schema(), snapshot.partition_columns), {INDEXED_COLUMNS: "-1"})


def with_properties(snapshot: Snapshot, properties: Mapping[str, str]) -> Snapshot:
    """`snapshot` as it would read after the property change (for the estimate)."""
    if not properties:
        return snapshot
    return replace(snapshot, configuration={**snapshot.configuration, **properties})


def describe_change(snapshot: Snapshot, properties: Mapping[str, str]) -> str:
    """``delta.dataSkippingNumIndexedCols 32 -> 37``, for reasons and the decision record."""
    return ", ".join(f"{k} {snapshot.configuration.get(k) or '(unset)'} -> {v}" for k, v in properties.items())


def key_statistics(snapshot: Snapshot, features: FeatureSet, enabled: bool) -> tuple[str, dict[str, object] | None]:
    """For a decision on `features`: the note its reason gets and the record it keeps (None and "" when
    every clustering key already has statistics)."""
    missing = unindexed(snapshot, key_columns(features))
    if not missing:
        return "", None
    names = ", ".join(missing)
    if not enabled:
        note = (
            f"; standard readers cannot skip on {names} (no min/max statistics: outside the table's "
            f"{STATS_COLUMNS} / {INDEXED_COLUMNS}); stats_for_clustering_keys: true would collect them"
        )
        return note, {"columns": missing, "properties": {}, "enabled": False}
    properties = indexing_properties(snapshot, missing)
    if not properties:
        note = f"; {names} need quoting in {STATS_COLUMNS}: standard readers cannot skip on them"
        return note, {"columns": missing, "properties": {}, "enabled": True}
    note = f"; clustering keys {names} get min/max statistics first ({describe_change(snapshot, properties)})"
    return note, {"columns": missing, "properties": properties, "enabled": True}
