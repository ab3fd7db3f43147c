"""Table schemas for resolving logged SQL, from a schema file: SQL DDL or YAML.

Logged statements name columns without their table (``WHERE ss_sold_date_sk = d_date_sk AND
d_year = 2001``); only the tables' schemas say which table each column belongs to. Warehouses keep
those schemas in DDL scripts, so a file of ``CREATE TABLE`` statements (any dialect sqlglot reads;
other statements are ignored) or a YAML mapping ``{table: {column: type}}`` is accepted. The other
sources (Delta logs under configured locations, the Spark catalog) need data access and live in
`optimizer.catalog`; all of them merge into one `Schema` with `merge_schemas`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import sqlglot
import yaml
from sqlglot import exp
from sqlglot.errors import SqlglotError

from querylog.errors import SchemaSourceError

Schema = dict[str, dict[str, str]]  # lower-case table name -> {lower-case column: type text}


def parse_ddl(text: str, dialect: str = "spark") -> Schema:
    """The tables of every ``CREATE TABLE name (column type, ...)`` in `text`; a table is known by its
    bare name and by its qualified name. Raises `SchemaSourceError` when `text` does not parse."""
    try:
        statements = sqlglot.parse(text, read=dialect)
    except SqlglotError as err:
        raise SchemaSourceError(f"schema DDL does not parse: {str(err).splitlines()[0]}") from err
    schema: Schema = {}
    for statement in statements:
        if not isinstance(statement, exp.Create) or (statement.kind or "").upper() != "TABLE":
            continue
        target = statement.this
        if not isinstance(target, exp.Schema) or not isinstance(target.this, exp.Table):
            continue  # CREATE TABLE ... AS SELECT: no column list to read
        columns = {
            d.name.lower(): d.args["kind"].sql(dialect="spark").lower() if d.args.get("kind") else "unknown"
            for d in target.expressions
            if isinstance(d, exp.ColumnDef)
        }
        for name in _names(target.this):
            schema[name] = columns
    return schema


def _names(table: exp.Table) -> list[str]:
    parts = [p.lower() for p in (table.catalog, table.db, table.name) if p]
    return sorted({parts[-1], ".".join(parts)})


def parse_yaml_schema(text: str) -> Schema:
    """``{table: {column: type}}``. Raises `SchemaSourceError` naming what is malformed."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SchemaSourceError(f"schema YAML does not parse: {err}") from err
    if not isinstance(data, Mapping):
        raise SchemaSourceError("schema YAML must map table names to {column: type} mappings")
    schema: Schema = {}
    for table, columns in data.items():
        if not isinstance(columns, Mapping) or not columns:
            raise SchemaSourceError(f"schema YAML: table {table!r} must map column names to types")
        schema[str(table).lower()] = {str(c).lower(): str(t).lower() for c, t in columns.items()}
    return schema


def load_schema_file(path: str | Path) -> Schema:
    """A schema file: ``.yaml``/``.yml`` as YAML, anything else as SQL DDL.
    Raises `SchemaSourceError` when it is missing, unreadable, malformed or declares no table."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise SchemaSourceError(f"cannot read schema file {path}: {err}") from err
    schema = parse_yaml_schema(text) if path.suffix.lower() in (".yaml", ".yml") else parse_ddl(text)
    if not schema:
        raise SchemaSourceError(f"schema file {path} declares no table")
    return schema


def merge_schemas(*schemas: Mapping[str, Mapping[str, str]]) -> Schema:
    """One schema from several sources; where two sources know a table, the earlier one wins."""
    merged: Schema = {}
    for schema in schemas:
        for table, columns in schema.items():
            merged.setdefault(table.lower(), {c.lower(): t for c, t in columns.items()})
    return merged
