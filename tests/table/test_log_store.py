"""The Delta path's commit-safety check asks the question Delta's commit asks: which ``LogStore`` Delta uses
for the path it commits to (``s3a://`` for an ``s3://`` table), read as Delta reads it (the SparkConf,
``spark.delta.logStore.class`` before the scheme's key, keys with or without ``spark.``)."""

from __future__ import annotations

import pytest

from optimizer.table.commit_safety import UnsafeStoreError

DELTA = "org.apache.spark.sql.delta"
DYNAMO = "io.delta.storage.S3DynamoDBLogStore"


def lookup(conf: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda key, default: conf.get(key, default)


def test_an_s3_table_with_only_the_s3_key_is_refused_naming_the_s3a_key():
    """Delta commits an ``s3://`` table to ``s3a://`` (deltaopt opens it there), where a ``s3.impl`` key is
    never read: the store is S3SingleDriverLogStore, and the refusal names the key that takes effect."""
    from optimizer.table.deltaspark import delta_commit_safety

    conf = lookup({"spark.delta.logStore.s3.impl": DYNAMO})
    with pytest.raises(UnsafeStoreError, match=f"spark.delta.logStore.s3a.impl={DYNAMO}") as refused:
        delta_commit_safety("s3://b/t", DELTA, conf)
    assert "S3SingleDriverLogStore" in str(refused.value) and "nothing was committed" in str(refused.value)


def test_an_s3_table_with_the_s3a_key_is_coordinated():
    from optimizer.table.deltaspark import delta_commit_safety

    conf = {"spark.delta.logStore.s3a.impl": DYNAMO, "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName": "locks"}
    assert "S3DynamoDBLogStore with lock table 'locks'" in delta_commit_safety("s3://b/t", DELTA, lookup(conf))
    unprefixed = lookup({"delta.logStore.s3a.impl": DYNAMO})  # Delta reads the key without ``spark.`` too
    assert "lock table 'delta_log'" in delta_commit_safety("s3a://b/t", DELTA, unprefixed)


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({}, "io.delta.storage.S3SingleDriverLogStore"),
        ({"spark.delta.logStore.s3.impl": DYNAMO}, "io.delta.storage.S3SingleDriverLogStore"),
        ({"delta.logStore.s3a.impl": DYNAMO}, DYNAMO),  # Delta accepts the key without ``spark.``
        ({"spark.delta.logStore.class": DYNAMO}, DYNAMO),  # one store for every scheme
        (
            {"spark.delta.logStore.class": "org.apache.spark.sql.delta.storage.DelegatingLogStore"},
            "io.delta.storage.S3SingleDriverLogStore",
        ),
    ],
)
def test_the_store_is_read_with_deltas_precedence(conf, expected):
    from optimizer.table.log_store import configured_log_store

    assert configured_log_store("s3a://b/t", lookup(conf)).class_name == expected


def test_a_store_set_on_the_class_key_is_named_in_the_refusal():
    from optimizer.table.deltaspark import delta_commit_safety

    single = lookup({"spark.delta.logStore.class": "io.delta.storage.S3SingleDriverLogStore"})
    named = r"replace spark\.delta\.logStore\.class with spark\.delta\.logStore\.s3a\.impl"
    with pytest.raises(UnsafeStoreError, match=named):
        delta_commit_safety("s3://b/t", DELTA, single)


def test_delta_itself_names_the_store_of_the_log_it_commits_to(delta_spark, tmp_path):
    """The resolution asks the ``DeltaLog`` the commit uses for its store (a table delta-spark made)."""
    from optimizer.table.log_store import resolved_log_store

    path = str(tmp_path / "t")
    delta_spark.range(3).write.format("delta").save(path)
    choice = resolved_log_store(delta_spark, path, lookup({}))
    assert (choice.class_name, choice.scheme, choice.key) == ("io.delta.storage.HDFSLogStore", "file", None)


class S3aTable:
    """A table configured at ``s3a://`` (the shared session has no S3 connector to open it)."""

    uri = "s3a://b/t"

    def spark_uri(self, path: str) -> str:
        return f"{self.uri}/{path}"


def test_a_store_set_on_the_running_session_does_not_count(delta_spark):
    """Delta reads its store from the SparkConf the context started with: a key set later with
    ``spark.conf.set`` changes nothing, so it must not make the check pass."""
    from optimizer.table.deltaspark import DeltaSparkCommitter

    delta_spark.conf.set("spark.delta.logStore.s3a.impl", DYNAMO)
    try:
        with pytest.raises(UnsafeStoreError, match="S3SingleDriverLogStore"):
            DeltaSparkCommitter(delta_spark, S3aTable()).commit_safety()  # type: ignore[arg-type]
    finally:
        delta_spark.conf.unset("spark.delta.logStore.s3a.impl")


def test_a_store_delta_cannot_load_is_refused_before_any_work(delta_spark):
    """``S3DynamoDBLogStore`` named without its jar: Delta could not create the store, so its commit would
    fail only after the rewrite was written; the check refuses first, naming the class and the key."""
    from optimizer.table.log_store import resolved_log_store

    conf = lookup({"spark.delta.logStore.s3a.impl": DYNAMO})
    with pytest.raises(UnsafeStoreError, match=f"cannot load the log store {DYNAMO}.*spark.delta.logStore.s3a.impl"):
        resolved_log_store(delta_spark, "s3a://b/t", conf)
