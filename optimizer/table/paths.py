"""Where a path of the Delta log points.

The log names a data file by a URL-encoded path, relative to the table's root for the files its own
writers wrote, or as an absolute URI for files elsewhere: a shallow clone names its source's files so
(Delta writes ``file:/x/...`` with one slash for local paths, ``s3://bucket/...`` for objects), and
joining such a URI onto the table's root names a file that does not exist. Every reader of a file the
log names (Spark's Parquet reader through `TableAccess.spark_uri`, footers through `open_location`)
resolves it here, so an absolute path is read where it points, never under the table.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs

from optimizer.table.storage import S3, arrow_filesystem

if TYPE_CHECKING:
    from optimizer.table.access import TableAccess

# a scheme (two characters at least: ``C:/`` is a Windows drive, not a scheme) and the path's slash
_ABSOLUTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:/")


def hadoop_uri(uri: str) -> str:
    """The URI Spark's Hadoop file systems (and so Delta's log store choice) use for `uri`: ``s3://`` is
    ``s3a://`` to Hadoop; every other URI or path is its own."""
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def is_absolute(path: str) -> bool:
    """Whether `path` is a URI of its own (``file:/x``, ``file:///x``, ``s3://b/k``, ...), not a path
    under a table's root. Relative log paths never match: Hive-style escaping turns every ``:`` of a
    partition directory into ``%3A``, and a scheme has no ``=``."""
    return _ABSOLUTE.match(path) is not None


def open_location(table: TableAccess, log_path: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's file system holding the file `log_path` (as the log has it: URL-encoded) names, and
    the file's decoded path in it: under the table's root, or where an absolute URI points (the
    table's storage options serve an object store's other buckets too, as Spark's do)."""
    if not is_absolute(log_path):
        fs, root = table.filesystem()
        return fs, f"{root}/{unquote(log_path)}"
    parsed = urlparse(log_path)
    scheme = parsed.scheme.lower()
    if scheme == "file":
        return pafs.LocalFileSystem(), unquote(parsed.path)
    if scheme in S3:
        fs, _ = arrow_filesystem(f"s3://{parsed.netloc}", table.storage_options)
        return fs, f"{parsed.netloc}{unquote(parsed.path)}"
    return pafs.FileSystem.from_uri(log_path)  # pyarrow decodes the path itself
