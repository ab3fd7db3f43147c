"""Per-location settings: storage options by longest prefix, catalog names in Delta's SQL, and the
translation of one set of options into what delta-rs, pyarrow and Hadoop's S3A each take."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from optimizer.table import locations
from optimizer.table.storage import arrow_filesystem, hadoop_conf

OPTIONS = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_REGION": "eu-west-1",
}


@pytest.fixture(autouse=True)
def clean_registry():
    locations.forget_all()
    yield
    locations.forget_all()


def test_storage_options_come_from_the_longest_registered_location():
    locations.register(locations.Location("s3a://lake", storage_options={"AWS_REGION": "a"}))
    locations.register(locations.Location("s3a://lake/sales/", storage_options={"AWS_REGION": "b"}))
    assert locations.storage_options("s3a://lake/sales/orders") == {"AWS_REGION": "b"}
    assert locations.storage_options("s3a://lake/events") == {"AWS_REGION": "a"}
    assert locations.storage_options("s3a://lakehouse/x") == {}  # a prefix of the name, not of the path
    assert locations.storage_options("/local/t") == {}


def test_delta_sql_names_a_catalog_table_by_name_and_anything_else_by_quoted_path():
    locations.register(locations.Location("/wh/sales.db/orders", catalog_name="sales.orders"))
    assert locations.sql_name("/wh/sales.db/orders/") == "`sales`.`orders`"
    assert locations.sql_name("/data/we`ird") == "delta.`/data/we``ird`"
    assert locations.local_path("file:/wh/a%20b") == "/wh/a b" and locations.local_path("s3a://b/t") == "s3a://b/t"


def test_one_set_of_options_for_s3a_per_bucket_and_for_pyarrow():
    conf = hadoop_conf("s3a://lake/events", OPTIONS)
    prefix = "spark.hadoop.fs.s3a.bucket.lake."
    assert conf[prefix + "endpoint"] == "http://127.0.0.1:9000"
    assert conf[prefix + "connection.ssl.enabled"] == "false" and conf[prefix + "path.style.access"] == "true"
    assert conf[prefix + "access.key"] == "key" and conf[prefix + "secret.key"] == "secret"
    assert conf[prefix + "endpoint.region"] == "eu-west-1"
    assert all(key.startswith(prefix) for key in conf)  # other buckets keep their own settings
    assert hadoop_conf("/local/t", OPTIONS) == {} and hadoop_conf("abfss://c@a/t", OPTIONS) == {}
    fs, root = arrow_filesystem("s3a://lake/events/", OPTIONS)
    assert isinstance(fs, pafs.S3FileSystem) and root == "lake/events"
    assert fs.region == "eu-west-1"
