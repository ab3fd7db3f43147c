"""What deltaopt knows about a table's Delta features: the one place every reader and committer asks.

A table's protocol (reader and writer features) and configuration decide three things:

* **how its rows are read**: a plain Parquet reader is right only when the files hold every row and
  every column under its logical name; deletion vectors, column mapping and type widening need Delta's
  own reader (`needs_delta_reader`);
* **how new files are written**: column mapping (physical names, field ids) and enabled row tracking
  (row ids and row commit versions materialised into the files) need Delta's own file writer
  (`needs_delta_writer`). Row tracking is *enabled* as Delta's ``RowTracking.isEnabled`` says: the
  feature supported and ``delta.enableRowTracking = true``. Supported but disabled (the first step of
  ``DROP FEATURE rowTracking``), Delta's OPTIMIZE keeps no row ids and writes no materialised columns,
  and its transaction assigns every new file fresh row ids and commit versions: only the commit needs
  Delta there;
* **whether deltaopt may rewrite it at all** (`check_rewritable`): a feature it does not know, or one its
  engine cannot honour, is refused before any work, in one line naming the feature.

Facts on what Delta's own OPTIMIZE does per feature: docs/TABLE-FEATURES.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optimizer.errors import UnsupportedTableError

# Features Delta's engine (delta-spark 4.0, Databricks Runtime) reads and writes through the same reader,
# file writer and transaction deltaopt drives: a rewrite through them keeps what the feature promises.
ENGINE_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "identityColumns",
        "deletionVectors",
        "rowTracking",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "inCommitTimestamp",
        "variantType",
        "variantType-preview",
        "checkpointProtection",
        "allowColumnDefaults",
        "clustering",
        "icebergCompatV1",
        "icebergCompatV2",
    }
)
# Reader features whose files a plain Parquet reader still reads correctly (no Delta engine needed).
PLAIN_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "variantType"})
# Features whose rows only Delta's reader gets right.
DELTA_READER_FEATURES = frozenset({"deletionVectors", "columnMapping", "typeWidening", "typeWidening-preview"})

COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
ROW_ID_COLUMN = "delta.rowTracking.materializedRowIdColumnName"
ROW_VERSION_COLUMN = "delta.rowTracking.materializedRowCommitVersionColumnName"
ROW_TRACKING_ENABLED = "delta.enableRowTracking"  # Delta assigns the column names as soon as it is supported


@dataclass(frozen=True)
class TableFeatures:
    """A table's protocol and the configuration that gives its features meaning."""

    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: frozenset[str] = frozenset()
    writer_features: frozenset[str] = frozenset()
    column_mapping: str = "none"  # none | name | id
    row_tracking: bool = False  # row tracking enabled (Delta's RowTracking.isEnabled): ids must survive rewrites
    logical_names: Mapping[str, str] = field(default_factory=dict)  # physical dotted path -> logical dotted path

    @property
    def all_features(self) -> frozenset[str]:
        return self.reader_features | self.writer_features

    @property
    def deletion_vectors(self) -> bool:
        return "deletionVectors" in self.all_features

    @property
    def row_tracking_supported(self) -> bool:
        """The protocol lists row tracking: every new file gets fresh row ids from Delta's transaction,
        whether or not the ids are enabled (`row_tracking`) and so preserved."""
        return "rowTracking" in self.writer_features

    @property
    def clustered(self) -> bool:
        return "clustering" in self.writer_features  # liquid: the keys are Delta's (DESCRIBE DETAIL)

    @property
    def delta_reader_features(self) -> list[str]:
        """The features whose rows a plain Parquet reader gets wrong (deleted rows, physical names, narrower
        stored types); legacy protocols (reader 2) carry column mapping without naming the feature."""
        named = set(self.reader_features & DELTA_READER_FEATURES)
        return sorted(named | {"columnMapping"} if self.column_mapping != "none" else named)

    @property
    def needs_delta_reader(self) -> bool:
        return bool(self.delta_reader_features)

    @property
    def physical_names(self) -> dict[str, str]:
        """Logical dotted leaf path -> physical one (the inverse of `logical_names`)."""
        return {logical: physical for physical, logical in self.logical_names.items()}

    @property
    def needs_delta_writer(self) -> bool:
        """Whether files must be written by Delta's writer: physical names and field ids, materialised
        row ids and row commit versions."""
        return self.column_mapping != "none" or self.row_tracking

    def unknown(self) -> list[str]:
        """Features no Delta engine deltaopt drives is known to honour through a rewrite."""
        return sorted(self.all_features - ENGINE_FEATURES)

    def summary(self) -> str:
        """One line for `table info` and decisions: the features that change how deltaopt works."""
        named = sorted(self.all_features)
        parts = [", ".join(named) if named else f"protocol {self.min_reader_version}/{self.min_writer_version}"]
        if self.column_mapping != "none":
            parts.append(f"column mapping by {self.column_mapping}")
        if self.row_tracking_supported and not self.row_tracking:
            parts.append("row tracking disabled (row ids not kept)")
        return "; ".join(parts)


def table_features(
    min_reader_version: int,
    min_writer_version: int,
    reader_features: Any,
    writer_features: Any,
    *,
    configuration: Mapping[str, str | None],
    schema_json: str,
) -> TableFeatures:
    """`TableFeatures` from a protocol, configuration and schema as any Delta library returns them."""
    readers = frozenset(reader_features or ())
    writers = frozenset(writer_features or ())
    mapping = str(configuration.get(COLUMN_MAPPING_MODE) or "none").lower()
    tracked = "rowTracking" in writers and str(configuration.get(ROW_TRACKING_ENABLED, "")).lower() == "true"
    return TableFeatures(
        min_reader_version=int(min_reader_version),
        min_writer_version=int(min_writer_version),
        reader_features=readers,
        writer_features=writers,
        column_mapping=mapping,
        row_tracking=tracked,
        logical_names=logical_names(schema_json) if mapping != "none" else {},
    )


def logical_names(schema_json: str) -> dict[str, str]:
    """Physical dotted leaf path -> logical dotted leaf path, for a column-mapped schema (statistics and
    partition values in the log are keyed by physical names). Fields without a physical name keep theirs."""
    schema = json.loads(schema_json)
    found: dict[str, str] = {}

    def visit(struct: Mapping[str, Any], physical: tuple[str, ...], logical: tuple[str, ...]) -> None:
        for f in struct.get("fields", ()):
            name = f["name"]
            stored = (f.get("metadata") or {}).get(PHYSICAL_NAME) or name
            path, names = (*physical, stored), (*logical, name)
            kind = f.get("type")
            if isinstance(kind, Mapping) and kind.get("type") == "struct":
                visit(kind, path, names)
            found[".".join(path)] = ".".join(names)

    visit(schema, (), ())
    return found


def check_readable(features: TableFeatures, uri: str, *, delta_engine: bool) -> None:
    """Refuse to read rows of a table whose rows only Delta's reader gets right when there is none."""
    if features.needs_delta_reader and not delta_engine:
        what = ", ".join(features.delta_reader_features)
        raise UnsupportedTableError(
            f"{uri} uses {what}: only Delta's own reader returns its rows, and this session has no Delta engine "
            "(start it with the Delta jars: `make install`, spark.delta: on); nothing was read"
        )


def check_known(features: TableFeatures, uri: str) -> None:
    """Refuse, before any work, a table with a feature deltaopt does not know."""
    unknown = features.unknown()
    if unknown:
        raise UnsupportedTableError(
            f"{uri} uses table feature(s) {', '.join(unknown)} that deltaopt does not know; it leaves the table "
            "alone (nothing was read or written)"
        )


def check_rewritable(features: TableFeatures, uri: str, *, delta_engine: bool) -> None:
    """Refuse, before any work, a rewrite deltaopt cannot make keep every feature's promise."""
    check_known(features, uri)
    if features.clustered:
        raise UnsupportedTableError(
            f"{uri} is liquid-clustered: Delta's OPTIMIZE re-clusters it by its keys and would undo "
            "a deltaopt Z-order, so deltaopt does not rewrite it (its keys are the user's: `deltaopt optimize` runs "
            "Delta's OPTIMIZE by them, `--liquid set --z COLUMNS` makes those its keys; nothing was read or written)"
        )
    if delta_engine:
        return
    # supported row tracking, enabled or not: new files need fresh row ids, which only Delta's transaction
    # assigns (delta-rs refuses to commit to such a table)
    needs = sorted({*features.delta_reader_features, *(["rowTracking"] if features.row_tracking_supported else [])})
    if needs:
        raise UnsupportedTableError(
            f"{uri} uses {', '.join(needs)}: a rewrite must go through Delta's own reader, writer and "
            "transaction, and this session has no Delta engine (spark.commit: delta-rs, Spark Connect, or no "
            "Delta jars); nothing was read or written"
        )
