"""Delta table access: records, the interface, and the delta-rs + Spark implementation."""

from optimizer.table.access import Commit, DataFile, Snapshot, StagedFile, TableAccess
from optimizer.table.handle import DeltaTableHandle

__all__ = ["Commit", "DataFile", "DeltaTableHandle", "Snapshot", "StagedFile", "TableAccess", "open_table"]


def open_table(uri: str, storage_options: dict[str, str] | None = None) -> TableAccess:
    """The table at `uri`; nothing is read until a method is called. Without `storage_options`, those the
    configuration registered for its location (`optimizer.table.locations`)."""
    from optimizer.table.locations import storage_options as registered

    return DeltaTableHandle(uri, storage_options if storage_options is not None else registered(uri) or None)
