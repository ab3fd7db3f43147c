"""Importers for query sources a platform team already has: SQL files, query-history exports,
Spark event logs. Each returns an `ImportReport`; bad entries are quarantined, never fatal."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from querylog.capture import Captured
from querylog.store import QuarantineTable, QueryLogTable, quarantine_path


@dataclass(frozen=True)
class ImportReport:
    source: str
    entries: int  # statements, rows or events read
    scans: int  # rows appended to the query log
    quarantined: int
    already_imported: bool = False

    def describe(self) -> str:
        if self.already_imported:
            return f"{self.source}: already imported (same content), nothing appended"
        return f"{self.source}: {self.entries} entries -> {self.scans} scan rows, {self.quarantined} quarantined"


def content_key(data: bytes) -> str:
    return "import:" + hashlib.sha256(data).hexdigest()[:40]


def commit_import(log: QueryLogTable, captured: Captured, key: str, source: str, entries: int) -> ImportReport:
    """Append the rows and quarantine records of one source exactly once (keyed by its content)."""
    quarantine = QuarantineTable(quarantine_path(log.uri), log.storage_options)
    if log.committed_batch(key) is not None:
        return ImportReport(source, entries, 0, 0, already_imported=True)
    if quarantine.committed_batch(key) is None:
        quarantine.append(captured.quarantined, key, 0)
    log.append(captured.scans, key, 0)
    return ImportReport(source, entries, len(captured.scans), len(captured.quarantined))
