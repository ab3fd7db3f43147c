"""Whether concurrent commits to a table's store are safe, decided before deltaopt commits anything.

deltaopt commits through delta-rs while other engines (Spark with Delta, Databricks, other delta-rs
writers) commit to the same table. Delta's guarantee rests on the store making "create the next
commit file unless it exists" atomic for *every* writer:

* local and HDFS file systems, Azure (ADLS Gen2 / Blob), Google Cloud Storage: atomic
  rename-if-absent or conditional put (``If-None-Match`` / ``ifGenerationMatch``), built in;
* AWS S3: no such primitive unless configured. Safe: ``AWS_S3_LOCKING_PROVIDER=dynamodb`` with a lock
  table (``DELTA_DYNAMO_TABLE_NAME``, default ``delta_log``) that every writer uses (Delta-Spark's
  ``S3DynamoDBLogStore`` reads the same table), or ``AWS_CONDITIONAL_PUT=etag`` (S3 conditional
  writes, or S3-compatible stores that support them) where every writer uses it. Unsafe:
  ``AWS_S3_ALLOW_UNSAFE_RENAME=true``, which lets two writers overwrite each other's commit.

Settings come from the table's storage options, else the environment (as delta-rs reads them).
`check_commit_safety` returns how commits are coordinated, or raises `UnsafeStoreError` naming the
setting. `deploy/OPERATIONS.md` says the same per store.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlparse

from optimizer.errors import TableAccessError

S3_SCHEMES = frozenset({"s3", "s3a"})
SAFE_SCHEMES = {
    "": "atomic rename-if-absent on the local file system",
    "file": "atomic rename-if-absent on the local file system",
    "hdfs": "atomic rename on HDFS",
    "viewfs": "atomic rename on HDFS",
    "abfs": "Azure conditional put (If-None-Match)",
    "abfss": "Azure conditional put (If-None-Match)",
    "az": "Azure conditional put (If-None-Match)",
    "adl": "Azure conditional put (If-None-Match)",
    "azure": "Azure conditional put (If-None-Match)",
    "wasb": "Azure conditional put (If-None-Match)",
    "wasbs": "Azure conditional put (If-None-Match)",
    "gs": "GCS preconditions (ifGenerationMatch)",
    "gcs": "GCS preconditions (ifGenerationMatch)",
}
FIX = (
    "set AWS_S3_LOCKING_PROVIDER=dynamodb with a DynamoDB lock table (DELTA_DYNAMO_TABLE_NAME) that every "
    "writer of the table uses, or AWS_CONDITIONAL_PUT=etag where every writer uses conditional writes"
)


class UnsafeStoreError(TableAccessError):
    """The table's store is configured so that concurrent commits could overwrite each other."""


def check_commit_safety(
    uri: str, storage_options: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """How commits to `uri` are made atomic; raises `UnsafeStoreError` naming the setting if they are not."""
    scheme = urlparse(uri).scheme.lower() if "://" in uri else ""
    if scheme in SAFE_SCHEMES:
        return SAFE_SCHEMES[scheme]
    if scheme not in S3_SCHEMES:
        raise UnsafeStoreError(
            f"{uri}: deltaopt does not know whether concurrent commits are atomic on '{scheme}://' stores; "
            "nothing was committed"
        )
    settings = {k.upper(): v for k, v in (environ if environ is not None else os.environ).items()}
    settings.update({k.upper(): v for k, v in (storage_options or {}).items()})
    if settings.get("AWS_S3_ALLOW_UNSAFE_RENAME", "").strip().lower() == "true":
        raise UnsafeStoreError(
            f"{uri}: AWS_S3_ALLOW_UNSAFE_RENAME=true lets concurrent writers overwrite each other's commits, "
            f"which can lose or duplicate rows; remove it and {FIX}"
        )
    if settings.get("AWS_S3_LOCKING_PROVIDER", "").strip().lower() == "dynamodb":
        table = settings.get("DELTA_DYNAMO_TABLE_NAME", "delta_log")
        return f"DynamoDB lock table '{table}' (every writer must use it)"
    conditional = settings.get("AWS_CONDITIONAL_PUT", settings.get("CONDITIONAL_PUT", "")).strip().lower()
    if conditional == "etag" or conditional.startswith("dynamo:"):
        return f"S3 conditional put ({conditional}; every writer must use it)"
    raise UnsafeStoreError(f"{uri}: no commit coordination is configured for S3; {FIX}")
