"""Where table schemas and locations come from: Delta tables under configured locations, the Spark
catalog, and a schema file (`querylog.schemas`).

Importers need every table's columns to attribute a join query's conjuncts (an unqualified
``d_year = 2001`` belongs to ``date_dim`` only if something says so), and deriving a fact table's
filter from a dimension filter needs the dimension table itself. A `Catalog` holds both: the merged
schema, and for Delta tables found on storage, where they are.

Sources, first wins where two know a table: the watched tables (their own Delta logs), the schema
file, Delta tables under the locations, then the Spark catalog.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from optimizer.errors import TableAccessError
from optimizer.table import open_table
from querylog.errors import SchemaSourceError
from querylog.schemas import Schema, load_schema_file, merge_schemas

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from optimizer.config import Config, TableSettings

log = logging.getLogger(__name__)
MAX_DEPTH = 3  # directory levels searched below a location for Delta tables


@dataclass(frozen=True)
class Catalog:
    """The merged schema, and the storage location of each Delta table known by name."""

    schema: Schema = field(default_factory=dict)
    locations: Mapping[str, str] = field(default_factory=dict)  # lower-case table name -> table URI

    @property
    def tables(self) -> int:
        return len(self.schema)


def table_columns(path: str) -> dict[str, str]:
    """{column: Spark type} of the Delta table at `path`. Raises `TableAccessError`."""
    schema = open_table(path).snapshot().spark_schema()
    return {f.name.lower(): f.dataType.simpleString() for f in schema.fields}


def delta_tables_under(location: str) -> dict[str, str]:
    """{directory name: URI} of the Delta tables at or below `location` (a directory holding
    ``_delta_log``), at most `MAX_DEPTH` levels down; a table's own subdirectories are not searched.
    Raises `SchemaSourceError` when `location` cannot be listed."""
    if "://" in location:
        fs, root = pafs.FileSystem.from_uri(location)
        prefix = location[: location.index("://") + 3]
    else:
        fs = pafs.LocalFileSystem()
        root, prefix = location.rstrip("/"), ""
    found: dict[str, str] = {}

    def visit(directory: str, depth: int) -> None:
        try:
            entries = fs.get_file_info(pafs.FileSelector(directory, allow_not_found=False))
        except (OSError, FileNotFoundError) as err:
            if depth == 0:
                raise SchemaSourceError(f"cannot list schema location {location}: {err}") from err
            return
        names = {e.base_name for e in entries if e.type == pafs.FileType.Directory}
        if "_delta_log" in names:
            found.setdefault(directory.rstrip("/").rsplit("/", 1)[-1].lower(), prefix + directory)
            return
        if depth < MAX_DEPTH:
            for name in sorted(names):
                if not name.startswith((".", "_")):
                    visit(f"{directory.rstrip('/')}/{name}", depth + 1)

    visit(root, 0)
    return found


def schemas_from_locations(locations: Iterable[str]) -> Catalog:
    """The schemas of the Delta tables under `locations` (read from their logs) and where they are."""
    schema: Schema = {}
    where: dict[str, str] = {}
    for location in locations:
        for name, uri in delta_tables_under(location).items():
            try:
                schema.setdefault(name, table_columns(uri))
                where.setdefault(name, uri)
            except TableAccessError as err:
                log.warning("skipping %s under %s: %s", name, location, err)
    return Catalog(schema, where)


def table_locations(config: Config) -> dict[str, str]:
    """{lower-case name: URI} of the Delta tables under the configured ``schemas.locations`` and of the
    watched tables: where joined features find their dimensions. A location that cannot be listed is
    left out."""
    found: dict[str, str] = {}
    for location in config.schemas.locations:
        try:
            found.update({k: v for k, v in delta_tables_under(location).items() if k not in found})
        except SchemaSourceError as err:
            log.warning("no tables listed under %s: %s", location, err)
    return {**found, **{t.name.lower(): t.path for t in config.tables}}


def schemas_from_spark_catalog(spark: SparkSession) -> Schema:
    """{table: {column: type}} of the tables and views in the session's catalog (every database), by
    bare and by qualified name. A table the catalog lists but cannot describe is skipped."""
    schema: Schema = {}
    for database in spark.catalog.listDatabases():
        for table in spark.catalog.listTables(database.name):
            qualified = f"{database.name}.{table.name}" if not table.isTemporary else table.name
            try:
                fields = spark.table(qualified).schema.fields
            except Exception as err:  # Spark's AnalysisException: a broken entry must not stop the rest
                log.warning("catalog table %s has no readable schema: %s", qualified, str(err).splitlines()[0])
                continue
            columns = {f.name.lower(): f.dataType.simpleString() for f in fields}
            schema.setdefault(table.name.lower(), columns)
            schema.setdefault(qualified.lower(), columns)
    return schema


def build_catalog(
    watched: Mapping[str, str] | None = None,
    *,
    schema_file: str | None = None,
    locations: Iterable[str] = (),
    spark: SparkSession | None = None,
) -> Catalog:
    """One `Catalog` from every configured source. `watched` maps watched tables' names to their paths.
    Raises `SchemaSourceError` for a schema file or location that cannot be read."""
    watched_schema: Schema = {}
    for name, path in (watched or {}).items():
        try:
            watched_schema[name.lower()] = table_columns(path)
        except TableAccessError as err:
            log.warning("no schema for %s (%s): unqualified columns in joins stay unresolved", name, err)
    from_file = load_schema_file(schema_file) if schema_file else {}
    found = schemas_from_locations(locations)
    from_catalog = schemas_from_spark_catalog(spark) if spark is not None else {}
    paths = {**found.locations, **{n.lower(): p for n, p in (watched or {}).items()}}
    return Catalog(merge_schemas(watched_schema, from_file, found.schema, from_catalog), paths)


def resolve_tables(config: Config, spark: SparkSession | Callable[[], SparkSession] | None = None) -> Config:
    """`config` with each table named in the session's catalog (``table: schema.name``) given its
    location as ``path``, and every table's location registered with its catalog name and storage
    options (`optimizer.table.locations`), so that all readers and writers use them. `spark` (or a
    function that builds it) is only needed when a table is configured by name. Raises
    `TableNotFoundError` naming a table the catalog does not know."""
    return config.model_copy(update={"tables": tuple(resolved_table(t, spark) for t in config.tables)})


def resolved_table(
    table: TableSettings, spark: SparkSession | Callable[[], SparkSession] | None = None
) -> TableSettings:
    """`table` with its location from the catalog when it is named there, registered (see
    `resolve_tables`). Raises `TableAccessError` when the catalog does not know it as a Delta table."""
    from optimizer.table.locations import Location, catalog_location, register

    if table.table and not table.path:
        if spark is None:
            raise TableAccessError(f"tables.{table.name}: a catalog name needs a Spark session to resolve")
        session = spark() if callable(spark) else spark
        table = table.model_copy(update={"path": catalog_location(session, table.table)})
    register(Location(table.path, table.table, table.storage_options, table.single_writer))
    return table
