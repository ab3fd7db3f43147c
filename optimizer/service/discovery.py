"""Tables found rather than listed (``discover:`` in the configuration): the Delta tables under a
storage prefix or in a catalog schema, listed again every ``relist`` seconds while the service runs.

A discovered table is named by its directory (prefix) or ``schema.table`` (catalog) and takes the
configuration's ``defaults``; a table listed under ``tables`` with the same name or location keeps its
own entry. Query logs (``*_querylog``) and quarantines are never watched. A prefix or schema that
cannot be listed is reported once (logged) until it can be again; its tables stay watched meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from optimizer.catalog import delta_tables_under, resolved_table
from optimizer.config import Config, DiscoverySettings, TableSettings
from optimizer.errors import TableAccessError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
NOT_WATCHED = ("_querylog", "_quarantine")  # deltaopt's own side tables


class Discovery:
    """The watched tables now: the configured ones plus those the last listing of each source found."""

    def __init__(self, config: Config, spark: Callable[[], SparkSession]) -> None:
        self.config = config
        self._spark = spark
        self._found: dict[int, list[TableSettings]] = {}  # per source: its tables at its last listing
        self._failing: set[int] = set()
        self._lock = threading.Lock()

    def tables(self) -> tuple[TableSettings, ...]:
        """The configured tables, then the discovered ones no configured entry names or locates."""
        listed = self.config.tables
        taken = {t.name for t in listed} | {t.path.rstrip("/") for t in listed if t.path}
        found: dict[str, TableSettings] = {}
        with self._lock:
            for tables in self._found.values():
                for table in tables:
                    if table.name not in taken and table.path.rstrip("/") not in taken:
                        found.setdefault(table.name, table)
        return (*listed, *found.values())

    def relist(self) -> None:
        """List every source again (a failing one keeps its last tables and is reported once)."""
        for number, source in enumerate(self.config.discover):
            try:
                tables = self._list(source)
            except Exception as err:  # an unreachable store or catalog: reported once, not every listing
                if number not in self._failing:
                    log.warning("cannot list %s for tables: %s", source.prefix or source.schema_name, err)
                    self._failing.add(number)
                continue
            if number in self._failing:
                log.info("listing %s works again", source.prefix or source.schema_name)
                self._failing.discard(number)
            with self._lock:
                self._found[number] = tables

    def _list(self, source: DiscoverySettings) -> list[TableSettings]:
        settings = {"interval": source.interval, "thresholds": self.config.defaults}
        if source.prefix:
            found = delta_tables_under(source.prefix)
            return [TableSettings(name=n, path=p, **settings) for n, p in sorted(found.items()) if _watched(n)]
        schema, spark = source.schema_name or "", self._spark()
        tables = []
        for row in spark.catalog.listTables(schema):
            name = f"{schema}.{row.name}"
            if not _watched(row.name):
                continue
            try:  # where it is, through the catalog; a view or a non-Delta table is not watched
                tables.append(resolved_table(TableSettings(name=name, table=name, **settings), spark))
            except TableAccessError as err:
                log.debug("not watching %s: %s", name, err)
        return tables


def _watched(name: str) -> bool:
    return not name.lower().endswith(NOT_WATCHED)
