"""How configured tables appear in queries: the `SqlContext` importers and recorders use.

The schemas of the watched tables and of the configured schema sources (`optimizer.catalog`), so
every column of a join resolves to its table; each watched table's name and path are aliases of its
log identity (``table_id``), which is also what is watched. With join derivation, only the tables
deltaopt optimises are its targets (`derivation_context`); every other table is a source only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from optimizer.catalog import Catalog, build_catalog
from optimizer.config import Config, SchemaSettings
from optimizer.joins import JoinDeriver
from querylog.capture import SqlContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


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


def derivation_targets(config: Config | None, located: str | None = None) -> frozenset[str]:
    """The identities whose scans get join-derived filters: the configured tables deltaopt optimises
    (not paused; a paused table is listed to be read, a source only), or with no configuration the
    table the log sits beside (`located`). A derivation costs Spark passes over its sources, spent
    only where a layout will use the filters. Identities can be shared (two copies under one
    ``table_id``): an identity is a target when some table not paused has it."""
    if config is not None:
        return frozenset(t.identity for t in config.tables if not t.paused)
    return frozenset({located} if located else ())


def derivation_context(
    context: SqlContext,
    spark: SparkSession,
    catalog: Catalog,
    *,
    config: Config | None,
    through_facts: bool = False,
    located: str | None = None,
) -> SqlContext:
    """`context` deriving join filters through `spark` for the `derivation_targets` only, from the
    tables `catalog` locates, with the fact/dimension roles the configuration states; a fact is a
    source only with `through_facts`. When no table is a target, one warning says nothing is derived
    (never a silent import without the filters asked for)."""
    targets = derivation_targets(config, located)
    if not targets:
        log.warning("--derive-joins: %s, so no table is a derivation target: nothing is derived", _why_none(config))
    roles = {t.name.lower(): t.join_role for t in config.tables if t.join_role} if config is not None else {}
    deriver = JoinDeriver(spark, catalog.locations, roles=roles, through_facts=through_facts)
    return replace(context, targets=targets, derive=deriver)


def _why_none(config: Config | None) -> str:
    if config is not None:
        return "every configured table is paused"
    return "the log does not sit beside a table (<table>_querylog) and no --config lists the tables to optimise"
