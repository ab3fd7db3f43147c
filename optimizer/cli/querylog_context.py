"""How configured tables appear in queries: the `SqlContext` importers and recorders use.

The schemas of the watched tables and of the configured schema sources (`optimizer.catalog`), so
every column of a join resolves to its table; each watched table's name and path are aliases of its
log identity (``table_id``), which is also what is watched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from optimizer.catalog import Catalog, build_catalog
from optimizer.config import Config, SchemaSettings
from querylog.capture import SqlContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def catalog_for(watched: Mapping[str, str], sources: SchemaSettings, spark: SparkSession | None = None) -> Catalog:
    """The schema sources of `sources` plus the `watched` tables ({name: path}); the Spark catalog only
    when enabled and a session is given."""
    return build_catalog(
        watched,
        schema_file=sources.file,
        locations=sources.locations,
        spark=spark if sources.spark_catalog else None,
    )


def sql_context(config: Config, catalog: Catalog | None = None) -> SqlContext:
    catalog = catalog or catalog_for({t.name: t.path for t in config.tables}, config.schemas)
    aliases: dict[str, str] = {}
    for table in config.tables:
        aliases[table.name.lower()] = table.identity
        aliases[table.path.rstrip("/")] = table.identity
    return SqlContext(schema=catalog.schema or None, watched={t.identity for t in config.tables}, aliases=aliases)
