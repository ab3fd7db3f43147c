"""A table on an S3-compatible endpoint (moto's server, started here) at ``s3a://``: the storage options
in the configuration reach Spark (Hadoop's S3A connector, fetched and cached like Delta's jars), delta-rs
and pyarrow, and Delta's transaction commits the OPTIMIZE."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.clusters.driver import Driver
from tests.clusters.servers import free_port, process_env, running

# its module fixture starts every scheme's child in the first test: per-test lines cannot be told apart (tests/tiers.py)
pytestmark = [pytest.mark.spark, pytest.mark.every_change]
BUCKET = "deltaopt-tests"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """moto's S3 server on a free port with one bucket: the storage options that reach it."""
    import boto3

    port = free_port()
    logs = tmp_path_factory.mktemp("s3")
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with running(command, port, logs / "moto.log", timeout=60):
        options = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
        client = boto3.client(
            "s3",
            endpoint_url=options["AWS_ENDPOINT_URL"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket=BUCKET)
        yield options


def write_with_spark(root: Path, uri: str, options: dict[str, str]) -> None:
    """The users' writer: Spark with Delta, through S3A, in a process of its own."""
    script = textwrap.dedent(
        f"""
        from pyspark.sql import functions as F
        from optimizer.config import SparkSettings, TableSettings
        from optimizer.runtime import build_session
        table = TableSettings(name="events", path={uri!r}, storage_options={options!r})
        spark = build_session(SparkSettings(master="local[1]", delta="required"), [table])
        frame = spark.range(0, 6000, 1, 4).withColumn("x", (F.col("id") * 7919) % 1000)
        frame.write.format("delta").save({uri!r})
        """
    )
    env = process_env(PYSPARK_PYTHON=sys.executable)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=root, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def events(s3: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """A table the users' Spark wrote to ``s3a://`` (6000 rows), shared by this module's tests."""
    uri = f"s3a://{BUCKET}/events"
    write_with_spark(tmp_path_factory.mktemp("writer"), uri, s3)
    return uri


def rows(uri: str, options: dict[str, str]):  # type: ignore[no-untyped-def]
    """Every row, read by delta-rs with the same options, in id order."""
    from deltalake import DeltaTable

    return DeltaTable(uri, storage_options=options).to_pyarrow_table().sort_by("id")


def test_a_table_on_s3_is_optimised_through_deltas_transaction(s3, events, tmp_path):
    from optimizer.table import open_table

    uri = events
    before = rows(uri, s3)
    config = tmp_path / "deltaopt.yaml"
    table = {"name": "events", "path": uri, "single_writer": True}  # moto has no lock table: one writer at a time
    data = {
        "spark": {"master": "local[1]", "delta": "required"},
        "storage_options": s3,
        "tables": [table],
        "service": {"state_dir": str(tmp_path / "state")},
    }
    config.write_text(yaml.safe_dump(data))
    with Driver(tmp_path, tmp_path / "driver.log") as driver:  # both commands in one driver process
        done = driver.cli("optimize", "--config", str(config), "--table", "events", "--z", "x", "--json").json()
        assert done["committed_by"] == "delta-spark" and done["rows"] == 6000
        last = open_table(uri, s3).history()[-1]
        assert last.operation == "OPTIMIZE" and "Delta-Lake" in (last.engine or "") and last.is_deltaopt_optimize
        assert rows(uri, s3).equals(before)

        del table["single_writer"]  # another writer may commit: Delta's single-driver S3 log store is refused
        config.write_text(yaml.safe_dump(data))
        command = ("optimize", "--config", str(config), "--table", "events")
        refused = driver.cli(*command, "--z", "x", "--all-files")
    assert refused.code != 0 and "single_writer: true" in refused.err
    assert open_table(uri, s3).history()[-1].version == last.version


DYNAMO = "io.delta.storage.S3DynamoDBLogStore"
REFUSED = [
    # Delta opens an s3:// table at s3a:// and DelegatingLogStore picks the store by that scheme: the
    # s3 key has no effect, the commit would go through S3SingleDriverLogStore
    ("s3", "spark.delta.logStore.s3.impl", "S3SingleDriverLogStore (no spark.delta.logStore.s3a.impl: "),
    # the key that takes effect, without the store's jar: Delta could not create it
    ("s3a", "spark.delta.logStore.s3a.impl", f"cannot load the log store {DYNAMO}"),
]
REFUSED_TEST = "test_an_s3_table_whose_commit_store_does_not_coordinate_drivers_is_refused"


@dataclass(frozen=True)
class Refusal:
    """One case's command, started: the table's URI and version before it, the CLI process, its output."""

    uri: str
    version: int | None
    process: subprocess.Popen
    output: Path

    def wait(self) -> tuple[int, str, str]:
        """The command's exit status, stdout and stderr, once it ended."""
        code = self.process.wait(timeout=600)
        return code, (self.output / "stdout").read_text(), (self.output / "stderr").read_text()


def start_refusal(s3: dict[str, str], events: str, case: tuple[str, str], root: Path) -> Refusal:
    """``deltaopt optimize`` of `events` opened at `scheme`, with log-store `key` set to DynamoDB's store,
    started as an operator runs it (its own process and driver), in `root`."""
    from optimizer.table import open_table

    scheme, key = case
    uri = f"{scheme}://" + events[len("s3a://") :]
    version = open_table(uri, s3).snapshot().version
    data = {
        "spark": {"master": "local[1]", "delta": "required", "conf": {key: DYNAMO}},
        "storage_options": s3,
        "tables": [{"name": "events", "path": uri}],
        "service": {"state_dir": str(root / "state")},
    }
    config = root / "deltaopt.yaml"
    config.write_text(yaml.safe_dump(data))
    env = process_env(PYSPARK_PYTHON=sys.executable)
    command = [sys.executable, "-m", "optimizer.cli", "optimize", "--config", str(config), "--table", "events"]
    with open(root / "stdout", "w") as out, open(root / "stderr", "w") as err:
        process = subprocess.Popen([*command, "--z", "x", "--all-files"], stdout=out, stderr=err, env=env, cwd=root)
    return Refusal(uri, version, process, root)


@pytest.fixture(scope="module")
def refusals(
    request: pytest.FixtureRequest, s3: dict[str, str], events: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Refusal]]:
    """The selected cases' commands (by scheme), started together: their driver JVMs boot side by side on
    the two cores instead of one after the other. Each case's test waits for its own and checks it."""
    items = request.session.items  # under `make test`'s workers, every module's tests go to one (--dist loadfile)
    selected = {i.callspec.params["scheme"] for i in items if getattr(i, "originalname", "") == REFUSED_TEST}
    started = {
        scheme: start_refusal(s3, events, (scheme, key), tmp_path_factory.mktemp(f"refused-{scheme}"))
        for scheme, key, _ in REFUSED
        if scheme in selected
    }
    yield started
    for refusal in started.values():
        refusal.process.kill()
        refusal.process.wait()


@pytest.mark.parametrize(("scheme", "key", "named"), REFUSED)
def test_an_s3_table_whose_commit_store_does_not_coordinate_drivers_is_refused(s3, refusals, scheme, key, named):
    """The check asks which store Delta commits the table's log through (``s3a://``), refusing before
    any work and naming the key that takes effect."""
    from optimizer.table import open_table

    refusal = refusals[scheme]  # its command, started with `key` set (`start_refusal`)
    code, stdout, stderr = refusal.wait()
    assert code != 0, stdout[-2000:]
    assert named in stderr, stderr[-2000:]
    assert f"spark.delta.logStore.s3a.impl={DYNAMO}" in stderr  # the key that takes effect
    assert "nothing was committed" in stderr and "Traceback" not in stderr
    assert open_table(refusal.uri, s3).snapshot().version == refusal.version


def test_delta_rs_commits_without_the_dynamodb_lock_table(s3, tmp_path):
    """Why the delta-rs path refuses ``AWS_S3_LOCKING_PROVIDER=dynamodb`` (`commit_safety`): the installed
    delta-rs writes no lock entry, so Delta-Spark writers using ``S3DynamoDBLogStore`` on the same table
    would not see its commits. moto serves DynamoDB on the same endpoint."""
    import boto3
    import pyarrow as pa
    from deltalake import write_deltalake

    from optimizer.table.commit_safety import UnsafeStoreError, check_commit_safety

    endpoint = s3["AWS_ENDPOINT_URL"]
    locked = {**s3, "AWS_S3_LOCKING_PROVIDER": "dynamodb", "DELTA_DYNAMO_TABLE_NAME": "delta_log"}
    locked["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    uri = f"s3://{BUCKET}/locked"
    write_deltalake(uri, pa.table({"x": [1, 2]}), storage_options=locked)
    write_deltalake(uri, pa.table({"x": [3]}), storage_options=locked, mode="append")
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    assert dynamodb.list_tables()["TableNames"] == []  # no lock table was created, let alone written
    with pytest.raises(UnsafeStoreError, match="AWS_S3_LOCKING_PROVIDER=dynamodb has no effect"):
        check_commit_safety(uri, locked, environ={})
