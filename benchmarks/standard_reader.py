"""An independent standard Delta reader for the benchmarks: DuckDB's Delta extension.

Standard engines (Spark with Delta, Databricks, Trino, DuckDB) skip files with the Delta log's
partition values and bare-column min/max only; deltaopt's SOP bits and expression statistics are
invisible to them. DuckDB's ``EXPLAIN ANALYZE`` of a ``delta_scan`` prints ``Scanning Files: k/n``,
the files it kept; when no filter reaches the scan (a filter on an expression of columns) it prints
only ``Total Files Read: n``: every file. The extension ships inside the PyPI wheel
``duckdb-extension-delta`` and is loaded from there (no download). Some filters make the extension
raise an internal error (its bug, also on tables deltaopt never touched): that query's count is
unknown (None), never a pass.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot

_SCANNING = re.compile(r"Scanning Files:\s*(\d+)\s*/\s*(\d+)")
_READ = re.compile(r"Total Files Read:\s*(\d+)")  # printed alone when no filter reached the scan


def _extension() -> Path:
    import duckdb_extension_delta

    found = sorted(Path(duckdb_extension_delta.__file__).parent.rglob("delta.duckdb_extension"))
    if not found:
        raise RuntimeError("duckdb-extension-delta is installed without its extension file")
    return found[-1]


@dataclass(frozen=True)
class Scanned:
    files: int
    total: int


class DuckDBReader:
    """One DuckDB connection with the Delta extension loaded."""

    def __init__(self) -> None:
        import duckdb

        self.connection: Any = duckdb.connect(
            config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false"}
        )
        self.connection.execute(f"LOAD '{_extension()}'")
        self.errors: Counter[str] = Counter()  # first line of each error the extension raised

    def files_scanned(self, path: str, where: str | None, columns: tuple[str, ...] = ()) -> Scanned | None:
        """Files DuckDB keeps for ``SELECT count(*) ... WHERE where`` over the Delta table at `path`."""
        condition = sqlglot.transpile(where, read="spark", write="duckdb")[0] if where else "TRUE"
        projection = ", ".join(f"max({c})" for c in columns) or "count(*)"
        sql = f"EXPLAIN ANALYZE SELECT {projection} FROM delta_scan('{path}') WHERE {condition}"
        try:
            rows = self.connection.execute(sql).fetchall()
        except Exception as err:  # the extension's internal errors: unknown, not a pass
            self.errors[str(err).strip().splitlines()[0][:120] if str(err).strip() else type(err).__name__] += 1
            return None
        profile = "\n".join(str(cell) for row in rows for cell in row)
        match = _SCANNING.search(profile)
        if match:
            return Scanned(int(match.group(1)), int(match.group(2)))
        read = _READ.search(profile)  # no filter pushed into the scan (e.g. on an expression): every file
        return Scanned(int(read.group(1)), int(read.group(1))) if read else None

    def count(self, path: str, where: str | None) -> int:
        condition = sqlglot.transpile(where, read="spark", write="duckdb")[0] if where else "TRUE"
        return int(
            self.connection.execute(f"SELECT count(*) FROM delta_scan('{path}') WHERE {condition}").fetchone()[0]
        )

    def close(self) -> None:
        self.connection.close()


class CountingReads:
    """DuckDB's own Parquet reader over files read through a byte-counting file system: the bytes it
    really reads show whether it skipped row groups inside the files (their statistics exclude the
    filter) - DuckDB's profiler counters do not show it."""

    def __init__(self) -> None:
        import duckdb
        from fsspec.implementations.local import LocalFileSystem

        counter = self

        class _Counting(LocalFileSystem):
            protocol = ("deltaopt-counting",)

            def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
                handle = super()._open(path, mode, **kwargs)
                read = handle.read

                def counted(size: int = -1) -> bytes:
                    data = read(size)
                    counter.bytes_read += len(data)
                    return bytes(data)

                handle.read = counted
                return handle

        self.bytes_read = 0
        self.connection: Any = duckdb.connect()
        self.connection.register_filesystem(_Counting())

    def read(self, files: list[str], where: str, columns: tuple[str, ...]) -> int:
        """Bytes DuckDB reads to answer ``SELECT max(columns) FROM files WHERE where``."""
        condition = sqlglot.transpile(where, read="spark", write="duckdb")[0]
        listed = ", ".join(f"'deltaopt-counting://{f}'" for f in files)
        projection = ", ".join(f"max({c})" for c in columns) or "count(*)"
        self.bytes_read = 0
        self.connection.execute(f"SELECT {projection} FROM read_parquet([{listed}]) WHERE {condition}").fetchall()
        return self.bytes_read

    def close(self) -> None:
        self.connection.close()
