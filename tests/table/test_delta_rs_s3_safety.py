"""The delta-rs path's S3 check reads the settings delta-rs 1.6 acts on, the way it reads them: the
DynamoDB locking provider is gone from delta-rs (it logs an error and commits without the lock table:
`tests/clusters/test_object_storage.py` shows it against moto), and object-store keys in the storage
options win over the environment, whatever their case or alias."""

from __future__ import annotations

import pytest

from optimizer.table.commit_safety import UnsafeStoreError, check_commit_safety


@pytest.mark.parametrize(
    ("options", "environ"),
    [
        ({"AWS_S3_LOCKING_PROVIDER": "dynamodb"}, {}),
        ({"aws_s3_locking_provider": "dynamodb", "DELTA_DYNAMO_TABLE_NAME": "locks"}, {}),
        ({}, {"AWS_S3_LOCKING_PROVIDER": "dynamodb"}),
        ({"AWS_S3_LOCKING_PROVIDER": "dynamodb", "AWS_CONDITIONAL_PUT": "etag"}, {}),
    ],
)
def test_a_dynamodb_lock_table_is_refused_because_delta_rs_no_longer_uses_it(options, environ):
    with pytest.raises(UnsafeStoreError, match="AWS_S3_LOCKING_PROVIDER=dynamodb") as refused:
        check_commit_safety("s3://bucket/t", options, environ=environ)
    assert "spark.delta.logStore.s3a.impl" in str(refused.value) and "nothing was committed" in str(refused.value)


def test_conditional_put_in_the_storage_options_wins_over_the_environment():
    """delta-rs merges the environment under the options (``with_env_s3``), by the object store's key,
    so ``conditional_put: disabled`` in the options is what its commits use."""
    with pytest.raises(UnsafeStoreError, match="no commit coordination"):
        check_commit_safety("s3a://bucket/t", {"conditional_put": "disabled"}, environ={"AWS_CONDITIONAL_PUT": "etag"})
    lowercase_env = {"aws_conditional_put": "etag"}  # the object store's keys are read in any case
    assert "conditional put (etag" in check_commit_safety("s3://bucket/t", {}, environ=lowercase_env)


def test_locking_keys_are_read_as_delta_rs_reads_them():
    """``AWS_S3_*`` keys: the option as written or in lower case, else the environment variable as
    written; a mixed-case option is not read by delta-rs, so it cannot make a store unsafe or safe."""
    mixed = {"Aws_S3_Allow_Unsafe_Rename": "true", "AWS_CONDITIONAL_PUT": "etag"}
    assert "conditional put" in check_commit_safety("s3://bucket/t", mixed, environ={})
    with pytest.raises(UnsafeStoreError, match="AWS_S3_ALLOW_UNSAFE_RENAME=true"):
        check_commit_safety("s3://bucket/t", {"aws_s3_allow_unsafe_rename": "true"}, environ={})
