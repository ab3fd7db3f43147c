"""Delta's own commands on one table, through SQL only.

Where only SQL reaches the cluster (Spark Connect, Databricks serverless and shared compute: no JVM
gateway), deltaopt cannot stage files and commit them itself; the cluster's Delta does both with its
own ``OPTIMIZE``, so its conflict checker, log store and catalog are the ones the table's writers use.
deltaopt still chooses the layout (the columns and their order) and tags the commit with its run through
Delta's ``userMetadata`` (``spark.databricks.delta.commitInfo.userMetadata``, set on the session for the
one command), which is how the service finds the run's commit, as it finds its own commits' tags.

Statements are rendered by sqlglot from identifiers (`optimizer.table.locations.sql_name`), never spliced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from optimizer.errors import TableAccessError
from optimizer.table.access import CUSTOM_METADATA_KEY
from optimizer.table.delta_engine import java_message
from optimizer.table.locations import sql_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


@dataclass(frozen=True)
class CommandResult:
    """What one Delta OPTIMIZE did, from its own metrics and the history entry it committed."""

    version: int | None  # None: nothing was rewritten (no commit)
    files_in: int
    files_out: int
    bytes_in: int
    bytes_out: int
    engine: str | None


class DeltaSql:
    """Delta's SQL commands on the table at `uri` (its catalog name when configured by name)."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        self.spark = spark
        self.uri = uri
        self.name = sql_name(uri)

    def detail(self) -> dict[str, Any]:
        """``DESCRIBE DETAIL``: format, location, clustering columns, properties."""
        try:
            return dict(self.spark.sql(f"DESCRIBE DETAIL {self.name}").collect()[0].asDict())
        except Exception as err:
            raise TableAccessError(f"Delta cannot describe {self.uri}: {java_message(err)}") from err

    def clustering_columns(self) -> tuple[str, ...] | None:
        """The table's liquid clustering keys (None: not clustered, or not known to this session)."""
        try:
            columns = self.detail().get("clusteringColumns")
        except TableAccessError:
            return None
        return tuple(columns) if columns else None

    def cluster_by(self, keys: Sequence[str]) -> None:
        columns = ", ".join(exp.to_identifier(k, quoted=True).sql("spark") for k in keys)
        self._run(f"ALTER TABLE {self.name} CLUSTER BY ({columns})")

    def optimize(self, zorder_by: Sequence[str], tag: Mapping[str, Any]) -> CommandResult:
        """``OPTIMIZE <table> [ZORDER BY (...)]`` with `tag` as the commit's user metadata. Delta's
        transaction commits atomically (``dataChange=false``) or not at all."""
        statement = f"OPTIMIZE {self.name}"
        if zorder_by:
            statement += " ZORDER BY (" + ", ".join(exp.to_identifier(c, quoted=True).sql("spark") for c in zorder_by)
            statement += ")"
        previous = self.spark.conf.get(USER_METADATA_CONF, None)
        self.spark.conf.set(USER_METADATA_CONF, json.dumps({CUSTOM_METADATA_KEY: dict(tag)}, separators=(",", ":")))
        try:
            metrics = self._run(statement).collect()[0]["metrics"].asDict(recursive=True)
        finally:
            if previous is None:
                self.spark.conf.unset(USER_METADATA_CONF)
            else:
                self.spark.conf.set(USER_METADATA_CONF, previous)
        added = int(metrics.get("numFilesAdded") or 0)
        version, engine = self.latest() if added else (None, None)
        return CommandResult(
            version,
            int(metrics.get("numFilesRemoved") or 0),
            added,
            _total(metrics.get("filesRemoved")),
            _total(metrics.get("filesAdded")),
            engine,
        )

    def latest(self) -> tuple[int, str | None]:
        """The newest version in the table's history and the engine that committed it."""
        row = self._run(f"DESCRIBE HISTORY {self.name} LIMIT 1").collect()[0].asDict()
        return int(row["version"]), row.get("engineInfo")

    def _run(self, statement: str) -> Any:
        try:
            return self.spark.sql(statement)
        except Exception as err:  # Delta's commands: their transactions commit or not, atomically
            raise TableAccessError(
                f"Delta's `{statement.split(' ', 1)[0]}` on {self.uri} failed: {java_message(err)}"
            ) from err


def _total(summary: Any) -> int:
    return int((summary or {}).get("totalSize") or 0) if isinstance(summary, dict) else 0
