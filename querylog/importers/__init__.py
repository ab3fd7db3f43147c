"""Importers for query sources a platform team already has: SQL files, query-history exports,
Spark event logs. Each returns an `ImportReport`; bad entries are quarantined, never fatal."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from querylog.capture import Captured
from querylog.store import QuarantineTable, QueryLogTable, quarantine_path


@dataclass(frozen=True)
class ImportReport:
    source: str
    entries: int  # statements, rows or events read
    scans: int  # rows appended to the query log
    quarantined: int
    already_imported: bool = False
    warnings: tuple[str, ...] = ()  # the source was read, but what it gave looks wrong
    newest: datetime | None = None  # the latest scan appended
    statements: int = 0  # SQL statements among the entries
    resolved: int = 0  # statements whose every table's schema was known
    derived: int = 0  # join-derived filters recorded
    truncated: int = 0  # statements or scans cut to the capture's bounds (conjuncts dropped soundly)

    def describe(self) -> str:
        if self.already_imported:
            return f"{self.source}: already imported (same content), nothing appended"
        text = f"{self.source}: {self.entries} entries -> {self.scans} scan rows, {self.quarantined} quarantined"
        if self.statements:
            text += (
                f"; {self.resolved} of {self.statements} statements resolved fully (every table's schema known),"
                f" {self.derived} join-derived filter(s)"
            )
        if self.truncated:
            text += (
                f"; {self.truncated} statement(s) or scan(s) over the capture's bounds kept only their first "
                "conjuncts (a weaker filter, still sound; README, Guarantees)"
            )
        return text + "".join(f"\n  WARNING: {w}" for w in self.warnings)


def content_key(data: bytes) -> str:
    """The idempotency key of a source: its content's hash."""
    return digest_key(hashlib.sha256(data))


def digest_key(hasher: hashlib._Hash) -> str:
    """`content_key` of content hashed incrementally with sha256."""
    return "import:" + hasher.hexdigest()[:40]


def commit_import(
    log: QueryLogTable,
    captured: Captured,
    key: str,
    *,
    source: str,
    entries: int,
    warnings: tuple[str, ...] = (),
) -> ImportReport:
    """Append the rows and quarantine records of one source exactly once (keyed by its content)."""
    quarantine = QuarantineTable(quarantine_path(log.uri), log.storage_options)
    if log.committed_batch(key) is not None:
        return ImportReport(source, entries, 0, 0, already_imported=True, warnings=warnings)
    if quarantine.committed_batch(key) is None:
        quarantine.append(captured.quarantined, key, 0)
    log.append(captured.scans, key, 0)
    newest = max((s.ts for s in captured.scans), default=None)
    return ImportReport(
        source,
        entries,
        len(captured.scans),
        len(captured.quarantined),
        warnings=warnings,
        newest=newest,
        statements=captured.statements,
        resolved=captured.resolved,
        derived=sum(len(s.derived) for s in captured.scans),
        truncated=captured.truncated,
    )
