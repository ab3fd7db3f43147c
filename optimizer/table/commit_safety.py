"""Whether concurrent commits to a table's store are safe, decided before deltaopt commits anything.

deltaopt commits through delta-rs while other engines (Spark with Delta, Databricks, other delta-rs
writers) commit to the same table. Delta's guarantee rests on the store making "create the next
commit file unless it exists" atomic for *every* writer:

* local and HDFS file systems, Azure (ADLS Gen2 / Blob), Google Cloud Storage: atomic
  rename-if-absent or conditional put (``If-None-Match`` / ``ifGenerationMatch``), built in;
* AWS S3 through delta-rs 1.6 (deltalake pinned ``>=1.6.6,<1.7``): every commit is a conditional put
  (``If-None-Match``), atomic where the store honours it and against writers that use it too. Safe:
  ``AWS_CONDITIONAL_PUT=etag``, the operator's word that every writer uses conditional writes (or
  ``dynamo:<table>``, object_store's DynamoDB commit, where every writer uses that table). Refused:
  ``AWS_S3_LOCKING_PROVIDER=dynamodb``, which delta-rs 1.6 no longer acts on (it logs "delta-rs no
  longer supports S3DynamoDBLogStores" and commits without the lock table, so Delta-Spark writers
  that use the table through ``S3DynamoDBLogStore`` are not coordinated with it); and
  ``AWS_S3_ALLOW_UNSAFE_RENAME=true``, the setting that once let writers overwrite each other's commits.

Settings are read as delta-rs reads them: ``AWS_S3_*`` keys from the storage options as written or in
lower case, else the environment variable (``str_option``); object-store keys such as
``AWS_CONDITIONAL_PUT`` / ``conditional_put`` in any case, the storage options' before the
environment's (``with_env_s3``). `check_commit_safety` returns how commits are coordinated, or raises
`UnsafeStoreError` naming the setting. `deploy/OPERATIONS.md` says the same per store.
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
    "set AWS_CONDITIONAL_PUT=etag if every writer of the table uses S3 conditional writes, or commit through "
    "Delta on Spark (spark.commit: delta-spark) with spark.delta.logStore.s3a.impl=io.delta.storage."
    "S3DynamoDBLogStore and the lock table every writer uses"
)
CONDITIONAL_PUT_KEYS = frozenset({"aws_conditional_put", "conditional_put"})


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
    environ = os.environ if environ is None else environ
    options = storage_options or {}
    if (_delta_rs_key(options, environ, "AWS_S3_ALLOW_UNSAFE_RENAME") or "").strip().lower() == "true":
        raise UnsafeStoreError(
            f"{uri}: AWS_S3_ALLOW_UNSAFE_RENAME=true declares commits that need not be atomic (it let concurrent "
            f"writers overwrite each other's commits, losing or duplicating rows); remove it and {FIX}"
        )
    if (_delta_rs_key(options, environ, "AWS_S3_LOCKING_PROVIDER") or "").strip().lower() == "dynamodb":
        raise UnsafeStoreError(
            f"{uri}: AWS_S3_LOCKING_PROVIDER=dynamodb has no effect in delta-rs 1.6 (it no longer has a DynamoDB "
            "log store): its commits would not take the lock table's entries, so writers that use the table "
            f"(Delta-Spark's S3DynamoDBLogStore) could overwrite them; remove it and {FIX}; nothing was committed"
        )
    conditional = (_object_store_key(options, environ, CONDITIONAL_PUT_KEYS) or "").strip().lower()
    if conditional == "etag" or conditional.startswith("dynamo:"):
        return f"S3 conditional put ({conditional}; every writer must use it)"
    raise UnsafeStoreError(f"{uri}: no commit coordination is configured for S3; {FIX}; nothing was committed")


def _delta_rs_key(options: Mapping[str, str], environ: Mapping[str, str], key: str) -> str | None:
    """A delta-rs setting as its ``str_option`` reads it: the option as written, else in lower case, else
    the environment variable as written."""
    for candidate in (key, key.lower()):
        if candidate in options:
            return options[candidate]
    return environ.get(key)


def _object_store_key(options: Mapping[str, str], environ: Mapping[str, str], aliases: frozenset[str]) -> str | None:
    """An object-store setting as delta-rs merges it (``with_env_s3``): any case and alias, the storage
    options' before the environment's."""
    for source in (options, environ):
        for key, value in source.items():
            if key.lower() in aliases:
                return value
    return None
