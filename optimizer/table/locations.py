"""What the configuration says about a table's location that every reader and writer must use: its name
in the session's catalog and its object-store settings.

Tables are opened by URI all over deltaopt (the service, the CLI, the joined dimensions a skipping rule
reads); the settings of the configured tables are registered here once, by location, so that each
`open_table` gets the storage options of the table it opens (the longest registered prefix: a
``s3a://bucket`` default covers every table in the bucket) and Delta's SQL commands name a catalog
table by its name, never by a path the catalog may not allow.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from optimizer.errors import TableAccessError, TableNotFoundError


@dataclass(frozen=True)
class Location:
    uri: str
    catalog_name: str | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    single_writer: bool = False  # no other writer commits while deltaopt runs (the operator says so)


_lock = threading.Lock()
_known: dict[str, Location] = {}


def _key(uri: str) -> str:
    return uri.rstrip("/")


def register(location: Location) -> None:
    with _lock:
        _known[_key(location.uri)] = location


def forget_all() -> None:
    """Drop every registration (a new configuration, or a test)."""
    with _lock:
        _known.clear()


def storage_options(uri: str) -> dict[str, str]:
    """The storage options registered for `uri` or the longest registered location containing it."""
    key = _key(uri)
    with _lock:
        found = [loc for k, loc in _known.items() if key == k or key.startswith(k + "/")]
    best = max(found, key=lambda loc: len(loc.uri), default=None)
    return dict(best.storage_options) if best is not None else {}


def single_writer(uri: str) -> bool:
    with _lock:
        known = _known.get(_key(uri))
    return known.single_writer if known is not None else False


def catalog_name(uri: str) -> str | None:
    with _lock:
        known = _known.get(_key(uri))
    return known.catalog_name if known is not None else None


def sql_name(uri: str) -> str:
    """The table in Spark SQL, rendered by sqlglot (never spliced): its catalog name when it was
    configured by name, else ``delta.`<uri>```."""
    name = catalog_name(uri)
    if name is not None:
        return quoted_name(name)
    return exp.Table(this=exp.to_identifier(uri, quoted=True), db="delta").sql("spark")


def catalog_location(spark: object, name: str) -> str:
    """Where the catalog table `name` keeps its data, from ``DESCRIBE DETAIL`` through the session's
    catalog (a Hive metastore, Unity Catalog, Glue). Raises `TableNotFoundError` when the catalog does not
    know it, `TableAccessError` when it is not a Delta table."""
    try:
        row = spark.sql(f"DESCRIBE DETAIL {quoted_name(name)}").collect()[0].asDict()  # type: ignore[attr-defined]
    except Exception as err:  # AnalysisException: TABLE_OR_VIEW_NOT_FOUND, or the catalog is unreachable
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TableNotFoundError(f"catalog table {name}: {message}") from err
    if str(row.get("format") or "").lower() != "delta" or not row.get("location"):
        raise TableAccessError(f"catalog table {name} is not a Delta table (format {row.get('format')!r})")
    return local_path(str(row["location"]))


def quoted_name(name: str) -> str:
    """``a.b.c`` as Spark SQL with every part quoted (the configuration allows plain identifiers only)."""
    return ".".join(exp.to_identifier(part, quoted=True).sql("spark") for part in name.split("."))


def local_path(uri: str) -> str:
    """A metastore's ``file:/x`` / ``file:///x`` as the plain path delta-rs and pyarrow open; others as they are."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri
