"""Fixtures for the clusters users have: each starts the real thing and stops it afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clusters.servers import delta_submit_conf, free_port, running, spark_class


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A standalone Spark master with one worker (1 core, 1 GiB): the ``spark://`` URL, and the worker's
    directory, where every application that ran executors on it leaves an ``app-*`` directory."""
    logs = tmp_path_factory.mktemp("standalone")
    port, worker_port = free_port(), free_port()
    master = spark_class(
        "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"
    )
    url = f"spark://127.0.0.1:{port}"
    worker = spark_class(
        "org.apache.spark.deploy.worker.Worker",
        url,
        *("--host", "127.0.0.1", "--port", str(worker_port), "--webui-port", "0"),
        *("--cores", "1", "--memory", "1g", "--work-dir", str(logs / "work")),
    )
    # graceful: the worker stops the executors it started
    with running(master, port, logs / "master.log"), running(worker, worker_port, logs / "worker.log", graceful=True):
        yield url, logs / "work"


@pytest.fixture(scope="session")
def connect_delta(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server started with Delta's jars, as a cluster with Delta serves Connect."""
    logs = tmp_path_factory.mktemp("connect")
    port = free_port()
    command = [
        *spark_class("org.apache.spark.deploy.SparkSubmit"),
        *("--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]"),
        *("--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false"),
        *("--conf", "spark.sql.session.timeZone=UTC", "--conf", "spark.sql.shuffle.partitions=4"),
        *delta_submit_conf(),
        "spark-internal",
    ]
    with running(command, port, logs / "server.log"):
        yield f"sc://127.0.0.1:{port}"
