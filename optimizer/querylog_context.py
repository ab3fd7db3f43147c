"""How configured tables appear in queries: the `SqlContext` importers and recorders use.

For each configured table: its Delta schema (so unqualified columns in joins resolve), and its name
and path as aliases of its log identity (``table_id``), which is also what is watched.
"""

from __future__ import annotations

import logging

from optimizer.config import Config
from optimizer.errors import TableAccessError
from optimizer.table import open_table
from querylog.capture import SqlContext

log = logging.getLogger(__name__)


def table_columns(path: str) -> dict[str, str]:
    """{column: Spark type} of the Delta table at `path`."""
    schema = open_table(path).snapshot().spark_schema()
    return {f.name.lower(): f.dataType.simpleString() for f in schema.fields}


def sql_context(config: Config) -> SqlContext:
    schema: dict[str, dict[str, str]] = {}
    aliases: dict[str, str] = {}
    for table in config.tables:
        aliases[table.name.lower()] = table.identity
        aliases[table.path.rstrip("/")] = table.identity
        try:
            schema[table.name.lower()] = table_columns(table.path)
        except TableAccessError as err:
            log.warning("no schema for %s (%s): unqualified columns in joins stay unresolved", table.name, err)
    return SqlContext(schema=schema or None, watched={t.identity for t in config.tables}, aliases=aliases)
